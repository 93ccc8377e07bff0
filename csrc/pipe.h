/*
 * pipe.h: the wake-up descriptor between the driver thread and the host's loop.
 *
 * On Linux an eventfd: one descriptor, both ends (fds[0] == fds[1]).
 * Elsewhere, or where eventfd fails (a kernel without it), a pipe: read end
 * and write end. Non-blocking and close-on-exec either way. The protocol
 * keeps at most one signal in flight per "there is work" edge, so a write
 * never fills the pipe (nor overflows the counter) and the driver never
 * blocks on it, however long the host is away.
 */
#ifndef HWT_PIPE_H
#define HWT_PIPE_H

/* Internal to the module (see worker.h). */
#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

/* Open into fds[0] (what the host polls for reading) and fds[1] (what the
 * driver writes to; the same descriptor for an eventfd); 0 or an errno. */
int hwt_pipe_open(int fds[2]);
/* Make fds[0] readable (EINTR retried, EAGAIN ignored). */
void hwt_pipe_signal(const int fds[2]);
/* Consume the signal, if there is one; never blocks. */
void hwt_pipe_consume(const int fds[2]);
/* Close what is open (an eventfd once) and mark both -1. */
void hwt_pipe_close(int fds[2]);

/* The wake socket: for a host that cannot poll a descriptor it is given but
 * can read a UDP socket it connects itself (nginx's cosockets). A datagram
 * wakes it at the driver's own, sub-millisecond, time. */
/* Open a UDP socket on 127.0.0.1 (non-blocking, close-on-exec) into *fd and
 * its port into *port; 0 or an errno. */
int hwt_wake_open(int *fd, int *port);
/* Read what came to fd until a datagram of exactly `token` from 127.0.0.1,
 * then connect fd to its sender (the host's socket); 0, EAGAIN when none has
 * come, or an errno. */
int hwt_wake_pair(int fd, const char *token, size_t len);
/* Send the host one datagram (errors ignored: a lost wake-up costs the
 * host its own fallback sleep, never a timeout). */
void hwt_wake_send(int fd);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif
