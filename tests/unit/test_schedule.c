/* Schedules and their scope: the schedule tools called as the engine would,
 * each call with its run's conversation and id, against a real state
 * database in a fresh folder. One conversation must not see, remove or
 * crowd out another's entries, however it names them. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "config.h"
#include "schedule.h"
#include "state.h"
#include "tool.h"
#include "tt.h"
#include "util.h"

static char dir[64];
static struct cfg *cfg;

static struct {
	int	 done;
	int	 is_error;
	char	*out;
} res;

static void
on_done(struct tool_call *tc, const char *out, size_t len, int is_error)
{
	free(res.out);
	res.out = xstrndup(out, len);
	res.is_error = is_error;
	res.done++;
}

static int
setup(void)
{
	char err[256];

	snprintf(dir, sizeof(dir), "/tmp/af-test-sched-XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	cfg = xcalloc(1, sizeof(*cfg));
	cfg->name = xstrdup("sched-test");
	cfg->schedules = 1;
	cfg->limits.tool_output = 1 << 20;
	memset(&res, 0, sizeof(res));
	return state_open(dir, err, sizeof(err));
}

static void
teardown(void)
{
	state_close();
	cfg_free(cfg);
	cfg = NULL;
	free(res.out);
	memset(&res, 0, sizeof(res));
	tt_rmtree(dir);
}

/* One call of a schedule tool by run `run` of conversation `conv` (NULL:
 * none); 0 when it answered. */
static int
call(const struct tool_def *def, const char *conv, const char *run,
    const char *json)
{
	struct tool_call tc;
	cJSON *in = cJSON_Parse(json);

	if (in == NULL)
		return -1;
	memset(&tc, 0, sizeof(tc));
	tc.def = def;
	tc.cfg = cfg;
	tc.run_id = run;
	tc.conversation = conv;
	tc.use_id = "u-test";
	tc.input = in;
	tc.on_done = on_done;
	res.done = 0;
	def->call(&tc);
	cJSON_Delete(in);
	return res.done == 1 ? 0 : -1;
}

/* Schedule prompt in the scope; the new id into id, "" when refused. */
static int
add(const char *conv, const char *run, const char *prompt, char *id,
    size_t idlen)
{
	char json[256];
	const char *p;

	snprintf(json, sizeof(json), "{\"prompt\":\"%s\",\"in\":\"1h\"}",
	    prompt);
	id[0] = '\0';
	if (call(&tool_schedule, conv, run, json) == -1)
		return -1;
	if (res.is_error)
		return 0;
	if ((p = strstr(res.out, "s-")) == NULL)
		return -1;
	snprintf(id, idlen, "%.18s", p);
	return 0;
}

/* What list_schedules shows the scope: its count, -1 on error. */
static int
listed(const char *conv, const char *run)
{
	cJSON *o;
	int n;

	if (call(&tool_list_schedules, conv, run, "{}") == -1 || res.is_error)
		return -1;
	if ((o = cJSON_Parse(res.out)) == NULL)
		return -1;
	n = cJSON_GetObjectItemCaseSensitive(o, "count")->valueint;
	cJSON_Delete(o);
	return n;
}

/* unschedule by the scope: 1 removed, 0 refused, -1 on error. */
static int
unschedule(const char *conv, const char *run, const char *id)
{
	char json[128];

	snprintf(json, sizeof(json), "{\"id\":\"%s\"}", id);
	if (call(&tool_unschedule, conv, run, json) == -1)
		return -1;
	return res.is_error ? 0 : 1;
}

static void
t_conversations(void)
{
	char a[SCHED_ID_LEN], b[SCHED_ID_LEN];

	tt_int_op(setup(), ==, 0);
	tt_int_op(add("telegram:1", "r-a1", "A's secret plan", a, sizeof(a)),
	    ==, 0);
	tt_assert(a[0] != '\0');
	tt_int_op(add("telegram:2", "r-b1", "B's plan", b, sizeof(b)), ==, 0);
	tt_assert(b[0] != '\0');

	/* Each chat lists its own, never the other's prompt or id. */
	tt_int_op(listed("telegram:2", "r-b2"), ==, 1);
	tt_assert(strstr(res.out, "secret") == NULL);
	tt_assert(strstr(res.out, a) == NULL);
	tt_assert(strstr(res.out, b) != NULL);
	/* A later run of chat 1 is the same conversation: it sees A's. */
	tt_int_op(listed("telegram:1", "r-a2"), ==, 1);
	tt_assert(strstr(res.out, "A's secret plan") != NULL);

	/* B knows A's id (a leaked log line, a quoted reply): still no. */
	tt_int_op(unschedule("telegram:2", "r-b2", a), ==, 0);
	tt_assert(strstr(res.out, "no schedule") != NULL);
	/* Nor can a run of chat 2 that happens to have A's creating run id,
	 * a run without a conversation, or a conversation spelled to match
	 * everything. */
	tt_int_op(unschedule("telegram:2", "r-a1", a), ==, 0);
	tt_int_op(unschedule(NULL, "r-a1", a), ==, 0);
	tt_int_op(unschedule(NULL, "r-zz", a), ==, 0);
	tt_int_op(unschedule("x' OR '1'='1", "r-zz", a), ==, 0);
	tt_int_op(listed("x' OR '1'='1", "r-zz"), ==, 0);
	tt_int_op(listed(NULL, "r-a1"), ==, 0);
	tt_int_op(listed("telegram:1", "r-a2"), ==, 1);
	tt_int_op(sched_count(), ==, 2);

	/* Its own conversation removes it, from any of its runs. */
	tt_int_op(unschedule("telegram:1", "r-a3", a), ==, 1);
	tt_int_op(listed("telegram:1", "r-a3"), ==, 0);
	tt_int_op(listed("telegram:2", "r-b3"), ==, 1);
end:
	teardown();
}

/* A run without a conversation (a webhook event, a cron tick) sees what it
 * made; another such run sees nothing of it. */
static void
t_no_conversation(void)
{
	char w[SCHED_ID_LEN], c[SCHED_ID_LEN];

	tt_int_op(setup(), ==, 0);
	tt_int_op(add(NULL, "r-w1", "webhook plan", w, sizeof(w)), ==, 0);
	tt_assert(w[0] != '\0');
	tt_int_op(add("telegram:1", "r-c1", "chat plan", c, sizeof(c)), ==, 0);
	tt_int_op(listed(NULL, "r-w1"), ==, 1);
	tt_assert(strstr(res.out, w) != NULL);
	tt_int_op(listed(NULL, "r-w2"), ==, 0);
	tt_int_op(unschedule(NULL, "r-w2", w), ==, 0);
	/* A chat whose run id is r-w1 is a conversation, not that run. */
	tt_int_op(listed("telegram:1", "r-w1"), ==, 1);
	tt_assert(strstr(res.out, w) == NULL);
	tt_int_op(unschedule("telegram:1", "r-w1", w), ==, 0);
	/* The chat's entry was made by r-c1, yet r-c1 without the chat is
	 * not its owner. */
	tt_int_op(listed(NULL, "r-c1"), ==, 0);
	tt_int_op(unschedule(NULL, "r-c1", c), ==, 0);
	tt_int_op(sched_count(), ==, 2);
	tt_int_op(unschedule(NULL, "r-w1", w), ==, 1);
	tt_int_op(sched_count(), ==, 1);
end:
	teardown();
}

/* The run a repeating entry fired sees that entry (to stop itself), and
 * nothing else of the run that made it. */
static void
t_fired_run(void)
{
	char rep[SCHED_ID_LEN], other[SCHED_ID_LEN];
	struct sched_scope maker = { .conv = NULL, .run = "r-maker" };
	char err[256];

	tt_int_op(setup(), ==, 0);
	tt_int_op(sched_add(&maker, "tick", now_ms() + 60000, 60000, rep,
	    sizeof(rep), err, sizeof(err)), ==, 0);
	tt_int_op(add(NULL, "r-maker", "other", other, sizeof(other)), ==, 0);
	tt_int_op(sqlite3_exec(state_db(), "UPDATE schedules SET last_run = "
	    "'r-fired' WHERE every_ms > 0", NULL, NULL, NULL), ==, SQLITE_OK);
	tt_int_op(listed(NULL, "r-fired"), ==, 1);
	tt_assert(strstr(res.out, rep) != NULL);
	tt_int_op(unschedule(NULL, "r-fired", other), ==, 0);
	tt_int_op(listed("telegram:1", "r-fired"), ==, 0);
	tt_int_op(unschedule(NULL, "r-fired", rep), ==, 1);
	tt_int_op(listed(NULL, "r-maker"), ==, 1);
end:
	teardown();
}

static void
t_limits(void)
{
	char id[SCHED_ID_LEN], conv[32], first[SCHED_ID_LEN];
	int i, k;

	tt_int_op(setup(), ==, 0);
	/* One chat fills its own slots... */
	for (i = 0; i < SCHED_SCOPE_MAX; i++) {
		tt_int_op(add("telegram:666", "r-x", "spam", id, sizeof(id)),
		    ==, 0);
		tt_assert(id[0] != '\0');
	}
	tt_int_op(add("telegram:666", "r-y", "spam", id, sizeof(id)), ==, 0);
	tt_assert(id[0] == '\0');
	tt_assert(strstr(res.out, "20") != NULL);
	tt_int_op(listed("telegram:666", "r-y"), ==, SCHED_SCOPE_MAX);
	tt_assert(strstr(res.out, "\"max\":20") != NULL);
	/* ...and every other still has room. */
	tt_int_op(add("telegram:1", "r-1", "mine", first, sizeof(first)), ==, 0);
	tt_assert(first[0] != '\0');
	tt_int_op(add(NULL, "r-w", "webhook", id, sizeof(id)), ==, 0);
	tt_assert(id[0] != '\0');

	/* Many conversations together stop at the agent's bound. */
	for (k = 0; sched_count() < SCHED_MAX; k++) {
		snprintf(conv, sizeof(conv), "imap:%d", k);
		for (i = 0; i < SCHED_SCOPE_MAX && sched_count() < SCHED_MAX;
		    i++) {
			tt_int_op(add(conv, "r-m", "mail", id, sizeof(id)), ==, 0);
			tt_assert(id[0] != '\0');
		}
	}
	tt_int_op(sched_count(), ==, SCHED_MAX);
	tt_int_op(add("telegram:2", "r-2", "late", id, sizeof(id)), ==, 0);
	tt_assert(id[0] == '\0');
	tt_assert(strstr(res.out, "100") != NULL);
	tt_int_op(add(NULL, "r-w2", "late", id, sizeof(id)), ==, 0);
	tt_assert(id[0] == '\0');
	/* A slot given back is a slot for anyone. */
	tt_int_op(unschedule("telegram:1", "r-1", first), ==, 1);
	tt_int_op(add("telegram:2", "r-2", "late", id, sizeof(id)), ==, 0);
	tt_assert(id[0] != '\0');
	tt_int_op(sched_count(), ==, SCHED_MAX);
end:
	teardown();
}

/* A table from before scopes (no last_run column) gains the column and
 * keeps its entries, each still in its conversation. */
static void
t_old_table(void)
{
	tt_int_op(setup(), ==, 0);
	tt_int_op(sqlite3_exec(state_db(), "CREATE TABLE schedules ("
	    "id TEXT PRIMARY KEY, prompt TEXT NOT NULL, conv TEXT,"
	    "due_ms INTEGER NOT NULL, every_ms INTEGER NOT NULL DEFAULT 0,"
	    "created_ms INTEGER NOT NULL, created_by TEXT,"
	    "fired INTEGER NOT NULL DEFAULT 0);"
	    "INSERT INTO schedules VALUES ('s-00000000000000aa', 'old', "
	    "'telegram:1', 4102444800000, 0, 0, 'r-old', 0);", NULL, NULL,
	    NULL), ==, SQLITE_OK);
	tt_int_op(listed("telegram:1", "r-new"), ==, 1);
	tt_assert(strstr(res.out, "s-00000000000000aa") != NULL);
	tt_int_op(listed("telegram:2", "r-new"), ==, 0);
	tt_int_op(sqlite3_exec(state_db(), "SELECT last_run FROM schedules",
	    NULL, NULL, NULL), ==, SQLITE_OK);
end:
	teardown();
}

static const struct tt_case cases[] = {
	{ "scope/conversations", t_conversations },
	{ "scope/no_conversation", t_no_conversation },
	{ "scope/fired_run", t_fired_run },
	{ "limits", t_limits },
	{ "old_table", t_old_table },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return tt_main(argc, argv, cases);
}
