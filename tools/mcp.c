/*
 * MCP servers on the loop. Each configured server is a JSON-RPC peer: a stdio
 * subprocess or a Streamable HTTP endpoint. The lifecycle is initialize,
 * notifications/initialized, tools/list (every page), then tools/call for as
 * long as the server lives; a stdio server that dies or misbehaves is killed
 * and started again with exponential backoff, an HTTP server whose session is
 * lost is initialized again the same way.
 *
 * Decisions (README):
 *  - A stdio server is forked in a process group of its own, enters the
 *    subprocess sandbox (no data folder, secrets or skills), works in the
 *    agent folder, and gets only PATH=/usr/local/bin:/usr/bin:/bin,
 *    HOME=/nonexistent and its own env: entries, as run_bash does.
 *  - Its stderr is logged line by line under the server's name; its stdout
 *    must be JSON-RPC messages, one per line, each at most 4 MiB: a longer
 *    line, a broken message stream or a full input queue restarts it.
 *  - Tools are registered when listed, filtered by include: and readonly:;
 *    the rest do not exist for the agent. They stay registered while a
 *    server restarts (calls fail meanwhile) and are replaced on each listing.
 *  - A name already taken (server a's tool _x and server a_'s tool x are
 *    both a___x) goes to whoever listed it first; the later one is skipped
 *    with a warning naming both, since the engine finds tools by name.
 *  - A request that outlives tools.mcp.NAME.timeout gets
 *    notifications/cancelled and an error result; so does a call whose run
 *    ends. A timeout of initialize or tools/list restarts the server.
 *  - Over HTTP, the GET stream is not opened: what the server sends us
 *    arrives on the streams of our own POSTs. A 404 on a session starts a
 *    new one. Sessions are not DELETEd at exit.
 *  - af asks for protocol version 2025-11-25 and accepts 2025-06-18 and
 *    2025-03-26 too, which change nothing af uses.
 *  - At start-up af waits up to 10 s for every server to list its tools (or
 *    fail) before it takes events, so that the first runs see them.
 */
#include <sys/queue.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "http.h"
#include "loop.h"
#include "sandbox.h"
#include "tool.h"
#include "tools/mcp.h"
#include "util.h"

#define MCP_PATH		"PATH=" PERM_RUN_PATH
#define MCP_HOME		"HOME=/nonexistent"
#define MCP_EXEC_PATH		PERM_RUN_PATH
#define MCP_READY_MS		10000	/* start-up waits this long at most */
#define MCP_BACKOFF_MIN_MS	250
#define MCP_BACKOFF_MAX_MS	60000
#define MCP_STABLE_MS		30000	/* up this long: backoff starts over */
#define MCP_MAX_PAGES		32	/* of one tools/list */
#define MCP_MAX_TOOLS		256	/* tools kept per server */
#define MCP_MAX_QUEUE		(16 << 20)	/* unsent bytes to a server */
#define MCP_MAX_STREAM		(16 << 20)	/* one HTTP response stream */
#define MCP_MAX_LOG_LINE	1024	/* of a server's stderr */
#define MCP_NOTIFY_TIMEOUT_MS	10000	/* a notification POST */
#define MCP_READ_CHUNK		(64 << 10)
#define MCP_READS_PER_WAKE	16
#define MCP_POLL_MS		200	/* child polling where pidfd is missing */
#define MCP_STOP_WAIT_MS	1000	/* at exit, for servers to end */
#define MCP_EOF_WAIT_MS		500	/* stdout closed, for the exit */

enum srv_state { SRV_STARTING, SRV_UP, SRV_BACKOFF, SRV_STOPPED };
static const char *const state_names[] = { "starting", "up", "backoff",
    "stopped" };

static const char *const versions_ok[] = { "2025-11-25", "2025-06-18",
    "2025-03-26" };

struct mcp_srv;
struct mcp_req;

/* A tool as registered: the engine holds &def; calls in flight hold refs, so
 * a listing that replaces it frees it only when the last call is done. */
struct mcp_tool {
	struct tool_def		 def;
	struct mcp_tool_info	 info;
	struct mcp_srv		*srv;
	int			 refs;
	int			 retired;
};

/* A stdio server process. It outlives its server's interest in it: a
 * process being killed stays here until its pidfd says it is reaped. */
struct mcp_child {
	LIST_ENTRY(mcp_child)	 entry;
	struct mcp_srv		*srv;	/* NULL: detached, reap and free */
	pid_t			 pid;
	int			 pidfd;
	int			 in_fd, out_fd, err_fd;
	struct event		*ev_pid, *ev_in, *ev_out, *ev_err;
	struct buf		 wbuf;
	size_t			 woff;
	struct mcp_lines	 outl, errl;
	struct loop_timer	*eof;	/* stdout closed: exit expected */
	int			 reaped;
};

typedef void (*req_done_fn)(struct mcp_req *, struct mcp_msg *,
    const char *err);

struct mcp_req {
	TAILQ_ENTRY(mcp_req)	 entry;
	struct mcp_srv		*srv;
	long			 id;
	char			*method;
	req_done_fn		 done;
	struct loop_timer	*timer;
	/* tools/call */
	struct tool_call	*tc;
	struct mcp_tool		*tool;
	/* HTTP */
	struct http_call	*hc;
	struct mcp_sse		 sse;
	struct buf		 body;
	int			 mode;		/* 0 unknown, 1 JSON, 2 SSE */
	struct mcp_msg		 reply;
	int			 answered;
	char			 why[256];	/* a stream that went wrong */
};

/* A notification or an answer POSTed to an HTTP server; nothing waits. */
struct mcp_post {
	LIST_ENTRY(mcp_post)	 entry;
	struct mcp_srv		*srv;
	struct http_call	*hc;
};

struct mcp_srv {
	const struct cfg_mcp	*cfg;
	const struct cfg	*root;
	int			 http;
	enum srv_state		 state;
	char			 last_error[256];
	unsigned		 restarts;
	int			 first_done;	/* first listing over or failed */
	int64_t			 started;	/* mono_ms of the last launch */
	long			 backoff_ms;
	struct loop_timer	*retry;
	TAILQ_HEAD(, mcp_req)	 reqs;
	long			 next_id;

	struct mcp_tool		**tools;
	size_t			 ntools;
	cJSON			*listing;	/* tools gathered so far */
	int			 pages;
	int			 listing_busy;
	int			 relist;	/* list_changed during a listing */

	/* stdio */
	char			*exe;
	char			**argv;
	char			**envp;
	struct mcp_child	*child;

	/* HTTP */
	char			*session;
	char			*version;	/* negotiated */
	LIST_HEAD(, mcp_post)	 posts;
	struct strlist		 outq;	/* answers to send from the loop */
	int			 want_list;	/* list_changed on a stream */
	struct loop_timer	*kick;
};

static struct mcp_srv	*srvs;
static size_t		 nsrvs;
static int		 stopping;
static LIST_HEAD(, mcp_child) children = LIST_HEAD_INITIALIZER(children);

static void srv_launch(struct mcp_srv *);
static void srv_fail(struct mcp_srv *, const char *, ...) AF_PRINTF(2, 3);
static struct mcp_req *req_new(struct mcp_srv *, const char *method,
    req_done_fn);
static void req_send(struct mcp_req *, cJSON *params);
static void send_request(struct mcp_srv *, const char *method, cJSON *params,
    req_done_fn);
static void send_notify(struct mcp_srv *, const char *method, cJSON *params);
static void handle_message(struct mcp_srv *, struct mcp_msg *);
static void start_listing(struct mcp_srv *);

/* ---- tools ---- */

static void
tool_release(struct mcp_tool *t)
{
	if (--t->refs > 0 || !t->retired)
		return;
	mcp_tool_info_free(&t->info);
	free(t);
}

/* Take the server's tools out of the registry; a tool still being called is
 * freed by its last call. */
static void
tools_retire(struct mcp_srv *s)
{
	tool_unregister_ctx(s);
	for (size_t i = 0; i < s->ntools; i++) {
		s->tools[i]->retired = 1;
		tool_release(s->tools[i]);
	}
	free(s->tools);
	s->tools = NULL;
	s->ntools = 0;
}

static void mcp_call(struct tool_call *);

static int
included(const struct mcp_srv *s, const struct mcp_tool_info *ti)
{
	if (s->cfg->has_include && !strlist_has(&s->cfg->include, ti->remote))
		return 0;
	if (s->cfg->readonly && !ti->readonly)
		return 0;
	return 1;
}

static const struct mcp_tool *
known(struct mcp_tool *const *v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i]->info.name, name) == 0)
			return v[i];
	return NULL;
}

/*
 * Who, other than server s, already offers a tool named name: another
 * server, or af itself. The engine finds a tool by its name alone, so a
 * second tool of that name would never be called, or would be called in
 * the first one's place. Native names never contain "__" and every MCP
 * name does, so only a future native tool could clash; the check is here
 * for it all the same.
 */
static int
name_taken(const struct mcp_srv *s, const char *name, char *who,
    size_t wholen)
{
	const struct tool_def *d;
	const struct mcp_tool *t;

	for (size_t i = 0; i < nsrvs; i++) {
		if (&srvs[i] == s ||
		    (t = known(srvs[i].tools, srvs[i].ntools, name)) == NULL)
			continue;
		snprintf(who, wholen, "server %s's tool %s", srvs[i].cfg->name,
		    t->info.remote);
		return 1;
	}
	if ((d = tool_find(s->root, name)) != NULL && d->ctx == NULL) {
		snprintf(who, wholen, "af's own tool %s", d->name);
		return 1;
	}
	return 0;
}

/* May the listed tool ti join v (n so far)? Logs why not. */
static int
admissible(const struct mcp_srv *s, struct mcp_tool *const *v, size_t n,
    const struct mcp_tool_info *ti)
{
	char who[256];

	if (known(v, n, ti->name) != NULL) {
		log_warnx("mcp %s: tool %s is listed twice; the second is "
		    "skipped", s->cfg->name, ti->remote);
		return 0;
	}
	if (name_taken(s, ti->name, who, sizeof(who))) {
		log_warnx("mcp %s: tool %s would be %s, which %s already is; "
		    "skipped", s->cfg->name, ti->remote, ti->name, who);
		return 0;
	}
	return 1;
}

/* Replace the registered tools with a finished listing. */
static void
tools_install(struct mcp_srv *s, const cJSON *list)
{
	struct mcp_tool **v = xcalloc(MCP_MAX_TOOLS, sizeof(*v));
	struct mcp_tool_info ti;
	size_t n = 0, skipped = 0, filtered = 0, taken = 0;
	const cJSON *it;
	char why[256];

	cJSON_ArrayForEach(it, list) {
		if (mcp_tool_parse(s->cfg->name, it, &ti, why,
		    sizeof(why)) == -1) {
			log_warnx("mcp %s: %s; skipped", s->cfg->name, why);
			skipped++;
			continue;
		}
		if (!included(s, &ti)) {
			filtered++;
			mcp_tool_info_free(&ti);
			continue;
		}
		if (!admissible(s, v, n, &ti)) {
			taken++;
			mcp_tool_info_free(&ti);
			continue;
		}
		if (n == MCP_MAX_TOOLS) {
			log_warnx("mcp %s: more than %d tools; %s and later "
			    "ones skipped", s->cfg->name, MCP_MAX_TOOLS,
			    ti.name);
			mcp_tool_info_free(&ti);
			break;
		}
		v[n] = xcalloc(1, sizeof(**v));
		v[n]->info = ti;
		v[n]->srv = s;
		v[n]->refs = 1;
		v[n]->def.name = v[n]->info.name;
		v[n]->def.description = v[n]->info.description;
		v[n]->def.input_schema = v[n]->info.schema;
		v[n]->def.axis = TOOL_NO_AXIS;
		v[n]->def.call = mcp_call;
		v[n]->def.ctx = s;
		n++;
	}
	tools_retire(s);
	s->tools = v;
	s->ntools = n;
	for (size_t i = 0; i < n; i++)
		tool_register(&v[i]->def);
	for (size_t i = 0; i < s->cfg->include.n; i++) {
		char *full = xasprintf("%s__%s", s->cfg->name,
		    s->cfg->include.v[i]);

		if (known(v, n, full) == NULL)
			log_warnx("mcp %s: include names %s, which the server "
			    "does not offer%s", s->cfg->name,
			    s->cfg->include.v[i], s->cfg->readonly ?
			    " as read-only" : "");
		free(full);
	}
	log_info("mcp %s: %zu tool%s offered (%zu filtered out, %zu invalid, "
	    "%zu with a name taken)", s->cfg->name, n, n == 1 ? "" : "s",
	    filtered, skipped, taken);
}

/* ---- requests ---- */

static struct mcp_req *
req_find(struct mcp_srv *s, const struct mcp_msg *m)
{
	struct mcp_req *r;

	TAILQ_FOREACH(r, &s->reqs, entry)
		if (mcp_msg_id_is(m, r->id))
			return r;
	return NULL;
}

static void
req_free(struct mcp_req *r)
{
	loop_timer_cancel(r->timer);
	http_cancel(r->hc);
	mcp_sse_free(&r->sse);
	buf_free(&r->body);
	mcp_msg_free(&r->reply);
	free(r->method);
	free(r);
}

/* Finish a request once: out of the queue, then its callback. */
static void
req_complete(struct mcp_req *r, struct mcp_msg *m, const char *err)
{
	struct mcp_srv *s = r->srv;

	TAILQ_REMOVE(&s->reqs, r, entry);
	loop_timer_cancel(r->timer);
	r->timer = NULL;
	http_cancel(r->hc);
	r->hc = NULL;
	r->done(r, m, err);
	req_free(r);
}

/* Every pending request fails with why (the server is going away). */
static void
reqs_fail_all(struct mcp_srv *s, const char *why)
{
	struct mcp_req *r;

	while ((r = TAILQ_FIRST(&s->reqs)) != NULL)
		req_complete(r, NULL, why);
}

static void
send_cancelled(struct mcp_srv *s, long id, const char *reason)
{
	cJSON *p = cJSON_CreateObject();

	cJSON_AddNumberToObject(p, "requestId", (double)id);
	cJSON_AddStringToObject(p, "reason", reason);
	send_notify(s, "notifications/cancelled", p);
}

static void
on_req_timeout(void *arg)
{
	struct mcp_req *r = arg;
	struct mcp_srv *s = r->srv;
	char why[128];

	r->timer = NULL;
	snprintf(why, sizeof(why), "%s timed out after %ld ms", r->method,
	    s->cfg->timeout_ms);
	/* The protocol forbids cancelling initialize. */
	if (strcmp(r->method, "initialize") != 0)
		send_cancelled(s, r->id, "timed out");
	req_complete(r, NULL, why);
}

/* ---- stdio transport ---- */

static void
child_close_io(struct mcp_child *c)
{
	struct event **evs[] = { &c->ev_in, &c->ev_out, &c->ev_err };
	int *fds[] = { &c->in_fd, &c->out_fd, &c->err_fd };

	loop_timer_cancel(c->eof);
	c->eof = NULL;
	for (size_t i = 0; i < nitems(evs); i++) {
		if (*evs[i] != NULL)
			event_free(*evs[i]);
		*evs[i] = NULL;
		if (*fds[i] != -1)
			close(*fds[i]);
		*fds[i] = -1;
	}
}

static void
child_free(struct mcp_child *c)
{
	LIST_REMOVE(c, entry);
	child_close_io(c);
	if (c->ev_pid != NULL)
		event_free(c->ev_pid);
	if (c->pidfd != -1)
		close(c->pidfd);
	buf_free(&c->wbuf);
	mcp_lines_free(&c->outl);
	mcp_lines_free(&c->errl);
	free(c);
}

/* Kill the group while its leader is unreaped (so the id cannot have been
 * reused) and forget the server; the pid event reaps and frees it. */
static void
child_detach(struct mcp_child *c)
{
	if (c->srv != NULL)
		c->srv->child = NULL;
	c->srv = NULL;
	child_close_io(c);
	if (!c->reaped)
		(void)kill(-c->pid, SIGKILL);
	else
		child_free(c);
}

static void
describe_status(int st, char *out, size_t outlen)
{
	if (WIFEXITED(st))
		snprintf(out, outlen, "exited with status %d%s",
		    WEXITSTATUS(st), WEXITSTATUS(st) == 127 ? " (could not "
		    "start: command not found or not allowed)" : "");
	else if (WIFSIGNALED(st))
		snprintf(out, outlen, "killed by signal %d (%s)", WTERMSIG(st),
		    strsignal(WTERMSIG(st)));
	else
		snprintf(out, outlen, "ended");
}

static void
on_child_exit(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_child *c = arg;
	siginfo_t si;
	char how[160];
	int st = 0;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) ==
	    -1) {
		if (errno != ECHILD)
			return;
	} else if (si.si_pid == 0) {
		if (c->pidfd != -1)
			event_add(c->ev_pid, NULL);
		return;
	} else {
		/* Whatever it left in its group goes with it. */
		(void)kill(-c->pid, SIGKILL);
		while (waitpid(c->pid, &st, 0) == -1 && errno == EINTR)
			;
	}
	c->reaped = 1;
	if (c->pidfd == -1)
		event_del(c->ev_pid);
	if (c->srv == NULL) {
		child_free(c);
		return;
	}
	describe_status(st, how, sizeof(how));
	srv_fail(c->srv, "the server %s", how);
}

static int
child_line(const char *line, size_t len, void *arg)
{
	struct mcp_srv *s = arg;
	struct mcp_msg m;
	char why[128];

	if (mcp_msg_parse(line, len, &m, why, sizeof(why)) == -1) {
		/* Servers print banners by mistake; one bad line is logged,
		 * not fatal. */
		log_warnx("mcp %s: ignored a line on stdout: %s", s->cfg->name,
		    why);
		return 0;
	}
	handle_message(s, &m);
	mcp_msg_free(&m);
	/* The message may have failed the server, and the child with it. */
	return s->child != NULL ? 0 : -1;
}

static void
on_eof(void *arg)
{
	struct mcp_child *c = arg;

	c->eof = NULL;
	if (c->srv != NULL)
		srv_fail(c->srv, "the server closed its stdout");
}

static void
on_child_out(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_child *c = arg;
	struct mcp_srv *s = c->srv;
	char chunk[MCP_READ_CHUNK];
	ssize_t n;

	for (int i = 0; i < MCP_READS_PER_WAKE && c->srv == s; i++) {
		n = read(fd, chunk, sizeof(chunk));
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			/* Most often the server is exiting: give its exit
			 * status a moment to say why. */
			event_del(c->ev_out);
			c->eof = loop_timer_add(MCP_EOF_WAIT_MS, on_eof, c);
			return;
		}
		if (mcp_lines_feed(&c->outl, chunk, (size_t)n, child_line,
		    s) == -1) {
			if (s->child == c)
				srv_fail(s, "the server sent a line over %d "
				    "bytes", MCP_MAX_MESSAGE);
			return;
		}
	}
}

/* A line of the server's stderr, logged without control characters (they
 * could forge log lines). */
static int
err_line(const char *line, size_t len, void *arg)
{
	struct mcp_srv *s = arg;
	char *clean = xstrndup(line, len);

	for (char *p = clean; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	log_info("mcp %s: stderr: %s", s->cfg->name, clean);
	free(clean);
	return 0;
}

static void
on_child_err(evutil_socket_t fd, short what, void *arg)
{
	struct mcp_child *c = arg;
	char chunk[MCP_READ_CHUNK];
	ssize_t n;

	for (int i = 0; i < MCP_READS_PER_WAKE; i++) {
		n = read(fd, chunk, sizeof(chunk));
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			event_del(c->ev_err);
			return;
		}
		(void)mcp_lines_feed(&c->errl, chunk, (size_t)n, err_line,
		    c->srv);
	}
}

static void
child_flush(struct mcp_child *c)
{
	ssize_t n;

	while (c->woff < c->wbuf.len) {
		n = write(c->in_fd, c->wbuf.data + c->woff,
		    c->wbuf.len - c->woff);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			event_add(c->ev_in, NULL);
			return;
		}
		if (n == -1) {
			srv_fail(c->srv, "writing to the server: %s",
			    strerror(errno));
			return;
		}
		c->woff += (size_t)n;
	}
	buf_reset(&c->wbuf);
	c->woff = 0;
}

static void
on_child_in(evutil_socket_t fd, short what, void *arg)
{
	child_flush(arg);
}

static void
stdio_send(struct mcp_srv *s, const char *line)
{
	struct mcp_child *c = s->child;

	if (c == NULL)
		return;
	if (c->wbuf.len - c->woff + strlen(line) + 1 > MCP_MAX_QUEUE) {
		srv_fail(s, "the server does not read its input (%d bytes "
		    "queued)", MCP_MAX_QUEUE);
		return;
	}
	buf_adds(&c->wbuf, line);
	buf_addc(&c->wbuf, '\n');
	child_flush(c);
}

/* A pipe whose ends are above stderr, so that dup2 in the child always
 * copies (dup2 onto the same fd would keep close-on-exec). */
static int
pipe_high(int p[2])
{
	if (pipe2(p, O_CLOEXEC) == -1)
		return -1;
	for (int i = 0; i < 2; i++)
		if (p[i] <= 2) {
			int fd = fcntl(p[i], F_DUPFD_CLOEXEC, 3);

			close(p[i]);
			if (fd == -1) {
				close(p[1 - i]);
				return -1;
			}
			p[i] = fd;
		}
	return 0;
}

/* In the child, between fork and exec: async-signal-safe calls only. */
static void AF_NORETURN
child_exec(const struct mcp_srv *s, int in, int out, int err)
{
	struct sigaction sa;
	sigset_t none;

	if (setpgid(0, 0) == -1)
		_exit(127);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (int sig = 1; sig < NSIG; sig++)
		(void)sigaction(sig, &sa, NULL);
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	if (dup2(in, 0) == -1 || dup2(out, 1) == -1 || dup2(err, 2) == -1)
		_exit(127);
	if (s->root->dir != NULL && chdir(s->root->dir) == -1)
		_exit(127);
	if (sandbox_child_restrict() == -1)
		_exit(127);
	(void)syscall(SYS_close_range, 3U, ~0U, 0U);
	execve(s->exe, s->argv, s->envp);
	_exit(127);
}

static void
event_or_die(struct event *ev)
{
	if (ev == NULL)
		fatalx("mcp: event_new failed");
}

static int
stdio_spawn(struct mcp_srv *s, char *err, size_t errlen)
{
	struct event_base *base = loop_base();
	struct mcp_child *c;
	int in[2], out[2], errp[2];
	pid_t pid;

	if (s->exe == NULL) {
		snprintf(err, errlen, "command %s not found in %s",
		    s->cfg->command.v[0], MCP_EXEC_PATH);
		return -1;
	}
	if (pipe_high(in) == -1)
		goto fail;
	if (pipe_high(out) == -1) {
		close(in[0]);
		close(in[1]);
		goto fail;
	}
	if (pipe_high(errp) == -1) {
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		goto fail;
	}
	if ((pid = fork()) == -1) {
		int e = errno;

		for (int i = 0; i < 2; i++) {
			close(in[i]);
			close(out[i]);
			close(errp[i]);
		}
		errno = e;
		goto fail;
	}
	if (pid == 0)
		child_exec(s, in[0], out[1], errp[1]);
	(void)setpgid(pid, pid);	/* either side may win the race */
	close(in[0]);
	close(out[1]);
	close(errp[1]);

	c = xcalloc(1, sizeof(*c));
	c->srv = s;
	c->pid = pid;
	c->in_fd = in[1];
	c->out_fd = out[0];
	c->err_fd = errp[0];
	buf_init(&c->wbuf);
	mcp_lines_init(&c->outl, MCP_MAX_MESSAGE, 0);
	mcp_lines_init(&c->errl, MCP_MAX_LOG_LINE, 1);
	(void)fcntl(c->in_fd, F_SETFL, O_NONBLOCK);
	(void)fcntl(c->out_fd, F_SETFL, O_NONBLOCK);
	(void)fcntl(c->err_fd, F_SETFL, O_NONBLOCK);
	c->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (c->pidfd != -1)
		c->ev_pid = event_new(base, c->pidfd, EV_READ, on_child_exit, c);
	else
		c->ev_pid = event_new(base, -1, EV_PERSIST, on_child_exit, c);
	c->ev_in = event_new(base, c->in_fd, EV_WRITE, on_child_in, c);
	c->ev_out = event_new(base, c->out_fd, EV_READ | EV_PERSIST,
	    on_child_out, c);
	c->ev_err = event_new(base, c->err_fd, EV_READ | EV_PERSIST,
	    on_child_err, c);
	event_or_die(c->ev_pid);
	event_or_die(c->ev_in);
	event_or_die(c->ev_out);
	event_or_die(c->ev_err);
	if (c->pidfd != -1)
		event_add(c->ev_pid, NULL);
	else {
		struct timeval tv = { 0, MCP_POLL_MS * 1000 };

		event_add(c->ev_pid, &tv);
	}
	event_add(c->ev_out, NULL);
	event_add(c->ev_err, NULL);
	LIST_INSERT_HEAD(&children, c, entry);
	s->child = c;
	log_info("mcp %s: started %s (pid %ld)", s->cfg->name, s->exe,
	    (long)pid);
	return 0;
fail:
	snprintf(err, errlen, "cannot start %s: %s", s->exe, strerror(errno));
	return -1;
}

/* ---- Streamable HTTP transport ---- */

static const char **
http_headers(struct mcp_srv *s, char **own, size_t nown)
{
	static const char *h[8];
	size_t n = 0;

	h[n++] = "Content-Type: application/json";
	h[n++] = "Accept: application/json, text/event-stream";
	for (size_t i = 0; i < nown && own[i] != NULL; i++)
		h[n++] = own[i];
	h[n] = NULL;
	return h;
}

/* The session and version headers of later requests; free with
 * free_headers. */
static void
own_headers(struct mcp_srv *s, char *own[2])
{
	size_t n = 0;

	own[0] = own[1] = NULL;
	if (s->session != NULL)
		own[n++] = xasprintf("Mcp-Session-Id: %s", s->session);
	if (s->version != NULL)
		own[n++] = xasprintf("MCP-Protocol-Version: %s", s->version);
}

static void
post_free(struct mcp_post *p)
{
	LIST_REMOVE(p, entry);
	free(p);
}

static void
on_post_done(struct http_response *resp, void *arg)
{
	struct mcp_post *p = arg;

	p->hc = NULL;
	if (resp->status < 200 || resp->status >= 300)
		log_debug("mcp %s: a notification got %ld %s",
		    p->srv->cfg->name, resp->status, resp->error);
	post_free(p);
}

/* POST one JSON-RPC message with the session's headers; rq brings the
 * bounds and the streaming hook. */
static struct http_call *
post_json(struct mcp_srv *s, struct http_request *rq, const char *json,
    http_cb cb, void *arg)
{
	struct http_call *hc;
	char *own[2];

	own_headers(s, own);
	rq->method = "POST";
	rq->url = s->cfg->url;
	rq->headers = http_headers(s, own, 2);
	rq->body = json;
	rq->bodylen = strlen(json);
	hc = http_start(rq, cb, arg);
	free(own[0]);
	free(own[1]);
	return hc;
}

static void
http_post_only(struct mcp_srv *s, const char *json)
{
	struct mcp_post *p = xcalloc(1, sizeof(*p));
	struct http_request rq;

	memset(&rq, 0, sizeof(rq));
	rq.timeout_ms = MCP_NOTIFY_TIMEOUT_MS;
	rq.max_response = 64 << 10;
	p->srv = s;
	LIST_INSERT_HEAD(&s->posts, p, entry);
	p->hc = post_json(s, &rq, json, on_post_done, p);
}

/* Messages that arrive on a stream are handled from the loop, never from
 * inside curl's write callback, where no new transfer may start. */
static void
on_kick(void *arg)
{
	struct mcp_srv *s = arg;

	s->kick = NULL;
	for (size_t i = 0; i < s->outq.n; i++)
		http_post_only(s, s->outq.v[i]);
	strlist_free(&s->outq);
	if (s->want_list && s->state == SRV_UP) {
		s->want_list = 0;
		start_listing(s);
	}
}

static void
kick(struct mcp_srv *s)
{
	if (s->kick == NULL)
		s->kick = loop_timer_add(0, on_kick, s);
}

static char *answer_text(const struct mcp_msg *);

static int
stream_message(struct mcp_req *r, const char *data, size_t len)
{
	struct mcp_msg m;
	char why[128];

	if (mcp_msg_parse(data, len, &m, why, sizeof(why)) == -1) {
		snprintf(r->why, sizeof(r->why), "a bad message on the "
		    "stream: %s", why);
		return -1;
	}
	if (m.kind == MCP_RESPONSE && mcp_msg_id_is(&m, r->id)) {
		mcp_msg_free(&r->reply);
		r->reply = m;
		r->answered = 1;
		return -1;	/* ours: the stream has done its job */
	}
	/* What else the server says on our stream is acted on from the loop:
	 * no transfer may start inside curl's write callback. */
	if (m.kind == MCP_NOTIFICATION && strcmp(m.method,
	    "notifications/tools/list_changed") == 0) {
		r->srv->want_list = 1;
		kick(r->srv);
	} else if (m.kind == MCP_REQUEST && r->srv->outq.n < 64) {
		char *a = answer_text(&m);

		strlist_add(&r->srv->outq, a);
		free(a);
		kick(r->srv);
	}
	mcp_msg_free(&m);
	return 0;
}

/* Servers prime a stream with an empty event (an id to resume from); only
 * events of the default type with data carry messages. */
static int
sse_event(const char *event, const char *data, size_t len, void *arg)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (data[i] != ' ' && data[i] != '\t' && data[i] != '\r' &&
		    data[i] != '\n')
			break;
	if (strcmp(event, "message") != 0 || i == len)
		return 0;
	return stream_message(arg, data, len);
}

static int
on_http_data(const char *p, size_t n, void *arg)
{
	struct mcp_req *r = arg;

	if (r->answered)
		return -1;
	while (r->mode == 0 && n > 0) {
		if (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') {
			p++;
			n--;
			continue;
		}
		r->mode = *p == '{' || *p == '[' ? 1 : 2;
	}
	if (r->mode == 1) {
		if (r->body.len + n > MCP_MAX_MESSAGE) {
			snprintf(r->why, sizeof(r->why), "a response over %d "
			    "bytes", MCP_MAX_MESSAGE);
			return -1;
		}
		buf_add(&r->body, p, n);
		return 0;
	}
	if (r->mode == 2 && mcp_sse_feed(&r->sse, p, n, sse_event, r) == -1) {
		if (!r->answered && r->why[0] == '\0')
			snprintf(r->why, sizeof(r->why), "an SSE line or event "
			    "over %d bytes", MCP_SSE_MAX_EVENT);
		return -1;
	}
	return 0;
}

/* The error text of a failed HTTP exchange: a JSON-RPC error in the body if
 * there is one, else the status. */
static void
http_error_text(const struct http_response *resp, char *out, size_t outlen)
{
	struct mcp_msg m;
	char why[64];

	if (resp->status == 0) {
		snprintf(out, outlen, "HTTP request failed: %s", resp->error);
		return;
	}
	if (mcp_msg_parse(resp->body.data, resp->body.len, &m, why,
	    sizeof(why)) == 0 && m.kind == MCP_RESPONSE && m.error != NULL)
		snprintf(out, outlen, "HTTP %ld: %.200s", resp->status,
		    m.err_message);
	else
		snprintf(out, outlen, "HTTP %ld", resp->status);
	if (m.root != NULL)
		mcp_msg_free(&m);
}

static void
on_http_done(struct http_response *resp, void *arg)
{
	struct mcp_req *r = arg;
	struct mcp_srv *s = r->srv;
	struct mcp_msg m;
	const char *sid;
	char why[300];

	r->hc = NULL;
	if (resp->status == 404 && s->session != NULL) {
		/* The server forgot the session: start a new one. */
		srv_fail(s, "the server ended the session (HTTP 404)");
		return;
	}
	if (strcmp(r->method, "initialize") == 0 && resp->status >= 200 &&
	    resp->status < 300 && (sid = http_header(resp,
	    "Mcp-Session-Id")) != NULL) {
		int ok = sid[0] != '\0' && strlen(sid) <= 256;

		for (const char *p = sid; ok && *p != '\0'; p++)
			ok = *p >= 0x21 && *p <= 0x7e;
		if (!ok) {
			srv_fail(s, "the server sent a malformed session id");
			return;
		}
		free(s->session);
		s->session = xstrdup(sid);
	}
	if (r->answered) {
		m = r->reply;
		memset(&r->reply, 0, sizeof(r->reply));
		req_complete(r, &m, NULL);
		mcp_msg_free(&m);
	} else if (resp->status < 200 || resp->status >= 300) {
		http_error_text(resp, why, sizeof(why));
		req_complete(r, NULL, why);
	} else if (r->mode == 1) {
		if (mcp_msg_parse(r->body.data, r->body.len, &m, why,
		    sizeof(why)) == -1)
			req_complete(r, NULL, why);
		else if (!mcp_msg_id_is(&m, r->id)) {
			mcp_msg_free(&m);
			req_complete(r, NULL, "the response is not for this "
			    "request");
		} else {
			req_complete(r, &m, NULL);
			mcp_msg_free(&m);
		}
	} else {
		snprintf(why, sizeof(why), "the response stream ended without "
		    "an answer%s%s", r->why[0] ? ": " : "", r->why);
		if (resp->error[0] != '\0' && r->why[0] == '\0')
			snprintf(why, sizeof(why), "the response stream ended "
			    "without an answer: %s", resp->error);
		req_complete(r, NULL, why);
	}
}

static void
http_send(struct mcp_srv *s, struct mcp_req *r, const char *json)
{
	struct http_request rq;

	memset(&rq, 0, sizeof(rq));
	rq.max_response = MCP_MAX_STREAM;
	rq.on_data = on_http_data;
	r->hc = post_json(s, &rq, json, on_http_done, r);
}

/* ---- messages ---- */

static void
send_line(struct mcp_srv *s, const char *json)
{
	if (s->http)
		http_post_only(s, json);
	else
		stdio_send(s, json);
}

static void
send_notify(struct mcp_srv *s, const char *method, cJSON *params)
{
	char *json = mcp_msg_build(-1, method, params);

	cJSON_Delete(params);
	send_line(s, json);
	free(json);
}

/* A pending request with its timeout; req_send sends it. Split so that a
 * caller can attach its state first: sending may fail the server, and the
 * request with it, before req_send returns. */
static struct mcp_req *
req_new(struct mcp_srv *s, const char *method, req_done_fn done)
{
	struct mcp_req *r = xcalloc(1, sizeof(*r));

	r->srv = s;
	r->id = s->next_id++;
	r->method = xstrdup(method);
	r->done = done;
	buf_init(&r->body);
	mcp_sse_init(&r->sse, MCP_SSE_MAX_EVENT);
	TAILQ_INSERT_TAIL(&s->reqs, r, entry);
	r->timer = loop_timer_add(s->cfg->timeout_ms, on_req_timeout, r);
	return r;
}

/* Takes params. r may be freed when this returns. */
static void
req_send(struct mcp_req *r, cJSON *params)
{
	struct mcp_srv *s = r->srv;
	char *json = mcp_msg_build(r->id, r->method, params);

	cJSON_Delete(params);
	if (s->http)
		http_send(s, r, json);
	else
		stdio_send(s, json);
	free(json);
}

static void
send_request(struct mcp_srv *s, const char *method, cJSON *params,
    req_done_fn done)
{
	req_send(req_new(s, method, done), params);
}

/* What the server asks of us: ping is answered, the rest (sampling,
 * elicitation, roots: capabilities af never declared) is refused. */
static char *
answer_text(const struct mcp_msg *m)
{
	cJSON *o = cJSON_CreateObject(), *e;
	char *text, *out;

	cJSON_AddStringToObject(o, "jsonrpc", "2.0");
	cJSON_AddItemToObject(o, "id", cJSON_Duplicate(m->id, 1));
	if (strcmp(m->method, "ping") == 0)
		cJSON_AddItemToObject(o, "result", cJSON_CreateObject());
	else {
		e = cJSON_AddObjectToObject(o, "error");
		cJSON_AddNumberToObject(e, "code", -32601);
		cJSON_AddStringToObject(e, "message", "af does not offer this "
		    "method");
	}
	text = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (text == NULL)
		fatalx("mcp: out of memory");
	out = xstrdup(text);
	cJSON_free(text);
	return out;
}

static void
handle_message(struct mcp_srv *s, struct mcp_msg *m)
{
	struct mcp_req *r;
	char *text;

	switch (m->kind) {
	case MCP_RESPONSE:
		if ((r = req_find(s, m)) == NULL) {
			log_debug("mcp %s: a response to no pending request",
			    s->cfg->name);
			return;
		}
		req_complete(r, m, NULL);
		break;
	case MCP_REQUEST:
		text = answer_text(m);
		send_line(s, text);
		free(text);
		break;
	case MCP_NOTIFICATION:
		if (strcmp(m->method, "notifications/tools/list_changed") == 0 &&
		    s->state == SRV_UP)
			start_listing(s);
		break;
	}
}

/* ---- lifecycle ---- */

static void
on_retry(void *arg)
{
	struct mcp_srv *s = arg;

	s->retry = NULL;
	if (!stopping) {
		s->restarts++;
		srv_launch(s);
	}
}

/* The server failed: everything pending fails with it, its process goes,
 * and it starts again after a backoff that doubles while failures follow
 * each other closely. */
static void
srv_fail(struct mcp_srv *s, const char *fmt, ...)
{
	va_list ap;
	char why[256];

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (s->state == SRV_BACKOFF || s->state == SRV_STOPPED)
		return;
	snprintf(s->last_error, sizeof(s->last_error), "%s", why);
	s->state = stopping ? SRV_STOPPED : SRV_BACKOFF;
	s->first_done = 1;
	s->listing_busy = 0;
	s->relist = 0;
	s->want_list = 0;
	cJSON_Delete(s->listing);
	s->listing = NULL;
	if (s->child != NULL)
		child_detach(s->child);
	free(s->session);
	s->session = NULL;
	free(s->version);
	s->version = NULL;
	if (mono_ms() - s->started >= MCP_STABLE_MS)
		s->backoff_ms = MCP_BACKOFF_MIN_MS;
	if (s->state == SRV_BACKOFF) {
		log_warnx("mcp %s: %s; restarting in %ld ms", s->cfg->name, why,
		    s->backoff_ms);
		s->retry = loop_timer_add(s->backoff_ms, on_retry, s);
		s->backoff_ms = s->backoff_ms * 2 > MCP_BACKOFF_MAX_MS ?
		    MCP_BACKOFF_MAX_MS : s->backoff_ms * 2;
	} else
		log_warnx("mcp %s: %s", s->cfg->name, why);
	snprintf(why, sizeof(why), "MCP server %s failed: %s", s->cfg->name,
	    s->last_error);
	reqs_fail_all(s, why);
}

static void
on_list(struct mcp_req *r, struct mcp_msg *m, const char *err)
{
	struct mcp_srv *s = r->srv;
	const cJSON *tools, *next, *it;

	if (!s->listing_busy)
		return;		/* the server failed meanwhile */
	if (err != NULL || m->error != NULL) {
		srv_fail(s, "tools/list: %s", err ? err : m->err_message);
		return;
	}
	tools = cJSON_GetObjectItemCaseSensitive(m->result, "tools");
	next = cJSON_GetObjectItemCaseSensitive(m->result, "nextCursor");
	if (!cJSON_IsArray(tools)) {
		srv_fail(s, "tools/list: no tools array");
		return;
	}
	cJSON_ArrayForEach(it, tools)
		if (cJSON_GetArraySize(s->listing) < MCP_MAX_TOOLS * 2)
			cJSON_AddItemToArray(s->listing, cJSON_Duplicate(it, 1));
	if (cJSON_IsString(next) && next->valuestring[0] != '\0' &&
	    strlen(next->valuestring) <= 1024) {
		cJSON *p;

		if (++s->pages >= MCP_MAX_PAGES) {
			log_warnx("mcp %s: tools/list has over %d pages; the "
			    "rest is ignored", s->cfg->name, MCP_MAX_PAGES);
		} else {
			p = cJSON_CreateObject();
			cJSON_AddStringToObject(p, "cursor", next->valuestring);
			send_request(s, "tools/list", p, on_list);
			return;
		}
	}
	s->listing_busy = 0;
	tools_install(s, s->listing);
	cJSON_Delete(s->listing);
	s->listing = NULL;
	s->state = SRV_UP;
	s->first_done = 1;
	if (s->relist) {
		s->relist = 0;
		start_listing(s);
	}
}

static void
start_listing(struct mcp_srv *s)
{
	if (s->listing_busy) {
		s->relist = 1;
		return;
	}
	s->listing_busy = 1;
	s->pages = 0;
	s->listing = cJSON_CreateArray();
	send_request(s, "tools/list", NULL, on_list);
}

static void
on_init(struct mcp_req *r, struct mcp_msg *m, const char *err)
{
	struct mcp_srv *s = r->srv;
	const cJSON *v, *caps;
	size_t i;

	if (err != NULL || m->error != NULL) {
		srv_fail(s, "initialize: %s", err ? err : m->err_message);
		return;
	}
	v = cJSON_GetObjectItemCaseSensitive(m->result, "protocolVersion");
	for (i = 0; cJSON_IsString(v) && i < nitems(versions_ok); i++)
		if (strcmp(v->valuestring, versions_ok[i]) == 0)
			break;
	if (!cJSON_IsString(v) || i == nitems(versions_ok)) {
		srv_fail(s, "initialize: the server speaks protocol version "
		    "%.40s, which af does not", cJSON_IsString(v) ?
		    v->valuestring : "(none)");
		return;
	}
	free(s->version);
	s->version = xstrdup(v->valuestring);
	send_notify(s, "notifications/initialized", NULL);
	if (s->state != SRV_STARTING)
		return;		/* that send failed the server */
	caps = cJSON_GetObjectItemCaseSensitive(m->result, "capabilities");
	if (cJSON_GetObjectItemCaseSensitive(caps, "tools") == NULL) {
		log_info("mcp %s: the server offers no tools", s->cfg->name);
		tools_install(s, NULL);
		s->state = SRV_UP;
		s->first_done = 1;
		return;
	}
	start_listing(s);
}

static void
srv_launch(struct mcp_srv *s)
{
	cJSON *p, *ci;
	char err[512];

	s->state = SRV_STARTING;
	s->started = mono_ms();
	s->next_id = 1;
	if (!s->http && stdio_spawn(s, err, sizeof(err)) == -1) {
		srv_fail(s, "%s", err);
		return;
	}
	p = cJSON_CreateObject();
	cJSON_AddStringToObject(p, "protocolVersion", MCP_PROTOCOL_VERSION);
	cJSON_AddObjectToObject(p, "capabilities");
	ci = cJSON_AddObjectToObject(p, "clientInfo");
	cJSON_AddStringToObject(ci, "name", "af");
	cJSON_AddStringToObject(ci, "version", AF_VERSION);
	send_request(s, "initialize", p, on_init);
}

/* ---- tool calls ---- */

static void
on_call(struct mcp_req *r, struct mcp_msg *m, const char *err)
{
	struct tool_call *tc = r->tc;
	struct mcp_tool *t = r->tool;
	struct buf out;
	int is_error = 1;

	if (tc == NULL)
		return;
	tc->priv = NULL;
	tc->cancel = NULL;
	buf_init(&out);
	if (err != NULL)
		buf_addf(&out, "MCP server %s: %s", t->srv->cfg->name, err);
	else if (m->error != NULL)
		buf_addf(&out, "MCP server %s: error %ld: %s", t->srv->cfg->name,
		    m->err_code, m->err_message);
	else
		mcp_result_text(m->result, &out, &is_error);
	tool_done(tc, out.data, out.len, is_error);
	buf_free(&out);
	tool_release(t);
}

/* The run ended while the server was busy: tell the server, answer the
 * engine. */
static void
mcp_cancel(struct tool_call *tc)
{
	struct mcp_req *r = tc->priv;

	if (r == NULL)
		return;
	send_cancelled(r->srv, r->id, "the run ended");
	req_complete(r, NULL, "cancelled: the run ended");
}

static void
mcp_call(struct tool_call *tc)
{
	struct mcp_tool *t = (struct mcp_tool *)(void *)((char *)tc->def -
	    offsetof(struct mcp_tool, def));
	struct mcp_srv *s = t->srv;
	struct mcp_req *r;
	cJSON *p;

	if (s->state != SRV_UP) {
		tool_fail(tc, "MCP server %s is not available (%s%s%s)",
		    s->cfg->name, state_names[s->state],
		    s->last_error[0] ? ": " : "", s->last_error);
		return;
	}
	p = cJSON_CreateObject();
	cJSON_AddStringToObject(p, "name", t->info.remote);
	cJSON_AddItemReferenceToObject(p, "arguments", tc->input);
	t->refs++;
	r = req_new(s, "tools/call", on_call);
	r->tc = tc;
	r->tool = t;
	tc->priv = r;
	tc->cancel = mcp_cancel;
	req_send(r, p);
}

/* ---- start, stop, status ---- */

/* Find the executable the way the sandbox plan does: a basename in
 * MCP_EXEC_PATH, or a path (relative ones from the agent folder). */
static char *
find_exe(const char *name, const char *dir)
{
	char path[] = MCP_EXEC_PATH, *save = NULL, *d, *cand;

	if (strchr(name, '/') != NULL) {
		if (*name == '/' || dir == NULL)
			return xstrdup(name);
		return xasprintf("%s/%s", dir, name);
	}
	for (d = strtok_r(path, ":", &save); d != NULL;
	    d = strtok_r(NULL, ":", &save)) {
		cand = xasprintf("%s/%s", d, name);
		if (access(cand, X_OK) == 0)
			return cand;
		free(cand);
	}
	return NULL;
}

