/*
 * Test-only: load a config, plan and apply its sandbox, then try things
 * directly with system calls, as if the permission engine had been skipped,
 * and print one line per attempt: "read /etc/shadow: EACCES", "connect 8080:
 * ok". tests/integration/test_sandbox.py reads the lines. Never part of ./af.
 *
 *	sandbox_try [--no-apply] [--describe] [--data D] [--skills D]
 *	    [--secrets D] CONFIG ACTION...
 *
 * Actions:
 *	read:PATH	open(PATH, O_RDONLY)
 *	list:PATH	open(PATH, O_RDONLY | O_DIRECTORY)
 *	write:PATH	open(PATH, O_WRONLY | O_CREAT | O_TRUNC)
 *	exec:PATH	fork, enter the subprocess domain, execve(PATH)
 *	execself:PATH	execve(PATH) in this process (replaces it on success)
 *	sh:CMD		fork, subprocess domain, bash -c CMD; prints "exit N"
 *	childread:PATH	fork, subprocess domain, open(PATH, O_RDONLY)
 *	connect:PORT	TCP connect to 127.0.0.1:PORT
 *	bind:PORT	TCP bind to 127.0.0.1:PORT
 *	udp:PORT	UDP sendto 127.0.0.1:PORT
 *	socket:F:T:P	socket(F, T, P), numbers
 *	resolve:HOST	getaddrinfo(HOST)
 *	ptrace, unshare, mount, fork (raw), glibcfork, vfork, clone (raw,
 *	no CLONE_THREAD), clonens (clone into a new user and mount
 *	namespace), clone3, thread (pthread_create), io_uring, bpf, keyctl,
 *	personality
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "sandbox.h"
#include "util.h"

static void
report(const char *what, int rc, int err)
{
	const char *name;

	if (rc >= 0) {
		printf("%s: ok\n", what);
	} else {
		name = strerrorname_np(err);
		if (name != NULL)
			printf("%s: %s\n", what, name);
		else
			printf("%s: errno %d\n", what, err);
	}
	fflush(stdout);
}

static int
tcp(int port, int bind_it)
{
	struct sockaddr_in sin;
	int fd, rc, e;

	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	rc = bind_it ? bind(fd, (struct sockaddr *)&sin, sizeof(sin)) :
	    connect(fd, (struct sockaddr *)&sin, sizeof(sin));
	e = errno;
	close(fd);
	errno = e;
	return rc;
}

static int
udp(int port)
{
	struct sockaddr_in sin;
	int fd, e;
	ssize_t n;

	if ((fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	n = sendto(fd, "x", 1, 0, (struct sockaddr *)&sin, sizeof(sin));
	e = errno;
	close(fd);
	errno = e;
	return n == 1 ? 0 : -1;
}

/*
 * Run fn in a child that first enters the subprocess domain, and bring its
 * errno back through a close-on-exec pipe (empty pipe: exec succeeded). With
 * status, report how the child ended instead.
 */
static void
in_child(const char *what, int mode, const char *arg)
{
	int p[2], e = 0, st;
	pid_t pid;
	ssize_t n;
	char line[300];

	if (pipe2(p, O_CLOEXEC) == -1) {
		report(what, -1, errno);
		return;
	}
	pid = fork();
	if (pid == -1) {
		e = errno;
		close(p[0]);
		close(p[1]);
		snprintf(line, sizeof(line), "%s: fork", what);
		report(line, -1, e);
		return;
	}
	if (pid == 0) {
		close(p[0]);
		if (sandbox_child_restrict() == -1) {
			e = errno;
		} else if (mode == 0) {
			char *const av[] = { (char *)arg, NULL };
			char *const ev[] = { NULL };

			execve(arg, av, ev);
			e = errno;
		} else if (mode == 1) {
			char *const av[] = { "bash", "-c", (char *)arg, NULL };
			char *const ev[] = { "PATH=/usr/local/bin:/usr/bin:/bin",
			    NULL };

			execve("/bin/bash", av, ev);
			e = errno;
		} else {
			int fd = open(arg, O_RDONLY | O_CLOEXEC);

			if (fd == -1)
				e = errno;
		}
		if (e == 0)
			e = -1;		/* done, no error */
		if (write(p[1], &e, sizeof(e)) < 0)
			_exit(2);
		_exit(mode == 2 ? 0 : 127);
	}
	close(p[1]);
	n = read(p[0], &e, sizeof(e));
	close(p[0]);
	while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
		;
	if (mode == 1 && n != (ssize_t)sizeof(e)) {
		printf("%s: exit %d\n", what, WIFEXITED(st) ? WEXITSTATUS(st) :
		    128 + WTERMSIG(st));
		fflush(stdout);
		return;
	}
	if (n == (ssize_t)sizeof(e) && e > 0)
		report(what, -1, e);
	else
		report(what, 0, 0);
}

