/* The state database's lifetime rules for what a run keeps for itself: the
 * memory set of a run without a conversation, written by the real remember
 * tool, goes when the run's event is done, and state_open removes what runs
 * that are no longer pending left behind. Nothing else may go with it. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "config.h"
#include "state.h"
#include "tool.h"
#include "tt.h"
#include "util.h"

static char dir[64];
static struct cfg *cfg;
static int answered, failed;

static void
on_done(struct tool_call *tc, const char *out, size_t len, int is_error)
{
	answered++;
	failed += is_error;
}

static int
setup(void)
{
	char err[256];

	snprintf(dir, sizeof(dir), "/tmp/af-test-state-XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	cfg = xcalloc(1, sizeof(*cfg));
	cfg->name = xstrdup("state-test");
	cfg->memory = MEMORY_CONVERSATION;
	cfg->limits.tool_output = 1 << 20;
	answered = failed = 0;
	return state_open(dir, err, sizeof(err));
}

static void
teardown(void)
{
	state_close();
	cfg_free(cfg);
	cfg = NULL;
	tt_rmtree(dir);
}

static int
reopen(void)
{
	char err[256];

	state_close();
	return state_open(dir, err, sizeof(err));
}

/* remember key=v as run `run` of conversation `conv` (NULL: none). */
static int
remember(const char *conv, const char *run, const char *key)
{
	struct tool_call tc;
	char json[256];
	cJSON *in;

	snprintf(json, sizeof(json), "{\"key\":\"%s\",\"value\":\"v\"}", key);
	if ((in = cJSON_Parse(json)) == NULL)
		return -1;
	memset(&tc, 0, sizeof(tc));
	tc.def = &tool_remember;
	tc.cfg = cfg;
	tc.run_id = run;
	tc.conversation = conv;
	tc.use_id = "u-test";
	tc.input = in;
	tc.on_done = on_done;
	answered = failed = 0;
	tool_remember.call(&tc);
	cJSON_Delete(in);
	return answered == 1 && failed == 0 ? 0 : -1;
}

/* Rows stored under scope; -1 on error. */
static int
rows(const char *scope)
{
	sqlite3_stmt *st;
	int n = -1;

	if (sqlite3_prepare_v2(state_db(), "SELECT COUNT(*) FROM memory WHERE "
	    "scope = ?1", -1, &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(st, 1, scope, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return n;
}

static int
has_memory_table(void)
{
	sqlite3_stmt *st;
	int found;

	if (sqlite3_prepare_v2(state_db(), "SELECT 1 FROM sqlite_master WHERE "
	    "name = 'memory'", -1, &st, NULL) != SQLITE_OK)
		return -1;
	found = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	return found;
}

static void
t_done_drops_run_set(void)
{
	tt_int_op(setup(), ==, 0);
	tt_int_op(state_journal_add("r-1", "webhook", NULL, "p", NULL), ==, 0);
	tt_int_op(state_journal_add("r-10", "webhook", NULL, "p", NULL), ==, 0);
	tt_int_op(state_journal_add("r-2", "telegram", "telegram:1", "p", NULL),
	    ==, 0);
	tt_int_op(remember(NULL, "r-1", "a"), ==, 0);
	tt_int_op(remember(NULL, "r-1", "b"), ==, 0);
	/* Names that merely start with, or contain, r-1. */
	tt_int_op(remember(NULL, "r-10", "a"), ==, 0);
	tt_int_op(remember("run:r-1", "r-2", "a"), ==, 0);
	tt_int_op(remember("telegram:1", "r-2", "a"), ==, 0);
	tt_int_op(rows(STATE_RUN_SCOPE "r-1"), ==, 2);

	tt_int_op(state_journal_done("r-1", "ok"), ==, 0);
	tt_int_op(rows(STATE_RUN_SCOPE "r-1"), ==, 0);
	tt_int_op(rows(STATE_RUN_SCOPE "r-10"), ==, 1);
	tt_int_op(rows("conversation:run:r-1"), ==, 1);
	tt_int_op(rows("conversation:telegram:1"), ==, 1);
	/* A conversation's run ending removes nothing of its conversation. */
	tt_int_op(state_journal_done("r-2", "ok"), ==, 0);
	tt_int_op(rows("conversation:telegram:1"), ==, 1);
	tt_assert(state_failed() == NULL);
end:
	teardown();
}

/* An agent without memory tools: runs end as before, no table appears. */
static void
t_done_without_memory(void)
{
	tt_int_op(setup(), ==, 0);
	tt_int_op(state_journal_add("r-1", "webhook", NULL, "p", NULL), ==, 0);
	tt_int_op(state_journal_done("r-1", "ok"), ==, 0);
	tt_assert(state_failed() == NULL);
	tt_int_op(has_memory_table(), ==, 0);
	tt_int_op(reopen(), ==, 0);
	tt_int_op(has_memory_table(), ==, 0);
	tt_int_op(state_journal_add("r-2", "webhook", NULL, "p", NULL), ==, 0);
	tt_int_op(state_journal_done("r-2", "ok"), ==, 0);
	tt_assert(state_failed() == NULL);
	/* The memory tools' first use makes the table: from then on a run's
	 * end removes its set, in the same process. */
	tt_int_op(state_journal_add("r-3", "webhook", NULL, "p", NULL), ==, 0);
	tt_int_op(remember(NULL, "r-3", "a"), ==, 0);
	tt_int_op(rows(STATE_RUN_SCOPE "r-3"), ==, 1);
	tt_int_op(state_journal_done("r-3", "ok"), ==, 0);
	tt_int_op(rows(STATE_RUN_SCOPE "r-3"), ==, 0);
end:
	teardown();
}

/* A stop between the journal's update and the delete, or a set from before
 * the delete existed: the next open removes it, unless the run is pending
 * and will be replayed (with the same id, so it reads its set again). */
static void
t_open_sweeps(void)
{
	tt_int_op(setup(), ==, 0);
	tt_int_op(state_journal_add("r-pend", "webhook", NULL, "p", NULL), ==,
	    0);
	tt_int_op(state_journal_add("r-done", "webhook", NULL, "p", NULL), ==,
	    0);
	tt_int_op(remember(NULL, "r-pend", "a"), ==, 0);
	tt_int_op(remember(NULL, "r-done", "a"), ==, 0);
	tt_int_op(remember(NULL, "r-gone", "a"), ==, 0);	/* no event */
	tt_int_op(remember("telegram:1", "r-x", "a"), ==, 0);
	tt_int_op(sqlite3_exec(state_db(), "UPDATE journal SET status = 'ok' "
	    "WHERE id = 'r-done'; INSERT INTO memory VALUES ('agent', 'a', 'v', "
	    "0), ('run', 'a', 'v', 0), ('run:', 'a', 'v', 0)", NULL, NULL,
	    NULL), ==, SQLITE_OK);

	tt_int_op(reopen(), ==, 0);
	tt_int_op(rows(STATE_RUN_SCOPE "r-pend"), ==, 1);
	tt_int_op(rows(STATE_RUN_SCOPE "r-done"), ==, 0);
	tt_int_op(rows(STATE_RUN_SCOPE "r-gone"), ==, 0);
	tt_int_op(rows("run:"), ==, 0);
	tt_int_op(rows("run"), ==, 1);
	tt_int_op(rows("agent"), ==, 1);
	tt_int_op(rows("conversation:telegram:1"), ==, 1);
	/* The replay ends: its set goes then. */
	tt_int_op(state_journal_done("r-pend", "ok"), ==, 0);
	tt_int_op(rows(STATE_RUN_SCOPE "r-pend"), ==, 0);
end:
	teardown();
}

static const struct tt_case cases[] = {
	{ "run_scope/done", t_done_drops_run_set },
	{ "run_scope/no_memory_table", t_done_without_memory },
	{ "run_scope/open_sweeps", t_open_sweeps },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return tt_main(argc, argv, cases);
}
