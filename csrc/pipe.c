/*
 * pipe.c: the wake-up pipe (see pipe.h). Plain pipe(2) plus fcntl, which
 * every POSIX system has, rather than Linux's pipe2 or eventfd.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include "pipe.h"

static int set_flags(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return errno;
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return errno;
	return 0;
}

int hwt_pipe_open(int fds[2])
{
	int err;
	if (pipe(fds) < 0) {
		fds[0] = fds[1] = -1;
		return errno;
	}
	if ((err = set_flags(fds[0])) || (err = set_flags(fds[1]))) {
		hwt_pipe_close(fds);
		return err;
	}
	return 0;
}

void hwt_pipe_signal(int wfd)
{
	char b = 1;
	while (write(wfd, &b, 1) < 0 && errno == EINTR)
		;
}

void hwt_pipe_consume(int rfd)
{
	char b;
	while (read(rfd, &b, 1) < 0 && errno == EINTR)
		;
}

void hwt_pipe_close(int fds[2])
{
	int i;
	for (i = 0; i < 2; i++)
		if (fds[i] >= 0) {
			close(fds[i]);
			fds[i] = -1;
		}
}
