/*
 * pipe.h: the wake-up pipe between the worker thread and the host's loop.
 *
 * Both ends are non-blocking and close-on-exec. The protocol keeps at most one
 * byte in flight per "there is work" edge, so a write never fills the pipe and
 * the worker never blocks on it, however long the host is away.
 */
#ifndef HWT_PIPE_H
#define HWT_PIPE_H

/* Internal to the module (see worker.h). */
#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

/* Open the pipe into fds[0] (read end) and fds[1]; returns 0 or an errno. */
int hwt_pipe_open(int fds[2]);
/* Make the read end readable: write one byte (EINTR retried, EAGAIN ignored). */
void hwt_pipe_signal(int wfd);
/* Consume one byte, if there is one; never blocks. */
void hwt_pipe_consume(int rfd);
/* Close both ends (those still open) and mark them -1. */
void hwt_pipe_close(int fds[2]);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif
