/* The native tools, called directly as the engine would: the permission
 * result filled by perm_check, tool_done's real shaping, and the real loop
 * for the asynchronous ones (run_bash, http_request against an evhttp server
 * on 127.0.0.1). Each case owns a fresh folder under /tmp. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "audit/audit.h"
#include "config.h"
#include "http.h"
#include "loop.h"
#include "perm.h"
#include "tool.h"
#include "tt.h"
#include "util.h"

/* The case's folder (realpath) and config. */
static char T[PATH_MAX];
static struct cfg *cfg;

/* What the last call returned. */
static struct {
	int	 done;
	int	 is_error;
	char	*out;
} res;

static struct tool_call tcall;
static cJSON *tinput;

static void
on_done(struct tool_call *tc, const char *out, size_t len, int is_error)
{
	free(res.out);
	res.out = xstrndup(out, len);
	res.is_error = is_error;
	res.done++;
	if (loop_base() != NULL)
		event_base_loopexit(loop_base(), NULL);
}

static char *
tpath(const char *rel)
{
	static char bufs[4][PATH_MAX];
	static int i;
	char *b = bufs[i++ % 4];

	snprintf(b, PATH_MAX, "%s/%s", T, rel);
	return b;
}

static void
put(const char *rel, const char *content)
{
	int fd = open(tpath(rel), O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd == -1 || write(fd, content, strlen(content)) !=
	    (ssize_t)strlen(content))
		fatal("put %s", rel);
	close(fd);
}

static char *
slurp(const char *rel)
{
	struct buf b;

	buf_init(&b);
	if (read_file_max(tpath(rel), 1 << 24, &b) == -1) {
		buf_free(&b);
		return NULL;
	}
	return b.data != NULL ? b.data : xstrdup("");
}

/* A fresh folder with ws/ (read and write), out/ (nothing), skills/ and
 * data/, and the agent config that grants them. */
static void
setup(void)
{
	char tmpl[] = "/tmp/af-tools-XXXXXX";

	if (mkdtemp(tmpl) == NULL || realpath(tmpl, T) == NULL)
		fatal("mkdtemp");
	mkdir(tpath("ws"), 0755);
	mkdir(tpath("out"), 0755);
	mkdir(tpath("skills"), 0755);
	mkdir(tpath("data"), 0755);
	cfg = xcalloc(1, sizeof(*cfg));
	cfg->name = xstrdup("tools-test");
	cfg->data_dir = xstrdup(tpath("data"));
	cfg->skills_dir = xstrdup(tpath("skills"));
	strlist_add(&cfg->perm.read, tpath("ws"));
	strlist_add(&cfg->perm.write, tpath("ws"));
	strlist_add(&cfg->perm.run, "bash");
	strlist_add(&cfg->perm.net, "127.0.0.1");
	cfg->limits.tool_output = 8192;
	cfg->limits.tool_timeout_ms = 10000;
	cfg->limits.run_timeout_ms = 60000;
	memset(&res, 0, sizeof(res));
	if (audit_open(tpath("data/audit.jsonl"), "tools-test",
	    &cfg->secret_values, NULL, 0) == -1)
		fatalx("audit_open");
}

static void
teardown(void)
{
	audit_close();
	cJSON_Delete(tinput);
	tinput = NULL;
	free(res.out);
	memset(&res, 0, sizeof(res));
	cfg_free(cfg);
	cfg = NULL;
	tt_rmtree(T);
}

/* Start a call the way tool_invoke does: the target checked by the
 * permission engine (run: marked allowed, the run axis has its own tests). */
static int
start(const struct tool_def *def, const char *json)
{
	cJSON_Delete(tinput);
	tinput = cJSON_Parse(json);
	if (tinput == NULL)
		fatalx("bad test JSON: %s", json);
	memset(&tcall, 0, sizeof(tcall));
	tcall.def = def;
	tcall.cfg = cfg;
	tcall.run_id = "r-test";
	tcall.use_id = "u-test";
	tcall.input = tinput;
	tcall.timeout_ms = cfg->limits.tool_timeout_ms;
	tcall.on_done = on_done;
	if (def->axis == PERM_RUN)
		tcall.perm.allowed = 1;
	else if (def->axis != TOOL_NO_AXIS) {
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(tinput,
		    def->target_key);

		if (!cJSON_IsString(t) || !perm_check(&cfg->perm,
		    (enum perm_axis)def->axis, t->valuestring, &tcall.perm))
			return -1;
	}
	free(res.out);
	memset(&res, 0, sizeof(res));
	def->call(&tcall);
	return 0;
}

static void
guard_fire(evutil_socket_t fd, short what, void *arg)
{
	*(int *)arg = 1;
	event_base_loopexit(loop_base(), NULL);
}

/* Turn the loop until the call is done, at most ms. */
static int
wait_done(long ms)
{
	int hit = 0;
	struct event *g = evtimer_new(loop_base(), guard_fire, &hit);
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(g, &tv);
	while (!res.done && !hit)
		event_base_loop(loop_base(), EVLOOP_ONCE);
	event_free(g);
	return res.done == 1 ? 0 : -1;
}

/* One synchronous call: done before call() returns. */
static int
call_sync(const struct tool_def *def, const char *json)
{
	if (start(def, json) == -1)
		return -1;
	return res.done == 1 ? 0 : -1;
}

static int
has(const char *s, const char *sub)
{
	if (s == NULL || strstr(s, sub) == NULL) {
		fprintf(stderr, "  expected \"%s\" in \"%.400s\"\n", sub,
		    s ? s : "(null)");
		return 0;
	}
	return 1;
}

/* ---- current_time ---- */

static void
t_current_time(void)
{
	setup();
	tt_int_op(call_sync(&tool_current_time, "{}"), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	tt_int_op(strlen(res.out), >, 24);
	tt_assert(res.out[4] == '-' && res.out[10] == 'T' && res.out[23] == 'Z');
	tt_assert(has(res.out, "unix time "));
	tt_int_op(call_sync(&tool_current_time, "{\"x\":1}"), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	tt_int_op(tool_current_time.exists(cfg), ==, 1);
end:
	teardown();
}

/* ---- read_skill ---- */

static void
t_read_skill(void)
{
	setup();
	mkdir(tpath("skills/triage"), 0755);
	put("skills/triage/SKILL.md", "# Triage\nLabel things.\n");
	mkdir(tpath("skills/other"), 0755);
	put("skills/other/SKILL.md", "not listed");
	mkdir(tpath("skills/linked"), 0755);
	put("out/secret", "TOP SECRET");
	tt_int_op(symlink(tpath("out/secret"), tpath("skills/linked/SKILL.md")),
	    ==, 0);
	tt_int_op(tool_read_skill.exists(cfg), ==, 0);
	strlist_add(&cfg->skills, "triage");
	strlist_add(&cfg->skills, "linked");
	tt_int_op(tool_read_skill.exists(cfg), ==, 1);

	tt_int_op(call_sync(&tool_read_skill, "{\"name\":\"triage\"}"), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	tt_str_op(res.out, ==, "# Triage\nLabel things.\n");
	tt_int_op(call_sync(&tool_read_skill, "{\"name\":\"other\"}"), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	tt_assert(has(res.out, "permission denied: skill \"other\" is not in "
	    "the agent's skills list"));
	tt_int_op(call_sync(&tool_read_skill, "{\"name\":\"../out\"}"), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	tt_int_op(call_sync(&tool_read_skill, "{\"name\":\"linked\"}"), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	tt_assert(strstr(res.out, "SECRET") == NULL);
	tt_int_op(call_sync(&tool_read_skill, "{\"name\":7}"), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	tt_int_op(call_sync(&tool_read_skill, "{}"), ==, 0);
	tt_int_op(res.is_error, ==, 1);
end:
	teardown();
}

/* ---- read_file ---- */

static void
t_read_file_ranges(void)
{
	char j[PATH_MAX + 128];
	const char *p;

	setup();
	put("ws/f", "0123456789");
	p = tpath("ws/f");
#define RF(extra) (snprintf(j, sizeof(j), "{\"path\":\"%s\"%s}", p, extra), \
	call_sync(&tool_read_file, j))
	tt_int_op(RF(""), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	tt_str_op(res.out, ==, "0123456789");
	tt_int_op(RF(",\"offset\":3,\"limit\":4"), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	tt_assert(strncmp(res.out, "3456\n[read_file: bytes 3-7 of 10", 32) ==
	    0);
	tt_assert(has(res.out, "offset 7"));
	tt_int_op(RF(",\"offset\":7"), ==, 0);
	tt_str_op(res.out, ==, "789");
	tt_int_op(RF(",\"offset\":6,\"limit\":4"), ==, 0);
	tt_str_op(res.out, ==, "6789");
	tt_int_op(RF(",\"offset\":10"), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	tt_assert(has(res.out, "past the end of the file (10 bytes)"));
	tt_int_op(RF(",\"limit\":0"), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	tt_assert(has(res.out, "bytes 0-0 of 10"));
	/* Bad offsets and limits are tool errors, never reads. */
	{
		static const char *const bad[] = {
			",\"offset\":-1", ",\"offset\":1.5", ",\"offset\":\"3\"",
			",\"offset\":1e300", ",\"offset\":true",
			",\"offset\":null", ",\"limit\":-5",
			",\"limit\":99999999999", ",\"limit\":2.5",
			",\"limit\":[1]", ",\"other\":1",
		};

		for (size_t i = 0; i < nitems(bad); i++) {
			tt_int_op(RF(bad[i]), ==, 0);
			if (!res.is_error)
				tt_fail_msg("accepted %s", bad[i]);
		}
	}
	/* The limit bounds what comes back; tool_done caps it further. */
	{
		struct buf big;

		buf_init(&big);
		for (int i = 0; i < 3000; i++)
			buf_adds(&big, "0123456789");
		put("ws/big", big.data);
		buf_free(&big);
		p = tpath("ws/big");
		tt_int_op(RF(""), ==, 0);
		tt_int_op(res.is_error, ==, 0);
		tt_int_op(strlen(res.out), <, 8192 + 100);
		tt_assert(has(res.out, "[output truncated: 8192 of"));
		tt_int_op(RF(",\"offset\":29990,\"limit\":100"), ==, 0);
		tt_str_op(res.out, ==, "0123456789");
	}
#undef RF
end:
	teardown();
}

static void
t_read_file_not_regular(void)
{
	char j[PATH_MAX + 64];

	setup();
	mkdir(tpath("ws/dir"), 0755);
	tt_int_op(mkfifo(tpath("ws/fifo"), 0644), ==, 0);
	/* A FIFO without a writer: opening it must not block. */
	alarm(10);
	snprintf(j, sizeof(j), "{\"path\":\"%s\"}", tpath("ws/fifo"));
	tt_int_op(call_sync(&tool_read_file, j), ==, 0);
	alarm(0);
	tt_int_op(res.is_error, ==, 1);
	tt_assert(has(res.out, "is a FIFO, not a regular file"));
	snprintf(j, sizeof(j), "{\"path\":\"%s\"}", tpath("ws/dir"));
	tt_int_op(call_sync(&tool_read_file, j), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	tt_assert(has(res.out, "is a directory"));
	snprintf(j, sizeof(j), "{\"path\":\"%s\"}", tpath("ws/missing"));
	tt_int_op(call_sync(&tool_read_file, j), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	tt_assert(has(res.out, "No such file"));
end:
	alarm(0);
	teardown();
}

/* The check passes on a plain file; then the file (or a folder on its path)
 * is swapped for a symlink to a secret outside the grant. The tool acts on
 * the checked path through perm_open, which must refuse the link. */
static void
t_read_file_symlink_race(void)
{
	char j[PATH_MAX + 64];

	setup();
	put("out/secret", "TOP SECRET");
	put("ws/a", "harmless");
	mkdir(tpath("ws/sub"), 0755);
	put("ws/sub/b", "harmless too");
	mkdir(tpath("out/sub"), 0755);
	put("out/sub/b", "TOP SECRET B");

	snprintf(j, sizeof(j), "{\"path\":\"%s\"}", tpath("ws/a"));
	cJSON_Delete(tinput);
	tinput = cJSON_Parse(j);
	tt_int_op(perm_check(&cfg->perm, PERM_READ, tpath("ws/a"),
	    &tcall.perm), ==, 1);
	tt_str_op(tcall.perm.resolved, ==, tpath("ws/a"));
	/* The swap, between check and open. */
	tt_int_op(unlink(tpath("ws/a")), ==, 0);
	tt_int_op(symlink(tpath("out/secret"), tpath("ws/a")), ==, 0);
	tcall.def = &tool_read_file;
	tcall.cfg = cfg;
	tcall.input = tinput;
	tcall.on_done = on_done;
	tcall.finished = 0;
	res.done = 0;
	tool_read_file.call(&tcall);
	tt_int_op(res.done, ==, 1);
	tt_int_op(res.is_error, ==, 1);
	tt_assert(strstr(res.out, "SECRET") == NULL);
	tt_assert(has(res.out, "symbolic link"));

	/* A folder on the path swapped for a link. */
	snprintf(j, sizeof(j), "{\"path\":\"%s\"}", tpath("ws/sub/b"));
	cJSON_Delete(tinput);
	tinput = cJSON_Parse(j);
	memset(&tcall, 0, sizeof(tcall));
	tt_int_op(perm_check(&cfg->perm, PERM_READ, tpath("ws/sub/b"),
	    &tcall.perm), ==, 1);
	tt_int_op(rename(tpath("ws/sub"), tpath("ws/sub.old")), ==, 0);
	tt_int_op(symlink(tpath("out/sub"), tpath("ws/sub")), ==, 0);
	tcall.def = &tool_read_file;
	tcall.cfg = cfg;
	tcall.input = tinput;
	tcall.on_done = on_done;
	res.done = 0;
	tool_read_file.call(&tcall);
	tt_int_op(res.done, ==, 1);
	tt_int_op(res.is_error, ==, 1);
	tt_assert(strstr(res.out, "SECRET") == NULL);
end:
	teardown();
}

/* ---- write_file ---- */

static int
count_entries(const char *rel)
{
	DIR *d = opendir(tpath(rel));
	struct dirent *de;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

static void
t_write_file(void)
{
	char j[PATH_MAX + 256];
	struct stat st;
	char *got = NULL;

	setup();
	mkdir(tpath("ws/d"), 0755);
	snprintf(j, sizeof(j), "{\"path\":\"%s\",\"content\":\"hello\\nworld\"}",
	    tpath("ws/d/new.txt"));
	tt_int_op(call_sync(&tool_write_file, j), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	tt_assert(has(res.out, "wrote 11 bytes to "));
	got = slurp("ws/d/new.txt");
	tt_str_op(got, ==, "hello\nworld");
	tt_int_op(count_entries("ws/d"), ==, 1);	/* no temp file left */
	tt_int_op(stat(tpath("ws/d/new.txt"), &st), ==, 0);
	tt_int_op(st.st_mode & 0777, ==, 0644);

	/* Replacing keeps the mode; the old content is gone whole. */
	tt_int_op(chmod(tpath("ws/d/new.txt"), 0600), ==, 0);
	snprintf(j, sizeof(j), "{\"path\":\"%s\",\"content\":\"v2\"}",
	    tpath("ws/d/new.txt"));
	tt_int_op(call_sync(&tool_write_file, j), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	free(got);
	got = slurp("ws/d/new.txt");
	tt_str_op(got, ==, "v2");
	tt_int_op(stat(tpath("ws/d/new.txt"), &st), ==, 0);
	tt_int_op(st.st_mode & 0777, ==, 0600);
	tt_int_op(count_entries("ws/d"), ==, 1);

	/* A hard link to a file outside the grant is replaced, not written
	 * through. */
	put("out/victim", "original");
	tt_int_op(link(tpath("out/victim"), tpath("ws/d/hl")), ==, 0);
	snprintf(j, sizeof(j), "{\"path\":\"%s\",\"content\":\"pwned\"}",
	    tpath("ws/d/hl"));
	tt_int_op(call_sync(&tool_write_file, j), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	free(got);
	got = slurp("out/victim");
	tt_str_op(got, ==, "original");

	/* Missing folders are not created. */
	snprintf(j, sizeof(j), "{\"path\":\"%s\",\"content\":\"x\"}",
	    tpath("ws/nope/f"));
	if (start(&tool_write_file, j) == 0) {
		tt_int_op(res.is_error, ==, 1);
		tt_assert(has(res.out, "does not create folders"));
	}
	tt_int_op(access(tpath("ws/nope"), F_OK), ==, -1);

	/* A folder is not a file. */
	snprintf(j, sizeof(j), "{\"path\":\"%s\",\"content\":\"x\"}",
	    tpath("ws/d"));
	tt_int_op(call_sync(&tool_write_file, j), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	tt_assert(has(res.out, "not a regular file"));

	/* Bad input. */
	snprintf(j, sizeof(j), "{\"path\":\"%s\",\"content\":5}",
	    tpath("ws/d/x"));
	tt_int_op(call_sync(&tool_write_file, j), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	snprintf(j, sizeof(j), "{\"path\":\"%s\"}", tpath("ws/d/x"));
	tt_int_op(call_sync(&tool_write_file, j), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	tt_int_op(access(tpath("ws/d/x"), F_OK), ==, -1);

	/* The folder swapped for a link after the check. */
	snprintf(j, sizeof(j), "{\"path\":\"%s\",\"content\":\"evil\"}",
	    tpath("ws/d/new.txt"));
	cJSON_Delete(tinput);
	tinput = cJSON_Parse(j);
	memset(&tcall, 0, sizeof(tcall));
	tt_int_op(perm_check(&cfg->perm, PERM_WRITE, tpath("ws/d/new.txt"),
	    &tcall.perm), ==, 1);
	tt_int_op(rename(tpath("ws/d"), tpath("ws/d.old")), ==, 0);
	tt_int_op(symlink(tpath("out"), tpath("ws/d")), ==, 0);
	tcall.def = &tool_write_file;
	tcall.cfg = cfg;
	tcall.input = tinput;
	tcall.on_done = on_done;
	res.done = 0;
	tool_write_file.call(&tcall);
	tt_int_op(res.done, ==, 1);
	tt_int_op(res.is_error, ==, 1);
	tt_assert(has(res.out, "symbolic link"));
	tt_int_op(access(tpath("out/new.txt"), F_OK), ==, -1);
	tt_int_op(count_entries("out"), ==, 1);	/* victim only */
end:
	free(got);
	teardown();
}

/* ---- run_bash ---- */

static int
bash(const char *json, long ms)
{
	if (loop_init() == -1 || start(&tool_run_bash, json) == -1)
		return -1;
	return wait_done(ms);
}

/* The process group's id, from a command that starts with `echo $$`. */
static pid_t
group_of(const char *out)
{
	const char *nl = strchr(out, '\n');

	return nl != NULL ? (pid_t)atol(nl + 1) : 0;
}

/* Whether the group is gone, within ms; we are the subreaper, so what bash
 * left behind comes to us and is reaped here. */
static int
group_gone(pid_t pg, long ms)
{
	int64_t end = mono_ms() + ms;

	do {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (kill(-pg, 0) == -1 && errno == ESRCH)
			return 1;
		usleep(10000);
	} while (mono_ms() < end);
	return 0;
}

static void
t_run_bash_basic(void)
{
	int fd = -1;

	setup();
	tt_int_op(tool_run_bash.exists(cfg), ==, 1);
	tt_int_op(bash("{\"command\":\"echo hi; echo err >&2\"}", 5000), ==,
	    0);
	tt_int_op(res.is_error, ==, 0);
	tt_str_op(res.out, ==, "exit status 0\nhi\nerr\n");
	tt_int_op(bash("{\"command\":\"echo out; exit 3\"}", 5000), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	tt_str_op(res.out, ==, "exit status 3\nout\n");
	tt_int_op(bash("{\"command\":\"kill -SEGV $$\"}", 5000), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	tt_assert(has(res.out, "killed by signal 11"));
	/* stdin is /dev/null: cat ends at once. */
	tt_int_op(bash("{\"command\":\"cat; echo rc=$?\"}", 5000), ==, 0);
	tt_str_op(res.out, ==, "exit status 0\nrc=0\n");
	/* No fd of ours reaches the child, CLOEXEC or not. */
	fd = open("/dev/null", O_RDONLY);
	tt_assert(fd > 2);
	tt_int_op(bash("{\"command\":\"ls /proc/self/fd\"}", 5000), ==, 0);
	tt_str_op(res.out, ==, "exit status 0\n0\n1\n2\n3\n");
	/* Tools have no working folder: commands run in /. */
	tt_int_op(bash("{\"command\":\"pwd\"}", 5000), ==, 0);
	tt_str_op(res.out, ==, "exit status 0\n/\n");
	/* Its own process group. */
	tt_int_op(bash("{\"command\":\"echo $$; ps -o pgid= -p $$\"}", 5000),
	    ==, 0);
	{
		pid_t pg = group_of(res.out);
		const char *l2 = strchr(strchr(res.out, '\n') + 1, '\n');

		tt_assert(pg > 1 && pg != getpgrp());
		tt_assert(l2 != NULL && atol(l2 + 1) == pg);
	}
	/* Bad input never starts anything. */
	{
		static const char *const bad[] = {
			"{}", "{\"command\":5}", "{\"command\":\"\"}",
			"{\"command\":\"true\",\"timeout\":-1}",
			"{\"command\":\"true\",\"timeout\":0}",
			"{\"command\":\"true\",\"timeout\":\"5\"}",
			"{\"command\":\"true\",\"timeout\":99999}",
			"{\"command\":\"true\",\"extra\":1}",
		};

		for (size_t i = 0; i < nitems(bad); i++) {
			tt_int_op(start(&tool_run_bash, bad[i]), ==, 0);
			tt_int_op(res.done, ==, 1);
			if (!res.is_error)
				tt_fail_msg("accepted %s", bad[i]);
		}
	}
end:
	if (fd != -1)
		close(fd);
	teardown();
}

static void
t_run_bash_env(void)
{
	char *save = NULL, *line;

	setup();
	setenv("AF_TEST_LEAK", "leaked", 1);
	cfg->env.v = xcalloc(3, sizeof(*cfg->env.v));
	cfg->env.v[0].key = xstrdup("FOO");
	cfg->env.v[0].value = xstrdup("bar baz");
	cfg->env.v[1].key = xstrdup("PATH");
	cfg->env.v[1].value = xstrdup("/evil");
	cfg->env.v[2].key = xstrdup("BASH_FUNC_ls%%");
	cfg->env.v[2].value = xstrdup("() { echo evil; }");
	cfg->env.n = 3;
	tt_int_op(bash("{\"command\":\"env\"}", 5000), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	tt_assert(has(res.out, "\nPATH=/usr/local/bin:/usr/bin:/bin\n"));
	tt_assert(has(res.out, "\nHOME=/nonexistent\n"));
	tt_assert(has(res.out, "\nFOO=bar baz\n"));
	/* Only ours, plus what bash itself exports (PWD, SHLVL, _). */
	for (line = strtok_r(strchr(res.out, '\n') + 1, "\n", &save);
	    line != NULL; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "PATH=", 5) != 0 &&
		    strncmp(line, "HOME=", 5) != 0 &&
		    strncmp(line, "FOO=", 4) != 0 &&
		    strcmp(line, "PWD=/") != 0 &&
		    strncmp(line, "SHLVL=", 6) != 0 &&
		    strncmp(line, "_=", 2) != 0)
			tt_fail_msg("unexpected variable: %s", line);
	}
end:
	unsetenv("AF_TEST_LEAK");
	teardown();
}

static void
t_run_bash_timeout(void)
{
	int64_t t0;
	pid_t pg;

	setup();
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	t0 = mono_ms();
	tt_int_op(bash("{\"command\":\"echo $$; sleep 100 & sleep 100\","
	    "\"timeout\":0.5}", 5000), ==, 0);
	tt_int_op(mono_ms() - t0, <, 3000);
	tt_int_op(res.is_error, ==, 1);
	tt_assert(has(res.out, "killed after timeout (500 ms)\n"));
	pg = group_of(res.out);
	tt_assert(pg > 1);
	tt_int_op(group_gone(pg, 3000), ==, 1);

	/* Background jobs do not outlive a command that ends by itself. */
	t0 = mono_ms();
	tt_int_op(bash("{\"command\":\"echo $$; sleep 100 & echo started\"}",
	    5000), ==, 0);
	tt_int_op(mono_ms() - t0, <, 3000);
	tt_int_op(res.is_error, ==, 0);
	tt_assert(has(res.out, "exit status 0\n"));
	tt_assert(has(res.out, "started"));
	pg = group_of(res.out);
	tt_int_op(group_gone(pg, 3000), ==, 1);

	/* The default comes from the engine (limits.tool_timeout). */
	cfg->limits.tool_timeout_ms = 300;
	tt_int_op(bash("{\"command\":\"sleep 100\"}", 5000), ==, 0);
	tt_assert(has(res.out, "killed after timeout (300 ms)"));
end:
	prctl(PR_SET_CHILD_SUBREAPER, 0);
	teardown();
}

static void
cancel_now(evutil_socket_t fd, short what, void *arg)
{
	if (tcall.cancel != NULL)
		tcall.cancel(&tcall);
}

static void
t_run_bash_cancel(void)
{
	struct event *ev = NULL;
	struct timeval tv = { 0, 100000 };
	int64_t end;

	setup();
	tt_int_op(loop_init(), ==, 0);
	tt_int_op(start(&tool_run_bash, "{\"command\":\"sleep 100\"}"), ==, 0);
	tt_int_op(res.done, ==, 0);
	tt_assert(tcall.cancel != NULL);
	ev = evtimer_new(loop_base(), cancel_now, NULL);
	evtimer_add(ev, &tv);
	tt_int_op(wait_done(5000), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	tt_assert(has(res.out, "cancelled"));
	tt_assert(tcall.cancel == NULL);
	/* The killed child is still reaped, by the loop, later. */
	end = mono_ms() + 3000;
	while (mono_ms() < end) {
		struct timeval sl = { 0, 20000 };

		event_base_loopexit(loop_base(), &sl);
		event_base_dispatch(loop_base());
		if (waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD)
			break;
	}
	tt_int_op(waitpid(-1, NULL, WNOHANG), ==, -1);
	tt_int_op(errno, ==, ECHILD);
end:
	if (ev != NULL)
		event_free(ev);
	teardown();
}

static void
t_run_bash_big_output(void)
{
	setup();
	tt_int_op(bash("{\"command\":\"head -c 100000 /dev/zero | tr "
	    "'\\\\0' a\"}", 5000), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	tt_assert(has(res.out, "exit status 0; 100000 bytes of output, only "
	    "the first 16384 kept\naaaa"));
	tt_int_op(strlen(res.out), <, 8192 + 100);
	tt_assert(has(res.out, "[output truncated: 8192 of"));
	/* Endless output is counted, not kept, until the timeout. */
	tt_int_op(bash("{\"command\":\"yes\",\"timeout\":0.5}", 5000), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	tt_assert(has(res.out, "killed after timeout (500 ms); "));
	tt_assert(has(res.out, "bytes of output, only the first 16384 kept"));
end:
	teardown();
}

/* A secret that straddles the output bound is redacted before the cut, so
 * no head of it is left at the end of what the model reads. */
static void
t_output_redacted_before_cut(void)
{
	setup();
	strlist_add(&cfg->secret_values, "QZQZQZQZ7");
	tt_int_op(bash("{\"command\":\"for i in $(seq 3000); do printf "
	    "'QZQZQZQZ7 '; done\"}", 5000), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	tt_assert(has(res.out, "[REDACTED] [REDACTED] "));
	tt_assert(has(res.out, "[output truncated: 8192 of"));
	tt_assert(strchr(res.out, 'Q') == NULL);
end:
	teardown();
}

/* ---- http_request ---- */

static int port1, port2, nrequests;
/* Replies left open by /stall: finished at the end, which also frees those
 * whose client went away (evhttp detaches them and leaves them to us). */
static struct evhttp_request *stalled[8];
static size_t nstalled;

static void
reply(struct evhttp_request *req, int code, const char *location,
    const char *body)
{
	struct evbuffer *b = evbuffer_new();

	if (location != NULL)
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Location", location);
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "text/plain; charset=utf-8");
	if (body != NULL)
		evbuffer_add(b, body, strlen(body));
	evhttp_send_reply(req, code, "X", b);
	evbuffer_free(b);
}

static void
serve(struct evhttp_request *req, void *arg)
{
	const char *uri = evhttp_request_get_uri(req);
	char loc[128];

	nrequests++;
	if (strcmp(uri, "/ok") == 0)
		reply(req, 200, NULL, "hello");
	else if (strcmp(uri, "/r/rel") == 0)
		reply(req, 302, "/ok", NULL);
	else if (strcmp(uri, "/r/abs") == 0) {
		snprintf(loc, sizeof(loc), "http://127.0.0.1:%d/ok", port1);
		reply(req, 301, loc, NULL);
	} else if (strcmp(uri, "/r/denied") == 0) {
		snprintf(loc, sizeof(loc), "http://localhost:%d/ok", port1);
		reply(req, 302, loc, NULL);
	} else if (strcmp(uri, "/r/303") == 0)
		reply(req, 303, "/echo", NULL);
	else if (strcmp(uri, "/r/sub/307") == 0)
		reply(req, 307, "../../echo?q=1", NULL);
	else if (strcmp(uri, "/r/other") == 0) {
		snprintf(loc, sizeof(loc), "http://127.0.0.1:%d/echo", port2);
		reply(req, 302, loc, NULL);
	} else if (strcmp(uri, "/r/loop") == 0)
		reply(req, 302, "/r/loop", NULL);
	else if (strcmp(uri, "/r/ftp") == 0)
		reply(req, 302, "ftp://127.0.0.1/x", NULL);
	else if (strcmp(uri, "/stall") == 0) {
		/* Headers and a first chunk, then nothing: the request stays
		 * open until the client gives up (evhttp_free ends it). */
		struct evbuffer *b = evbuffer_new();

		evhttp_send_reply_start(req, 200, "OK");
		evbuffer_add(b, "partial", 7);
		evhttp_send_reply_chunk(req, b);
		evbuffer_free(b);
		if (nstalled < nitems(stalled))
			stalled[nstalled++] = req;
	} else if (strcmp(uri, "/notfound") == 0)
		reply(req, 404, NULL, "no such thing");
	else if (strcmp(uri, "/big") == 0) {
		struct evbuffer *b = evbuffer_new();
		char chunk[4096];

		memset(chunk, 'x', sizeof(chunk));
		for (int i = 0; i < 512; i++)
			evbuffer_add(b, chunk, sizeof(chunk));
		evhttp_send_reply(req, 200, "OK", b);
		evbuffer_free(b);
	} else if (strncmp(uri, "/echo", 5) == 0) {
		struct evbuffer *b = evbuffer_new();
		struct evkeyvalq *h = evhttp_request_get_input_headers(req);
		struct evbuffer *in = evhttp_request_get_input_buffer(req);
		struct evkeyval *kv;
		static const char *const names[] = { "GET", "POST", "HEAD",
		    "PUT", "DELETE", "OPTIONS", "TRACE", "CONNECT", "PATCH" };
		int cmd = evhttp_request_get_command(req), mi = 0;

		while (mi < 9 && (1 << mi) != cmd)
			mi++;
		evbuffer_add_printf(b, "method=%s uri=%s\n",
		    mi < 9 ? names[mi] : "?", uri);
		for (kv = h->tqh_first; kv != NULL; kv = kv->next.tqe_next)
			evbuffer_add_printf(b, "h:%s=%s\n", kv->key, kv->value);
		evbuffer_add_printf(b, "body=");
		evbuffer_add_buffer(b, in);
		evhttp_send_reply(req, 200, "OK", b);
		evbuffer_free(b);
	} else
		reply(req, 500, NULL, "unexpected");
}

static struct evhttp *
server(int *port)
{
	struct evhttp *h = evhttp_new(loop_base());
	struct evhttp_bound_socket *s;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	evhttp_set_max_body_size(h, 1 << 20);
	evhttp_set_max_headers_size(h, 16 << 10);
	evhttp_set_timeout(h, 10);
	evhttp_set_allowed_methods(h, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
	    EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
	    EVHTTP_REQ_PATCH);
	evhttp_set_gencb(h, serve, NULL);
	s = evhttp_bind_socket_with_handle(h, "127.0.0.1", 0);
	if (s == NULL || getsockname(evhttp_bound_socket_get_fd(s),
	    (struct sockaddr *)&ss, &sl) == -1)
		fatal("evhttp bind");
	*port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return h;
}

static int
hreq(const char *json_fmt, ...) AF_PRINTF(1, 2);

/* One http_request; %d in the JSON stands for the first server's port. */
static int
hreq(const char *json_fmt, ...)
{
	char j[4096];
	va_list ap;

	va_start(ap, json_fmt);
	vsnprintf(j, sizeof(j), json_fmt, ap);
	va_end(ap);
	if (start(&tool_http_request, j) == -1)
		return -1;
	return wait_done(10000);
}

static void
t_http_request(void)
{
	struct evhttp *s1 = NULL, *s2 = NULL;
	char *audit = NULL;
	int before;

	setup();
	tt_int_op(loop_init(), ==, 0);
	tt_int_op(http_init(), ==, 0);
	s1 = server(&port1);
	s2 = server(&port2);
	tt_int_op(tool_http_request.exists(cfg), ==, 1);

	tt_int_op(hreq("{\"method\":\"GET\",\"url\":\"http://127.0.0.1:%d/ok\"}",
	    port1), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	tt_str_op(res.out, ==, "HTTP 200\ncontent-type: text/plain; "
	    "charset=utf-8\n\nhello");
	tt_int_op(hreq("{\"method\":\"get\",\"url\":\"http://127.0.0.1:%d/"
	    "notfound\"}", port1), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	tt_assert(has(res.out, "HTTP 404\n"));

	/* Redirects to the allowed host, relative and absolute. */
	tt_int_op(hreq("{\"method\":\"GET\",\"url\":\"http://127.0.0.1:%d/r/"
	    "rel\"}", port1), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	tt_assert(has(res.out, "HTTP 200\n"));
	tt_assert(has(res.out, "redirected 1 time; final URL: http://"
	    "127.0.0.1:"));
	tt_assert(has(res.out, "\n\nhello"));
	tt_int_op(hreq("{\"method\":\"GET\",\"url\":\"http://127.0.0.1:%d/r/"
	    "abs\"}", port1), ==, 0);
	tt_assert(has(res.out, "\n\nhello"));

	/* A hop to a host not granted (localhost is not 127.0.0.1). */
	before = nrequests;
	tt_int_op(hreq("{\"method\":\"GET\",\"url\":\"http://127.0.0.1:%d/r/"
	    "denied\"}", port1), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	tt_assert(has(res.out, "permission denied: net access to "
	    "\"localhost\" is not in the agent's permissions.net allowlist"));
	tt_int_op(nrequests, ==, before + 1);
	audit_sync();
	audit = slurp("data/audit.jsonl");
	tt_assert(has(audit, "\"decision\":\"deny\""));
	tt_assert(has(audit, "localhost"));
	/* Only http and https, on a hop too. */
	tt_int_op(hreq("{\"method\":\"GET\",\"url\":\"http://127.0.0.1:%d/r/"
	    "ftp\"}", port1), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	tt_assert(has(res.out, "permission denied"));

	/* 303 turns into GET without the body; 307 keeps both. */
	tt_int_op(hreq("{\"method\":\"POST\",\"url\":\"http://127.0.0.1:%d/r/"
	    "303\",\"body\":\"payload\",\"headers\":{\"Content-Type\":"
	    "\"text/plain\"}}", port1), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	tt_assert(has(res.out, "method=GET uri=/echo\n"));
	tt_assert(strstr(res.out, "payload") == NULL);
	tt_int_op(hreq("{\"method\":\"PUT\",\"url\":\"http://127.0.0.1:%d/r/"
	    "sub/307\",\"body\":\"payload\"}", port1), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	tt_assert(has(res.out, "method=PUT uri=/echo?q=1\n"));
	tt_assert(has(res.out, "body=payload"));

	/* Leaving the origin drops credentials, keeps the rest. */
	tt_int_op(hreq("{\"method\":\"GET\",\"url\":\"http://127.0.0.1:%d/r/"
	    "other\",\"headers\":{\"Authorization\":\"Bearer s3\","
	    "\"X-Keep\":\"1\",\"X-Empty\":\"\"}}", port1), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	tt_assert(has(res.out, "h:X-Keep=1\n"));
	tt_assert(has(res.out, "h:X-Empty=\n"));
	tt_assert(strstr(res.out, "Bearer") == NULL);

	tt_int_op(hreq("{\"method\":\"GET\",\"url\":\"http://127.0.0.1:%d/r/"
	    "loop\"}", port1), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	tt_assert(has(res.out, "stopped after 5 redirects"));

	/* The body is kept up to 1 MiB, and says so. */
	tt_int_op(hreq("{\"method\":\"GET\",\"url\":\"http://127.0.0.1:%d/"
	    "big\"}", port1), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	tt_assert(has(res.out, "body truncated: only the first 1048576 bytes"));
	tt_assert(has(res.out, "[output truncated: 8192 of"));

	/* HEAD: a status and no body. */
	tt_int_op(hreq("{\"method\":\"HEAD\",\"url\":\"http://127.0.0.1:%d/"
	    "ok\"}", port1), ==, 0);
	tt_int_op(res.is_error, ==, 0);
	tt_str_op(res.out, ==, "HTTP 200\ncontent-type: text/plain; "
	    "charset=utf-8\n\n");

	/* A body that stops coming: the timeout ends the call, as an error
	 * that still shows what came. */
	cfg->limits.tool_timeout_ms = 400;
	tt_int_op(hreq("{\"method\":\"GET\",\"url\":\"http://127.0.0.1:%d/"
	    "stall\"}", port1), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	tt_assert(has(res.out, "HTTP 200\n"));
	tt_assert(has(res.out, "the body is incomplete"));
	tt_assert(has(res.out, "partial"));
	cfg->limits.tool_timeout_ms = 10000;

	/* A cancel ends the call at once; no late callback follows. */
	{
		struct event *ev = evtimer_new(loop_base(), cancel_now, NULL);
		struct timeval tv = { 0, 100000 }, sl = { 0, 200000 };
		char j[256];

		snprintf(j, sizeof(j), "{\"method\":\"GET\",\"url\":"
		    "\"http://127.0.0.1:%d/stall\"}", port1);
		tt_int_op(start(&tool_http_request, j), ==, 0);
		tt_int_op(res.done, ==, 0);
		evtimer_add(ev, &tv);
		tt_int_op(wait_done(5000), ==, 0);
		event_free(ev);
		tt_int_op(res.is_error, ==, 1);
		tt_assert(has(res.out, "cancelled"));
		tt_int_op(http_inflight(), ==, 0);
		event_base_loopexit(loop_base(), &sl);
		event_base_dispatch(loop_base());
		tt_int_op(res.done, ==, 1);
	}

	/* Injection and forbidden headers never reach the wire. */
	before = nrequests;
	{
		static const char *const bad[] = {
			"{\"X-A\":\"b\\r\\nHost: evil\"}",
			"{\"X-A\":\"b\\nX-B: c\"}",
			"{\"X-A\\r\\nX-B\":\"c\"}",
			"{\"Host\":\"evil.com\"}",
			"{\"host\":\"evil.com\"}",
			"{\"Content-Length\":\"0\"}",
			"{\"Transfer-Encoding\":\"chunked\"}",
			"{\"Connection\":\"close\"}",
			"{\"Proxy-Authorization\":\"x\"}",
			"{\"Bad Name\":\"x\"}",
			"{\"X-A:\":\"x\"}",
			"{\"\":\"x\"}",
			"{\"X-A\":5}",
			"[\"X-A: b\"]",
			"\"X-A: b\"",
		};

		for (size_t i = 0; i < nitems(bad); i++) {
			tt_int_op(hreq("{\"method\":\"GET\",\"url\":\"http://"
			    "127.0.0.1:%d/echo\",\"headers\":%s}", port1,
			    bad[i]), ==, 0);
			if (!res.is_error)
				tt_fail_msg("accepted headers %s", bad[i]);
		}
	}
	tt_int_op(hreq("{\"method\":\"TRACE\",\"url\":\"http://127.0.0.1:%d/"
	    "echo\"}", port1), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	tt_int_op(hreq("{\"method\":\"GET\",\"url\":\"http://127.0.0.1:%d/"
	    "echo\",\"body\":\"x\"}", port1), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	tt_int_op(hreq("{\"method\":\"GET\",\"url\":\"http://127.0.0.1:%d/"
	    "echo\",\"extra\":1}", port1), ==, 0);
	tt_int_op(res.is_error, ==, 1);
	tt_int_op(nrequests, ==, before);
end:
	free(audit);
	for (size_t i = 0; i < nstalled; i++)
		evhttp_send_reply_end(stalled[i]);
	nstalled = 0;
	if (s1 != NULL)
		evhttp_free(s1);
	if (s2 != NULL)
		evhttp_free(s2);
	teardown();
}

/* Every schema is JSON the model can read, an object schema that refuses
 * unknown fields, as the tools themselves do. */
static void
t_schemas(void)
{
	const struct tool_def *defs[] = { &tool_current_time,
	    &tool_read_skill, &tool_read_file, &tool_write_file,
	    &tool_run_bash, &tool_http_request };
	cJSON *sch = NULL;

	for (size_t i = 0; i < nitems(defs); i++) {
		const cJSON *ap;

		cJSON_Delete(sch);
		sch = cJSON_Parse(defs[i]->input_schema);
		if (sch == NULL)
			tt_fail_msg("%s: schema is not JSON", defs[i]->name);
		ap = cJSON_GetObjectItemCaseSensitive(sch,
		    "additionalProperties");
		tt_assert(cJSON_IsFalse(ap));
		tt_assert(defs[i]->description != NULL &&
		    defs[i]->exists != NULL && defs[i]->call != NULL);
		if (defs[i]->axis != TOOL_NO_AXIS) {
			const cJSON *props = cJSON_GetObjectItemCaseSensitive(
			    sch, "properties");

			tt_assert(cJSON_GetObjectItemCaseSensitive(props,
			    defs[i]->target_key) != NULL);
		}
	}
end:
	cJSON_Delete(sch);
}

static const struct tt_case cases[] = {
	{ "schemas", t_schemas },
	{ "current_time", t_current_time },
	{ "read_skill", t_read_skill },
	{ "read_file/ranges", t_read_file_ranges },
	{ "read_file/not_regular", t_read_file_not_regular },
	{ "read_file/symlink_race", t_read_file_symlink_race },
	{ "write_file", t_write_file },
	{ "run_bash/basic", t_run_bash_basic },
	{ "run_bash/env", t_run_bash_env },
	{ "run_bash/timeout", t_run_bash_timeout },
	{ "run_bash/cancel", t_run_bash_cancel },
	{ "run_bash/big_output", t_run_bash_big_output },
	{ "output_redacted_before_cut", t_output_redacted_before_cut },
	{ "http_request", t_http_request },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	return tt_main(argc, argv, cases);
}
