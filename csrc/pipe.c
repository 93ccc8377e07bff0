/*
 * pipe.c: the wake-up descriptor (see pipe.h). An eventfd on Linux, which
 * costs one descriptor a timer instead of two; plain pipe(2) plus fcntl,
 * which every POSIX system has, elsewhere and as the fallback. Then the
 * wake socket, a UDP socket on the loopback paired with the host's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#if defined(__linux__) && !defined(HWT_NO_EVENTFD)
#include <sys/eventfd.h>
#define HAVE_EVENTFD 1
#endif
#include "pipe.h"

/* An eventfd is both ends at once. */
static int is_eventfd(const int fds[2])
{
	return fds[0] == fds[1];
}

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
#if defined(HAVE_EVENTFD)
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (fd >= 0) {
		fds[0] = fds[1] = fd;
		return 0;
	}
	if (errno != ENOSYS && errno != EINVAL)
		return errno; /* out of descriptors or memory: a pipe would fail too */
#endif
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

void hwt_pipe_signal(const int fds[2])
{
	uint64_t one = 1; /* an eventfd takes 8 bytes, a pipe the first */
	size_t n = is_eventfd(fds) ? sizeof one : 1;
	char b = 1;
	while (write(fds[1], is_eventfd(fds) ? (const void *)&one : (const void *)&b, n) < 0 && errno == EINTR)
		;
}

void hwt_pipe_consume(const int fds[2])
{
	uint64_t buf; /* an eventfd's count is read (and reset) whole */
	while (read(fds[0], &buf, is_eventfd(fds) ? sizeof buf : 1) < 0 && errno == EINTR)
		;
}

void hwt_pipe_close(int fds[2])
{
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0 && fds[1] != fds[0])
		close(fds[1]);
	fds[0] = fds[1] = -1;
}

/* ---- the wake socket ------------------------------------------------------ */

static void loopback(struct sockaddr_in *a, int port)
{
	memset(a, 0, sizeof *a);
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

int hwt_wake_open(int *fd, int *port)
{
	struct sockaddr_in a;
	socklen_t len = sizeof a;
	int err, s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0)
		return errno;
	loopback(&a, 0);
	if (bind(s, (struct sockaddr *)&a, sizeof a) < 0 || getsockname(s, (struct sockaddr *)&a, &len) < 0)
		err = errno;
	else
		err = set_flags(s);
	if (err) {
		close(s);
		return err;
	}
	*fd = s;
	*port = ntohs(a.sin_port);
	return 0;
}

int hwt_wake_pair(int fd, const char *token, size_t len)
{
	char buf[64];
	struct sockaddr_in from;
	socklen_t flen;
	ssize_t n;
	for (;;) { /* anything else sent here first is read and dropped */
		flen = sizeof from;
		n = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &flen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EWOULDBLOCK ? EAGAIN : errno;
		if ((size_t)n == len && !memcmp(buf, token, len) && flen == sizeof from &&
		    from.sin_family == AF_INET && from.sin_addr.s_addr == htonl(INADDR_LOOPBACK))
			return connect(fd, (struct sockaddr *)&from, flen) < 0 ? errno : 0;
	}
}

void hwt_wake_send(int fd)
{
	while (send(fd, "!", 1, 0) < 0 && errno == EINTR)
		;
}
