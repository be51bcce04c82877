/*
 * run_bash: one command line, checked whole by the run axis, run by bash in a
 * process group of its own with a clean environment, its output captured on
 * the loop. Nothing here blocks: the output pipe and a pidfd for the child are
 * libevent events, and a timer bounds the run.
 *
 * Decisions (README):
 *  - The environment is PATH=/usr/local/bin:/usr/bin:/bin, HOME=/nonexistent
 *    and the config's env entries (entries named PATH or HOME, or with names
 *    that are not shell identifiers, are left out). No HOME folder: nothing a
 *    run writes to ~ (a ~/.gitconfig with core.fsmonitor, say) can carry over
 *    into later runs and run commands the run axis never saw.
 *  - stdin is /dev/null; stdout and stderr share one pipe, so the model sees
 *    them interleaved as a terminal would.
 *  - The working folder is /: tools have no working folder (the permission
 *    engine refuses relative paths), so commands name files absolutely.
 *  - bash is started with fork and execve, not posix_spawn: the child must
 *    enter the subprocess sandbox (sandbox_child_restrict) before it execs.
 *  - When bash exits, whatever it left running in its process group is
 *    killed: background jobs do not outlive the call. A timeout or a cancel
 *    kills the whole group with SIGKILL.
 *  - A non-zero exit status is an ordinary result; a timeout, a signal or a
 *    failure to start is an error result.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "loop.h"
#include "sandbox.h"
#include "tool.h"
#include "util.h"

#define RB_BASH			"/bin/bash"
#define RB_PATH			"PATH=" PERM_RUN_PATH
#define RB_HOME			"HOME=/nonexistent"
#define RB_MAX_COMMAND		(64 << 10)	/* bash -c takes up to 128 KiB */
#define RB_MAX_TIMEOUT_S	3600
#define RB_READ_CHUNK		(64 << 10)
#define RB_READS_PER_WAKE	16	/* then let the loop turn */
#define RB_DRAIN_MS		500	/* after exit, for output still in flight */
#define RB_POLL_MS		50	/* child polling where pidfd is missing */
#define RB_CLOSE_FALLBACK	65536	/* fds closed where close_range is not */

struct rb {
	struct tool_call	*tc;	/* NULL once done: an orphan to reap */
	pid_t			 pid;
	int			 pidfd;	/* -1: polled with waitid */
	int			 outfd;	/* -1 once closed */
	struct event		*ev_out;
	struct event		*ev_pid;
	struct event		*ev_timer;
	long			 timeout_ms;
	struct buf		 out;	/* at most keep bytes */
	size_t			 keep;
	size_t			 total;
	int			 reaped;
	int			 status;
	int			 timed_out;
	int			 draining;
	int			 lost;	/* reaped by someone else */
};

static int
rb_exists(const struct cfg *cfg)
{
	return cfg->perm.run.n > 0;
}

static void
arm(struct event *ev, long ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	event_add(ev, &tv);
}

static void
close_out(struct rb *rb)
{
	if (rb->ev_out != NULL) {
		event_free(rb->ev_out);
		rb->ev_out = NULL;
	}
	if (rb->outfd != -1) {
		close(rb->outfd);
		rb->outfd = -1;
	}
}

static void
rb_free(struct rb *rb)
{
	close_out(rb);
	if (rb->ev_pid != NULL)
		event_free(rb->ev_pid);
	if (rb->ev_timer != NULL)
		event_free(rb->ev_timer);
	if (rb->pidfd != -1)
		close(rb->pidfd);
	buf_free(&rb->out);
	free(rb);
}

/* Kill the process group while its leader is not yet reaped: the unreaped
 * leader keeps the group id from being reused, so the signal cannot reach a
 * stranger. */
static void
kill_group(struct rb *rb)
{
	if (!rb->reaped)
		(void)kill(-rb->pid, SIGKILL);
}

/* Hand the result to the engine. The state outlives the call only when the
 * child is not reaped yet (a cancel): its pidfd event reaps it later. */