static void *
thread_fn(void *arg)
{
	return arg;
}

static void
act(const char *a)
{
	char what[512];
	const char *v = strchr(a, ':');
	int rc, port;

	v = v != NULL ? v + 1 : "";
	port = atoi(v);
	errno = 0;
	if (strncmp(a, "read:", 5) == 0) {
		rc = open(v, O_RDONLY | O_CLOEXEC);
		snprintf(what, sizeof(what), "read %s", v);
		report(what, rc, errno);
		if (rc >= 0)
			close(rc);
	} else if (strncmp(a, "list:", 5) == 0) {
		rc = open(v, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		snprintf(what, sizeof(what), "list %s", v);
		report(what, rc, errno);
		if (rc >= 0)
			close(rc);
	} else if (strncmp(a, "write:", 6) == 0) {
		rc = open(v, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
		    O_CLOEXEC, 0600);
		snprintf(what, sizeof(what), "write %s", v);
		report(what, rc, errno);
		if (rc >= 0)
			close(rc);
	} else if (strncmp(a, "exec:", 5) == 0) {
		snprintf(what, sizeof(what), "exec %s", v);
		in_child(what, 0, v);
	} else if (strncmp(a, "sh:", 3) == 0) {
		snprintf(what, sizeof(what), "sh %s", v);
		in_child(what, 1, v);
	} else if (strncmp(a, "childread:", 10) == 0) {
		snprintf(what, sizeof(what), "childread %s", v);
		in_child(what, 2, v);
	} else if (strncmp(a, "execself:", 9) == 0) {
		char *const av[] = { (char *)v, NULL };
		char *const ev[] = { NULL };

		rc = execve(v, av, ev);
		snprintf(what, sizeof(what), "execself %s", v);
		report(what, rc, errno);
	} else if (strncmp(a, "connect:", 8) == 0) {
		rc = tcp(port, 0);
		snprintf(what, sizeof(what), "connect %d", port);
		report(what, rc, errno);
	} else if (strncmp(a, "bind:", 5) == 0) {
		rc = tcp(port, 1);
		snprintf(what, sizeof(what), "bind %d", port);
		report(what, rc, errno);
	} else if (strncmp(a, "udp:", 4) == 0) {
		rc = udp(port);
		snprintf(what, sizeof(what), "udp %d", port);
		report(what, rc, errno);
	} else if (strncmp(a, "socket:", 7) == 0) {
		int f = 0, t = 0, p = 0;

		if (sscanf(v, "%d:%d:%d", &f, &t, &p) != 3)
			fatalx("bad socket action %s", a);
		rc = socket(f, t | SOCK_CLOEXEC, p);
		snprintf(what, sizeof(what), "socket %d:%d:%d", f, t, p);
		report(what, rc, errno);
		if (rc >= 0)
			close(rc);
	} else if (strncmp(a, "resolve:", 8) == 0) {
		struct addrinfo hints, *res = NULL;

		memset(&hints, 0, sizeof(hints));
		hints.ai_socktype = SOCK_STREAM;
		rc = getaddrinfo(v, "80", &hints, &res);
		if (rc == 0) {
			printf("resolve %s: ok\n", v);
			freeaddrinfo(res);
		} else
			printf("resolve %s: %s\n", v, gai_strerror(rc));
		fflush(stdout);
	} else if (strcmp(a, "ptrace") == 0) {
		/* PTRACE_TRACEME succeeds for anyone not yet traced. */
		rc = (int)ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		report("ptrace", rc, errno);
	} else if (strcmp(a, "unshare") == 0) {
		rc = unshare(CLONE_NEWUSER);
		report("unshare", rc, errno);
	} else if (strcmp(a, "mount") == 0) {
		rc = mount("none", "/tmp", "tmpfs", 0, NULL);
		report("mount", rc, errno);
	} else if (strcmp(a, "personality") == 0) {
		rc = (int)syscall(SYS_personality, 0xffffffffUL);
		report("personality", rc, errno);
	} else if (strcmp(a, "bpf") == 0) {
		rc = (int)syscall(SYS_bpf, 0, NULL, 0);
		report("bpf", rc, errno);
	} else if (strcmp(a, "keyctl") == 0) {
		rc = (int)syscall(SYS_keyctl, 0, 0, 0, 0, 0);
		report("keyctl", rc, errno);
	} else if (strcmp(a, "io_uring") == 0) {
		char params[120];

		memset(params, 0, sizeof(params));
		rc = (int)syscall(SYS_io_uring_setup, 1, params);
		report("io_uring_setup", rc, errno);
		if (rc >= 0)
			close(rc);
	} else if (strcmp(a, "fork") == 0 || strcmp(a, "vfork") == 0 ||
	    strcmp(a, "clone") == 0 || strcmp(a, "clonens") == 0 ||
	    strcmp(a, "clone3") == 0) {
		long r;

		if (strcmp(a, "fork") == 0)
			r = syscall(SYS_fork);
		else if (strcmp(a, "vfork") == 0)
			r = vfork();
		else if (strcmp(a, "clone") == 0)
			r = syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
		else if (strcmp(a, "clonens") == 0)
			r = syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNS |
			    SIGCHLD, 0, NULL, NULL, 0);
		else {
			struct clone_args ca;

			memset(&ca, 0, sizeof(ca));
			ca.exit_signal = SIGCHLD;
			r = syscall(SYS_clone3, &ca, sizeof(ca));
		}
		if (r == 0)
			_exit(0);
		if (r > 0)
			waitpid((pid_t)r, NULL, 0);
		report(a, r >= 0 ? 0 : -1, errno);
	} else if (strcmp(a, "glibcfork") == 0) {
		pid_t r = fork();	/* glibc: clone(SIGCHLD) */

		if (r == 0)
			_exit(0);
		if (r > 0)
			waitpid(r, NULL, 0);
		report(a, r >= 0 ? 0 : -1, errno);
	} else if (strcmp(a, "thread") == 0) {
		pthread_t t;

		rc = pthread_create(&t, NULL, thread_fn, NULL);
		if (rc == 0)
			pthread_join(t, NULL);
		report("thread", rc == 0 ? 0 : -1, rc);
	} else
		fatalx("unknown action %s", a);
}