/* PATH, HOME and the server's own entries; names that are not identifiers,
 * and PATH or HOME themselves, are left out. */
static char **
make_env(const struct kvlist *kv)
{
	char **envp = xcalloc(kv->n + 3, sizeof(*envp));
	size_t n = 0;

	envp[n++] = xstrdup(MCP_PATH);
	envp[n++] = xstrdup(MCP_HOME);
	for (size_t i = 0; i < kv->n; i++) {
		const char *k = kv->v[i].key, *v = kv->v[i].value;
		int ok = k != NULL && v != NULL && k[0] != '\0' &&
		    !(k[0] >= '0' && k[0] <= '9');

		for (const char *p = k; ok && *p != '\0'; p++)
			ok = *p == '_' || (*p >= 'A' && *p <= 'Z') ||
			    (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9');
		if (!ok || strcmp(k, "PATH") == 0 || strcmp(k, "HOME") == 0) {
			log_warnx("mcp: env entry %s left out", k ? k : "?");
			continue;
		}
		envp[n++] = xasprintf("%s=%s", k, v);
	}
	return envp;
}

static void
free_vec(char **v)
{
	if (v == NULL)
		return;
	for (char **p = v; *p != NULL; p++)
		free(*p);
	free(v);
}

static void
ready_tick(void *arg)
{
	*(int *)arg = 1;
}

static int
all_listed(void)
{
	for (size_t i = 0; i < nsrvs; i++)
		if (!srvs[i].first_done)
			return 0;
	return 1;
}

int
mcp_start(const struct cfg *cfg)
{
	struct loop_timer *t;
	int expired = 0;

	stopping = 0;
	if (cfg->nmcp == 0)
		return 0;
	srvs = xcalloc(cfg->nmcp, sizeof(*srvs));
	nsrvs = cfg->nmcp;
	for (size_t i = 0; i < nsrvs; i++) {
		struct mcp_srv *s = &srvs[i];

		s->cfg = &cfg->mcp[i];
		s->root = cfg;
		s->http = s->cfg->url != NULL;
		s->backoff_ms = MCP_BACKOFF_MIN_MS;
		TAILQ_INIT(&s->reqs);
		LIST_INIT(&s->posts);
		if (!s->http) {
			size_t n = s->cfg->command.n;

			s->exe = find_exe(s->cfg->command.v[0], cfg->dir);
			s->argv = xcalloc(n + 1, sizeof(*s->argv));
			for (size_t j = 0; j < n; j++)
				s->argv[j] = xstrdup(s->cfg->command.v[j]);
			s->envp = make_env(&s->cfg->env);
		}
		srv_launch(s);
	}
	/* Turn the loop until every server has listed its tools (or failed),
	 * so that the first runs see them; bounded, and cut short by a stop. */
	t = loop_timer_add(MCP_READY_MS, ready_tick, &expired);
	while (!all_listed() && !expired && !loop_stopping())
		if (event_base_loop(loop_base(), EVLOOP_ONCE) == -1)
			break;
	if (!expired)
		loop_timer_cancel(t);
	for (size_t i = 0; i < nsrvs; i++)
		if (!srvs[i].first_done)
			log_warnx("mcp %s: not ready after %d ms; runs start "
			    "without its tools", srvs[i].cfg->name,
			    MCP_READY_MS);
	return 0;
}

void
mcp_stop(void)
{
	stopping = 1;
	for (size_t i = 0; i < nsrvs; i++) {
		loop_timer_cancel(srvs[i].retry);
		srvs[i].retry = NULL;
	}
}

/* At exit, with the loop gone: stdin closed first (the stdio way to ask a
 * server to end), then SIGTERM, a short wait, SIGKILL, and every process
 * reaped. */
static void
children_stop(void)
{
	struct mcp_child *c;
	int64_t deadline;
	int left, st;

	LIST_FOREACH(c, &children, entry) {
		child_close_io(c);
		if (!c->reaped)
			(void)kill(-c->pid, SIGTERM);
	}
	deadline = mono_ms() + MCP_STOP_WAIT_MS;
	do {
		left = 0;
		LIST_FOREACH(c, &children, entry) {
			if (c->reaped)
				continue;
			if (waitpid(c->pid, &st, WNOHANG) == c->pid) {
				(void)kill(-c->pid, SIGKILL);
				c->reaped = 1;
			} else
				left++;
		}
		if (left > 0)
			usleep(20000);
	} while (left > 0 && mono_ms() < deadline);
	while ((c = LIST_FIRST(&children)) != NULL) {
		if (!c->reaped) {
			(void)kill(-c->pid, SIGKILL);
			while (waitpid(c->pid, &st, 0) == -1 && errno == EINTR)
				;
		}
		child_free(c);
	}
}

void
mcp_free(void)
{
	struct mcp_post *p;

	mcp_stop();
	for (size_t i = 0; i < nsrvs; i++) {
		struct mcp_srv *s = &srvs[i];

		s->state = SRV_STOPPED;
		reqs_fail_all(s, "af is stopping");
		while ((p = LIST_FIRST(&s->posts)) != NULL) {
			http_cancel(p->hc);
			post_free(p);
		}
		loop_timer_cancel(s->kick);
		s->kick = NULL;
		strlist_free(&s->outq);
		if (s->child != NULL) {
			s->child->srv = NULL;
			s->child = NULL;
		}
	}
	children_stop();
	for (size_t i = 0; i < nsrvs; i++) {
		struct mcp_srv *s = &srvs[i];

		tools_retire(s);
		cJSON_Delete(s->listing);
		free(s->exe);
		free_vec(s->argv);
		free_vec(s->envp);
		free(s->session);
		free(s->version);
	}
	free(srvs);
	srvs = NULL;
	nsrvs = 0;
}

cJSON *
mcp_status_json(void)
{
	cJSON *all = cJSON_CreateObject();

	for (size_t i = 0; i < nsrvs; i++) {
		const struct mcp_srv *s = &srvs[i];
		cJSON *o = cJSON_AddObjectToObject(all, s->cfg->name);

		cJSON_AddStringToObject(o, "state", state_names[s->state]);
		cJSON_AddStringToObject(o, "transport", s->http ? "http" :
		    "stdio");
		cJSON_AddNumberToObject(o, "tools", (double)s->ntools);
		cJSON_AddNumberToObject(o, "restarts", s->restarts);
		if (s->last_error[0] != '\0')
			cJSON_AddStringToObject(o, "last_error", s->last_error);
		else
			cJSON_AddNullToObject(o, "last_error");
		if (s->child != NULL)
			cJSON_AddNumberToObject(o, "pid", (double)s->child->pid);
	}
	return all;
}
