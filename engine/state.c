/* The state database. SQLite runs on the loop thread: its writes are small,
 * local and in WAL mode, and the journal commit must finish before a trigger
 * acknowledges an event anyway. */
#include "state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model.h"
#include "util.h"

#define STATE_JOURNAL_KEEP	1000	/* done events kept in the journal */

static sqlite3 *db;
static char state_err[256];

static const char *schema =
    "CREATE TABLE IF NOT EXISTS journal ("
    "  id TEXT PRIMARY KEY, seq INTEGER, trigger TEXT NOT NULL,"
    "  conv TEXT, prompt TEXT NOT NULL, meta TEXT,"
    "  status TEXT NOT NULL DEFAULT 'pending', attempts INTEGER DEFAULT 0,"
    "  created_ms INTEGER, done_ms INTEGER);"
    "CREATE INDEX IF NOT EXISTS journal_pending ON journal(status, seq);"
    "CREATE INDEX IF NOT EXISTS journal_seq ON journal(seq);"
    "CREATE TABLE IF NOT EXISTS cursor (key TEXT PRIMARY KEY, value TEXT);"
    "CREATE TABLE IF NOT EXISTS history ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT, conv TEXT NOT NULL,"
    "  role TEXT NOT NULL, text TEXT NOT NULL, ts_ms INTEGER);"
    "CREATE INDEX IF NOT EXISTS history_conv ON history(conv, seq);"
    "CREATE TABLE IF NOT EXISTS runs ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE, trigger TEXT,"
    "  status TEXT, steps INTEGER, tokens_in INTEGER, tokens_out INTEGER,"
    "  cost_usd REAL, started_ms INTEGER, ended_ms INTEGER, error TEXT);"
    "CREATE TABLE IF NOT EXISTS outbox ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL,"
    "  trigger TEXT NOT NULL, conv TEXT, meta TEXT, status TEXT NOT NULL,"
    "  reply TEXT, created_ms INTEGER);";

/* A failed commit sticks: after an I/O error SQLite's view of the file may
 * not match the disk, and accepting more events would acknowledge writes
 * that are not there. */
static int
fail(const char *what)
{
	if (state_err[0] == '\0') {
		snprintf(state_err, sizeof(state_err), "state database %s: %s",
		    what, db ? sqlite3_errmsg(db) : "not open");
		log_warnx("%s", state_err);
	}
	return -1;
}

const char *
state_failed(void)
{
	return state_err[0] ? state_err : NULL;
}

sqlite3 *
state_db(void)
{
	return db;
}

static int
has_table(const char *name)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = "
	    "'table' AND name = ?1", -1, &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

/* The run memory sets state_journal_done did not remove: af stopped between
 * the journal's update and the delete, or the set predates the delete. Only
 * a pending event's run can still read its set (when it is replayed). */
static int
sweep_run_scopes(char *err, size_t errlen)
{
	sqlite3_stmt *st;
	int has, rc;

	if ((has = has_table("memory")) == 0)
		return 0;	/* the agent never had memory tools */
	if (has == -1 || sqlite3_prepare_v2(db, "DELETE FROM memory WHERE "
	    "scope GLOB '" STATE_RUN_SCOPE "*' AND scope NOT IN (SELECT '"
	    STATE_RUN_SCOPE "' || id FROM journal WHERE status = 'pending')",
	    -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "state database: %s", sqlite3_errmsg(db));
		return -1;
	}
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "state database: %s", sqlite3_errmsg(db));
		return -1;
	}
	if (sqlite3_changes(db) > 0)
		log_info("memory: removed %d entries of runs that had ended",
		    sqlite3_changes(db));
	return 0;
}

int
state_open(const char *data_dir, char *err, size_t errlen)
{
	char *path = xasprintf("%s/af.db", data_dir);
	char *msg = NULL;

	state_err[0] = '\0';
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path, db ? sqlite3_errmsg(db) :
		    "cannot open");
		sqlite3_close(db);
		db = NULL;
		free(path);
		return -1;
	}
	free(path);
	sqlite3_busy_timeout(db, 2000);
	if (sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; "
	    "PRAGMA temp_store=MEMORY; PRAGMA cache_size=-1024;",
	    NULL, NULL, &msg) != SQLITE_OK ||
	    sqlite3_exec(db, schema, NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, errlen, "state database: %s", msg ? msg : "?");
		sqlite3_free(msg);
		sqlite3_close(db);
		db = NULL;
		return -1;
	}
	if (sweep_run_scopes(err, errlen) == -1) {
		sqlite3_close(db);
		db = NULL;
		return -1;
	}
	return 0;
}

/* The hot statements (an insert per accepted event, an update per run end)
 * are compiled once: SQLite's parser was a tenth of the accept path. They
 * are keyed by the SQL text's address, which is always a literal here. */
#define STMT_CACHE	16

static struct {
	const char	*sql;
	sqlite3_stmt	*st;
} stmts[STMT_CACHE];

static sqlite3_stmt *
stmt_get(const char *sql)
{
	size_t i;

	for (i = 0; i < STMT_CACHE && stmts[i].sql != NULL; i++)
		if (stmts[i].sql == sql)
			return stmts[i].st;
	if (i == STMT_CACHE)
		return NULL;
	if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT,
	    &stmts[i].st, NULL) != SQLITE_OK)
		return NULL;
	stmts[i].sql = sql;
	return stmts[i].st;
}

static void
stmt_free_all(void)
{
	for (size_t i = 0; i < STMT_CACHE; i++) {
		sqlite3_finalize(stmts[i].st);
		stmts[i].sql = NULL;
		stmts[i].st = NULL;
	}
}

void
state_close(void)
{
	stmt_free_all();
	if (db != NULL)
		sqlite3_close(db);
	db = NULL;
}

/* Bind text parameters 1..n (NULL binds SQL NULL) and step once. */
static int
exec_bound(const char *sql, int n, const char *const *vals)
{
	sqlite3_stmt *st;
	int rc;

	if (db == NULL || state_err[0])
		return -1;
	if ((st = stmt_get(sql)) == NULL)
		return fail("prepare");
	for (int i = 0; i < n; i++)
		sqlite3_bind_text(st, i + 1, vals[i], -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return fail("write");
	return 0;
}

int
state_journal_add(const char *id, const char *trigger, const char *conv,
    const char *prompt, const char *meta)
{
	char ts[24];
	const char *v[6];

	snprintf(ts, sizeof(ts), "%lld", (long long)now_ms());
	v[0] = id;
	v[1] = trigger;
	v[2] = conv;
	v[3] = prompt;
	v[4] = meta;
	v[5] = ts;
	return exec_bound("INSERT INTO journal(id, seq, trigger, conv, prompt, "
	    "meta, created_ms) VALUES (?1, (SELECT IFNULL(MAX(seq), 0) + 1 "
	    "FROM journal), ?2, ?3, ?4, ?5, ?6)", 6, v);
}

int
state_tx_begin(void)
{
	if (db == NULL || state_err[0])
		return -1;
	if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return fail("begin");
	return 0;
}

int
state_tx_commit(void)
{
	if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		fail("commit");
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
		return -1;
	}
	return 0;
}

void
state_tx_rollback(void)
{
	if (db != NULL)
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
}

/* The run's own memory set (STATE_RUN_SCOPE). The statement does not
 * compile while there is no memory table, and then there is nothing to
 * remove: that is not a failure of the database. */
static int
drop_run_scope(const char *id)
{
	sqlite3_stmt *st;
	int rc;

	if ((st = stmt_get("DELETE FROM memory WHERE scope = '"
	    STATE_RUN_SCOPE "' || ?1")) == NULL)
		return 0;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : fail("write");
}

/* Done events are kept only as a short history: the journal's job is the
 * pending ones, and a table that grows for ever slows every insert and
 * grows the daemon's page cache with it. The journal is updated before the
 * run's memory set goes, so a stop in between leaves a set of a done event,
 * which state_open removes, never a pending event without its set. */
int
state_journal_done(const char *id, const char *status)
{
	char ts[24], keep[16];
	const char *v[3], *k[1] = { keep };

	snprintf(ts, sizeof(ts), "%lld", (long long)now_ms());
	v[0] = status;
	v[1] = ts;
	v[2] = id;
	if (exec_bound("UPDATE journal SET status = ?1, done_ms = ?2 "
	    "WHERE id = ?3", 3, v) == -1 || drop_run_scope(id) == -1)
		return -1;
	snprintf(keep, sizeof(keep), "%d", STATE_JOURNAL_KEEP);
	return exec_bound("DELETE FROM journal WHERE status != 'pending' AND "
	    "seq <= (SELECT MAX(seq) FROM journal) - ?1", 1, k);
}

static const char *
col(sqlite3_stmt *st, int i)
{
	return (const char *)sqlite3_column_text(st, i);
}

int
state_outbox_add(const char *id, const char *trigger, const char *conv,
    const char *meta, const char *status, const char *reply)
{
	char ts[24];
	const char *v[7];

	snprintf(ts, sizeof(ts), "%lld", (long long)now_ms());
	v[0] = id;
	v[1] = trigger;
	v[2] = conv;
	v[3] = meta;
	v[4] = status;
	v[5] = reply;
	v[6] = ts;
	return exec_bound("INSERT OR REPLACE INTO outbox(id, trigger, conv, "
	    "meta, status, reply, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
	    "?7)", 7, v);
}

int
state_outbox_del(const char *id)
{
	const char *v[1] = { id };

	return exec_bound("DELETE FROM outbox WHERE id = ?1", 1, v);
}

int
state_outbox_each(state_outbox_fn fn, void *arg)
{
	sqlite3_stmt *st;
	int rc;

	if (db == NULL)
		return -1;
	if (sqlite3_prepare_v2(db, "SELECT id, trigger, conv, meta, status, "
	    "reply FROM outbox ORDER BY seq", -1, &st, NULL) != SQLITE_OK)
		return fail("read");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		fn(col(st, 0), col(st, 1), col(st, 2), col(st, 3), col(st, 4),
		    col(st, 5), arg);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : fail("read");
}

int
state_journal_pending(state_journal_fn fn, void *arg)
{
	sqlite3_stmt *st;
	int rc;

	if (db == NULL)
		return -1;
	if (sqlite3_prepare_v2(db, "SELECT id, trigger, conv, prompt, meta "
	    "FROM journal WHERE status = 'pending' ORDER BY seq", -1, &st,
	    NULL) != SQLITE_OK)
		return fail("read");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		fn(col(st, 0), col(st, 1), col(st, 2), col(st, 3), col(st, 4),
		    arg);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : fail("read");
}

int
state_cursor_get(const char *key, char *out, size_t outlen)
{
	sqlite3_stmt *st;
	int found = 0;

	if (db == NULL)
		return -1;
	if (sqlite3_prepare_v2(db, "SELECT value FROM cursor WHERE key = ?1",
	    -1, &st, NULL) != SQLITE_OK)
		return fail("read");
	sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(st) == SQLITE_ROW && col(st, 0) != NULL) {
		snprintf(out, outlen, "%s", col(st, 0));
		found = 1;
	}
	sqlite3_finalize(st);
	return found;
}

int
state_cursor_set(const char *key, const char *value)
{
	const char *v[2] = { key, value };

	return exec_bound("INSERT INTO cursor(key, value) VALUES (?1, ?2) "
	    "ON CONFLICT(key) DO UPDATE SET value = excluded.value", 2, v);
}

int
state_history_add(const char *conv, const char *role, const char *text)
{
	char ts[24];
	const char *v[4];

	snprintf(ts, sizeof(ts), "%lld", (long long)now_ms());
	v[0] = conv;
	v[1] = role;
	v[2] = text;
	v[3] = ts;
	if (exec_bound("INSERT INTO history(conv, role, text, ts_ms) "
	    "VALUES (?1, ?2, ?3, ?4)", 4, v) == -1)
		return -1;
	/* Keep the table bounded: only the newest messages are ever read. */
	{
		char lim[16];
		const char *w[2] = { conv, lim };

		snprintf(lim, sizeof(lim), "%d", STATE_HISTORY_MAX);
		return exec_bound("DELETE FROM history WHERE conv = ?1 AND seq "
		    "NOT IN (SELECT seq FROM history WHERE conv = ?1 ORDER BY "
		    "seq DESC LIMIT ?2)", 2, w);
	}
}

/* History goes to the model as alternating user/assistant turns; a turn
 * without its partner (a run that failed) is dropped so the alternation the
 * APIs require holds. */
int
state_history_get(const char *conv, cJSON *out)
{
	sqlite3_stmt *st;
	char *pending_user = NULL;
	int rc;

	if (db == NULL)
		return -1;
	if (sqlite3_prepare_v2(db, "SELECT role, text FROM (SELECT seq, role, "
	    "text FROM history WHERE conv = ?1 ORDER BY seq DESC LIMIT ?2) "
	    "ORDER BY seq", -1, &st, NULL) != SQLITE_OK)
		return fail("read");
	sqlite3_bind_text(st, 1, conv, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 2, STATE_HISTORY_MAX);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *role = col(st, 0), *text = col(st, 1);

		if (role == NULL || text == NULL)
			continue;
		if (strcmp(role, "user") == 0) {
			free(pending_user);
			pending_user = xstrdup(text);
		} else if (pending_user != NULL) {
			cJSON_AddItemToArray(out, model_text_message("user",
			    pending_user));
			cJSON_AddItemToArray(out, model_text_message("assistant",
			    text));
			free(pending_user);
			pending_user = NULL;
		}
	}
	free(pending_user);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : fail("read");
}

int
state_history_clear(const char *conv)
{
	const char *v[1] = { conv };

	return exec_bound("DELETE FROM history WHERE conv = ?1", 1, v);
}

#define STATE_RUNS_KEEP	10000	/* run history rows kept */

int
state_run_record(const char *id, const char *trigger, const char *status,
    int steps, long tokens_in, long tokens_out, double cost_usd,
    int64_t started_ms, const char *error)
{
	sqlite3_stmt *st;
	int rc;

	if (db == NULL || state_err[0])
		return -1;
	if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO runs(id, trigger, "
	    "status, steps, tokens_in, tokens_out, cost_usd, started_ms, "
	    "ended_ms, error) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
	    -1, &st, NULL) != SQLITE_OK)
		return fail("prepare");
	sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, trigger, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, status, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 4, steps);
	sqlite3_bind_int64(st, 5, tokens_in);
	sqlite3_bind_int64(st, 6, tokens_out);
	sqlite3_bind_double(st, 7, cost_usd);
	sqlite3_bind_int64(st, 8, started_ms);
	sqlite3_bind_int64(st, 9, now_ms());
	if (error != NULL)
		sqlite3_bind_text(st, 10, error, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return fail("write");
	{
		char keep[16];
		const char *v[1] = { keep };

		snprintf(keep, sizeof(keep), "%d", STATE_RUNS_KEEP);
		return exec_bound("DELETE FROM runs WHERE seq <= (SELECT "
		    "MAX(seq) FROM runs) - ?1", 1, v);
	}
}

cJSON *
state_runs_list(int limit, int offset)
{
	cJSON *arr = cJSON_CreateArray();
	sqlite3_stmt *st;
	char ts[32];

	if (db == NULL || sqlite3_prepare_v2(db, "SELECT id, trigger, status, "
	    "steps, tokens_in, tokens_out, cost_usd, started_ms, ended_ms, "
	    "error FROM runs ORDER BY seq DESC LIMIT ?1 OFFSET ?2", -1, &st,
	    NULL) != SQLITE_OK)
		return arr;
	sqlite3_bind_int(st, 1, limit);
	sqlite3_bind_int(st, 2, offset);
	while (sqlite3_step(st) == SQLITE_ROW) {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "run", col(st, 0) ? col(st, 0) : "");
		cJSON_AddStringToObject(o, "trigger", col(st, 1) ? col(st, 1) :
		    "");
		cJSON_AddStringToObject(o, "status", col(st, 2) ? col(st, 2) :
		    "");
		cJSON_AddNumberToObject(o, "steps", sqlite3_column_int(st, 3));
		cJSON_AddNumberToObject(o, "tokens_in",
		    (double)sqlite3_column_int64(st, 4));
		cJSON_AddNumberToObject(o, "tokens_out",
		    (double)sqlite3_column_int64(st, 5));
		cJSON_AddNumberToObject(o, "cost_usd",
		    sqlite3_column_double(st, 6));
		fmt_time_iso(sqlite3_column_int64(st, 7), ts, sizeof(ts));
		cJSON_AddStringToObject(o, "started", ts);
		fmt_time_iso(sqlite3_column_int64(st, 8), ts, sizeof(ts));
		cJSON_AddStringToObject(o, "ended", ts);
		if (col(st, 9) != NULL)
			cJSON_AddStringToObject(o, "error", col(st, 9));
		cJSON_AddItemToArray(arr, o);
	}
	sqlite3_finalize(st);
	return arr;
}