int
main(int argc, char **argv)
{
	struct cfg_dirs dirs = { NULL, NULL, NULL };
	struct sb_plan plan;
	struct cfg *c;
	char err[1024];
	int apply = 1, describe = 0, i;

	log_init(LOG_TEXT, getenv("SB_VERBOSE") != NULL);
	for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (strcmp(argv[i], "--no-apply") == 0)
			apply = 0;
		else if (strcmp(argv[i], "--describe") == 0)
			describe = 1;
		else if (strcmp(argv[i], "--data") == 0 && i + 1 < argc)
			dirs.data = argv[++i];
		else if (strcmp(argv[i], "--skills") == 0 && i + 1 < argc)
			dirs.skills = argv[++i];
		else if (strcmp(argv[i], "--secrets") == 0 && i + 1 < argc)
			dirs.secrets = argv[++i];
		else
			fatalx("unknown option %s", argv[i]);
	}
	if (i >= argc)
		fatalx("usage: sandbox_try [options] CONFIG ACTION...");
	if ((c = cfg_load(argv[i], &dirs, err, sizeof(err))) == NULL)
		fatalx("%s", err);
	if (sandbox_plan(c, &plan, err, sizeof(err)) == -1)
		fatalx("plan: %s", err);
	if (describe) {
		struct buf b;

		buf_init(&b);
		sandbox_describe(&plan, 0, &b);
		fputs(b.data, stdout);
		buf_free(&b);
	}
	if (apply) {
		if (sandbox_apply(&plan, err, sizeof(err)) == -1) {
			printf("apply: %s\n", err);
			return 1;
		}
		printf("apply: ok\n");
	}
	fflush(stdout);
	for (i++; i < argc; i++)
		act(argv[i]);
	sandbox_plan_free(&plan);
	cfg_free(c);
	return 0;
}