static void
finish(struct rb *rb, const char *why)
{
	struct tool_call *tc = rb->tc;
	struct buf res;
	int is_error = 0;

	buf_init(&res);
	if (why != NULL) {
		buf_adds(&res, why);
		is_error = 1;
	} else if (rb->timed_out) {
		if (rb->timeout_ms % 1000 == 0)
			buf_addf(&res, "killed after timeout (%ld s)",
			    rb->timeout_ms / 1000);
		else
			buf_addf(&res, "killed after timeout (%ld ms)",
			    rb->timeout_ms);
		is_error = 1;
	} else if (rb->lost) {
		buf_adds(&res, "ended (exit status unknown)");
		is_error = 1;
	} else if (WIFEXITED(rb->status))
		buf_addf(&res, "exit status %d", WEXITSTATUS(rb->status));
	else if (WIFSIGNALED(rb->status)) {
		buf_addf(&res, "killed by signal %d (%s)", WTERMSIG(rb->status),
		    strsignal(WTERMSIG(rb->status)));
		is_error = 1;
	} else
		buf_adds(&res, "ended");
	if (rb->total > rb->out.len)
		buf_addf(&res, "; %zu bytes of output, only the first %zu kept",
		    rb->total, rb->out.len);
	buf_addc(&res, '\n');
	if (rb->out.len > 0)
		buf_add(&res, rb->out.data, rb->out.len);

	rb->tc = NULL;
	tc->priv = NULL;
	tc->cancel = NULL;
	close_out(rb);
	if (rb->ev_timer != NULL)
		event_del(rb->ev_timer);
	if (rb->reaped)
		rb_free(rb);
	tool_done(tc, res.data, res.len, is_error);
	buf_free(&res);
}

static void
maybe_finish(struct rb *rb)
{
	if (rb->tc != NULL && rb->reaped && rb->outfd == -1)
		finish(rb, NULL);
}

static void
on_out(evutil_socket_t fd, short what, void *arg)
{
	struct rb *rb = arg;
	char chunk[RB_READ_CHUNK];
	ssize_t r;

	for (int i = 0; i < RB_READS_PER_WAKE; i++) {
		r = read(fd, chunk, sizeof(chunk));
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (r <= 0) {
			close_out(rb);
			maybe_finish(rb);
			return;
		}
		rb->total += (size_t)r;
		if (rb->out.len < rb->keep) {
			size_t room = rb->keep - rb->out.len;

			buf_add(&rb->out, chunk, (size_t)r < room ?
			    (size_t)r : room);
		}
	}
}

/* The child may have exited: find out without reaping, kill what it left in
 * its group, then reap. */
static void
on_child(evutil_socket_t fd, short what, void *arg)
{
	struct rb *rb = arg;
	siginfo_t si;
	int st;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)rb->pid, &si, WEXITED | WNOHANG | WNOWAIT) ==
	    -1) {
		if (errno != ECHILD) {
			log_warn("run_bash: waitid %ld", (long)rb->pid);
			return;
		}
		/* Someone else reaped it (a waitpid(-1) elsewhere in af). */
		rb->lost = 1;
		st = 0;
	} else if (si.si_pid == 0) {
		if (rb->pidfd != -1)
			event_add(rb->ev_pid, NULL);	/* spurious wakeup */
		return;
	} else {
		(void)kill(-rb->pid, SIGKILL);
		while (waitpid(rb->pid, &st, 0) == -1 && errno == EINTR)
			;
	}
	rb->reaped = 1;
	rb->status = st;
	if (rb->pidfd == -1)
		event_del(rb->ev_pid);
	if (rb->tc == NULL) {
		rb_free(rb);
		return;
	}
	/* Output may still sit in the pipe, or a process that left the group
	 * may hold it open: wait a little, then give up on it. */
	if (rb->outfd != -1) {
		rb->draining = 1;
		event_del(rb->ev_timer);
		arm(rb->ev_timer, RB_DRAIN_MS);
	}
	maybe_finish(rb);
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct rb *rb = arg;

	if (rb->draining) {
		if (rb->outfd != -1)
			on_out(rb->outfd, EV_READ, rb);
		close_out(rb);
		maybe_finish(rb);
		return;
	}
	rb->timed_out = 1;
	kill_group(rb);
	/* The pidfd event reaps the group's leader next. */
}

static void
rb_cancel(struct tool_call *tc)
{
	struct rb *rb = tc->priv;

	if (rb == NULL)
		return;
	kill_group(rb);
	finish(rb, "cancelled");
}

/* The environment: PATH, HOME, then the config's entries. */
static char **
make_env(const struct cfg *cfg)
{
	const struct kvlist *kv = &cfg->env;
	char **envp = xcalloc(kv->n + 3, sizeof(*envp));
	size_t n = 0;

	envp[n++] = xstrdup(RB_PATH);
	envp[n++] = xstrdup(RB_HOME);
	for (size_t i = 0; i < kv->n; i++) {
		const char *k = kv->v[i].key, *v = kv->v[i].value;
		int ok = k != NULL && v != NULL &&
		    (k[0] == '_' || (k[0] >= 'A' && k[0] <= 'Z') ||
		    (k[0] >= 'a' && k[0] <= 'z'));

		for (const char *p = k; ok && *p != '\0'; p++)
			ok = *p == '_' || (*p >= 'A' && *p <= 'Z') ||
			    (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9');
		if (!ok || strcmp(k, "PATH") == 0 || strcmp(k, "HOME") == 0)
			continue;
		envp[n++] = xasprintf("%s=%s", k, v);
	}
	envp[n] = NULL;
	return envp;
}

static void
free_env(char **envp)
{
	for (char **p = envp; *p != NULL; p++)
		free(*p);
	free(envp);
}

/*
 * The child, between fork and exec: only async-signal-safe calls (af has
 * threads). Default signal dispositions and an empty mask, a process group
 * of its own, / as the working folder, stdout and stderr on the pipe, stdin
 * on /dev/null, the subprocess sandbox (sandbox_child_restrict, which needs
 * its ruleset fd, so before the fds are closed), then no fd but 0, 1 and 2.
 */
static void
child(char **argv, char **envp, int wfd)
{
	static const char sbmsg[] = "run_bash: cannot enter the subprocess "
	    "sandbox\n";
	static const char exmsg[] = "run_bash: cannot execute " RB_BASH "\n";
	struct sigaction sa;
	sigset_t none;
	ssize_t w;
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			(void)sigaction(sig, &sa, NULL);
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	(void)setpgid(0, 0);
	if (chdir("/") == -1)
		_exit(126);
	if (wfd <= 2 && (wfd = fcntl(wfd, F_DUPFD_CLOEXEC, 3)) == -1)
		_exit(126);
	if (dup2(wfd, 1) == -1 || dup2(wfd, 2) == -1)
		_exit(126);
	if ((fd = open("/dev/null", O_RDONLY)) == -1)
		_exit(126);
	if (fd != 0 && (dup2(fd, 0) == -1 || close(fd) == -1))
		_exit(126);
	if (sandbox_child_restrict() == -1) {
		w = write(2, sbmsg, sizeof(sbmsg) - 1);
		_exit(126);
	}
	if (syscall(SYS_close_range, 3U, ~0U, 0U) == -1)
		for (fd = 3; fd < RB_CLOSE_FALLBACK; fd++)
			(void)close(fd);
	execve(RB_BASH, argv, envp);
	w = write(2, exmsg, sizeof(exmsg) - 1);
	(void)w;
	_exit(127);
}

/* Start bash on the command; the pid, or -1 with errno. */
static pid_t
spawn(const char *command, char **envp, int wfd)
{
	char *argv[] = { "bash", "--noprofile", "--norc", "-c",
	    (char *)command, NULL };
	pid_t pid;

	if ((pid = fork()) == -1)
		return -1;
	if (pid == 0)
		child(argv, envp, wfd);
	/* Also here, so the group exists before the parent may signal it. */
	(void)setpgid(pid, pid);
	return pid;
}

/* Parse the input; 0 with the command and timeout, or -1 after tool_fail. */
static int
parse_input(struct tool_call *tc, const char **command, long *timeout_ms)
{
	static const char *const fields[] = { "command", "timeout" };
	const cJSON *f[2], *cmd, *to;
	/* The engine fills timeout_ms with the agent's tool timeout. */
	long def = tc->timeout_ms > 0 ? tc->timeout_ms :
	    tc->cfg->limits.tool_timeout_ms > 0 ?
	    tc->cfg->limits.tool_timeout_ms : 60000;

	if (tool_input(tc, fields, nitems(fields), f) == -1)
		return -1;
	cmd = f[0];
	to = f[1];
	if (!cJSON_IsString(cmd) || cmd->valuestring == NULL ||
	    cmd->valuestring[0] == '\0') {
		tool_fail(tc, "run_bash: \"command\" must be a non-empty string");
		return -1;
	}
	if (strlen(cmd->valuestring) > RB_MAX_COMMAND) {
		tool_fail(tc, "run_bash: \"command\" is longer than 64 KiB");
		return -1;
	}
	*command = cmd->valuestring;
	*timeout_ms = def;
	if (to != NULL) {
		if (!cJSON_IsNumber(to) || !isfinite(to->valuedouble) ||
		    to->valuedouble <= 0 ||
		    to->valuedouble > RB_MAX_TIMEOUT_S) {
			tool_fail(tc, "run_bash: \"timeout\" must be a number of "
			    "seconds above 0 and at most %d", RB_MAX_TIMEOUT_S);
			return -1;
		}
		*timeout_ms = (long)ceil(to->valuedouble * 1000.0);
	}
	return 0;
}

static void
rb_call(struct tool_call *tc)
{
	struct event_base *base = loop_base();
	const char *command;
	struct rb *rb;
	char **envp;
	long timeout_ms;
	int p[2], e;

	if (parse_input(tc, &command, &timeout_ms) == -1)
		return;
	if (!tc->perm.allowed) {
		tool_fail(tc, "run_bash: the command was not authorized");
		return;
	}
	if (base == NULL) {
		tool_fail(tc, "run_bash: no event loop");
		return;
	}
	if (pipe2(p, O_CLOEXEC) == -1) {
		tool_fail(tc, "run_bash: pipe: %s", strerror(errno));
		return;
	}
	rb = xcalloc(1, sizeof(*rb));
	rb->tc = tc;
	rb->pidfd = -1;
	rb->outfd = p[0];
	rb->timeout_ms = timeout_ms;
	buf_init(&rb->out);
	rb->keep = (size_t)(tc->cfg->limits.tool_output > 0 ?
	    tc->cfg->limits.tool_output : 8192) * 2;
	(void)fcntl(p[0], F_SETFL, O_NONBLOCK);

	envp = make_env(tc->cfg);
	rb->pid = spawn(command, envp, p[1]);
	e = errno;
	free_env(envp);
	close(p[1]);
	if (rb->pid == -1) {
		rb->reaped = 1;
		rb_free(rb);
		tool_fail(tc, "run_bash: cannot start %s: %s", RB_BASH,
		    strerror(e));
		return;
	}

	rb->pidfd = (int)syscall(SYS_pidfd_open, rb->pid, 0);
	if (rb->pidfd != -1)
		rb->ev_pid = event_new(base, rb->pidfd, EV_READ, on_child, rb);
	else
		rb->ev_pid = event_new(base, -1, EV_PERSIST, on_child, rb);
	rb->ev_out = event_new(base, rb->outfd, EV_READ | EV_PERSIST, on_out,
	    rb);
	rb->ev_timer = event_new(base, -1, 0, on_timer, rb);
	if (rb->ev_pid == NULL || rb->ev_out == NULL || rb->ev_timer == NULL)
		fatalx("run_bash: event_new failed");
	if (rb->pidfd != -1)
		event_add(rb->ev_pid, NULL);
	else
		arm(rb->ev_pid, RB_POLL_MS);
	event_add(rb->ev_out, NULL);
	arm(rb->ev_timer, timeout_ms);
	tc->priv = rb;
	tc->cancel = rb_cancel;
}

const struct tool_def tool_run_bash = {
	.name = "run_bash",
	.description = "Run a command line with bash (-c) and return its exit "
	    "status and its output (stdout and stderr together, capped). Only "
	    "the programs the agent is allowed to run may appear in it; "
	    "command substitution is refused. Background processes are "
	    "killed when the command ends.",
	.input_schema = "{\"type\":\"object\",\"properties\":{"
	    "\"command\":{\"type\":\"string\",\"description\":\"The command "
	    "line\"},\"timeout\":{\"type\":\"number\",\"exclusiveMinimum\":0,"
	    "\"maximum\":3600,\"description\":\"Seconds before the command is "
	    "killed (default: the agent's tool timeout)\"}},"
	    "\"required\":[\"command\"],\"additionalProperties\":false}",
	.axis = PERM_RUN,
	.target_key = "command",
	.exists = rb_exists,
	.call = rb_call,
};
