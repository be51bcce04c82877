/*
 * Memory tools: remember, recall, list_memories, forget. They exist only when
 * the config's `memory` is conversation or agent. A memory is a key and a
 * value the model wrote, kept in the state database (table `memory`) so it
 * survives restarts. Values are data: stored and given back byte for byte,
 * never interpreted, expanded or run.
 *
 * Scope: with `memory: agent` every run of the agent shares one set; with
 * `memory: conversation` each conversation (a Telegram chat, say) has its
 * own, and a run without a conversation (a webhook event) has a set of its
 * own (STATE_RUN_SCOPE + its id) that lives as long as the run: nothing
 * could read it later, and every webhook event could otherwise leave 1000
 * values behind for good. The state module removes it when the run's event
 * is done (engine/state.h).
 *
 * The tools have no permission axis: the engine audits each call (with its
 * input, shortened) before it runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "state.h"
#include "tool.h"
#include "util.h"

#define MEM_KEY_MAX		128		/* bytes */
#define MEM_VALUE_MAX		(16 << 10)	/* bytes */
#define MEM_MAX_ENTRIES		1000		/* per scope */
#define MEM_PREVIEW		80		/* bytes of a value in a listing */

static const char *const mem_schema =
    "CREATE TABLE IF NOT EXISTS memory ("
    "  scope TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,"
    "  updated_ms INTEGER NOT NULL, PRIMARY KEY (scope, key));";

static int
mem_exists(const struct cfg *cfg)
{
	return cfg->memory != MEMORY_NONE;
}

/* The table is created on first use, from here, so a database of an agent
 * that never had memory tools stays as it was. IF NOT EXISTS makes it cheap
 * to ask every time, which also survives a database reopened under us. */
static sqlite3 *
mem_db(void)
{
	sqlite3 *db = state_db();

	if (db == NULL)
		return NULL;
	if (sqlite3_exec(db, mem_schema, NULL, NULL, NULL) != SQLITE_OK) {
		log_warnx("memory: %s", sqlite3_errmsg(db));
		return NULL;
	}
	return db;
}

/* The set this call reads and writes; the caller frees it. */
static char *
mem_scope(const struct tool_call *tc)
{
	if (tc->cfg->memory == MEMORY_AGENT)
		return xstrdup("agent");
	if (tc->conversation != NULL)
		return xasprintf("conversation:%s", tc->conversation);
	return xasprintf(STATE_RUN_SCOPE "%s", tc->run_id);
}

/* The input's string field, or NULL after failing the call. */
static const char *
want_str(struct tool_call *tc, const char *field)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(tc->input, field);

	if (!cJSON_IsString(v) || v->valuestring == NULL) {
		tool_fail(tc, "%s needs \"%s\" as a string", tc->def->name,
		    field);
		return NULL;
	}
	return v->valuestring;
}

static const char *
want_key(struct tool_call *tc)
{
	static const char *const known[] = { "key", "value" };
	const char *key;

	/* Only remember takes a value. */
	if (tool_input(tc, known, strcmp(tc->def->name, "remember") == 0 ?
	    2 : 1, NULL) == -1 || (key = want_str(tc, "key")) == NULL)
		return NULL;
	if (key[0] == '\0' || strlen(key) > MEM_KEY_MAX) {
		tool_fail(tc, "key must be 1 to %d bytes", MEM_KEY_MAX);
		return NULL;
	}
	return key;
}

static void
db_fail(struct tool_call *tc, sqlite3 *db)
{
	if (db != NULL)
		log_warnx("memory: %s", sqlite3_errmsg(db));
	tool_fail(tc, "the memory store cannot be used right now");
}

/* Rows of the scope, and whether key is one of them. -1 on error. */
static int
count_scope(sqlite3 *db, const char *scope, const char *key, int *has_key)
{
	sqlite3_stmt *st;
	int n = -1;

	if (sqlite3_prepare_v2(db, "SELECT COUNT(*), SUM(key = ?2) FROM memory "
	    "WHERE scope = ?1", -1, &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(st, 1, scope, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, key, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(st) == SQLITE_ROW) {
		n = sqlite3_column_int(st, 0);
		*has_key = sqlite3_column_int(st, 1) > 0;
	}
	sqlite3_finalize(st);
	return n;
}

static void
remember_call(struct tool_call *tc)
{
	const char *key, *value;
	sqlite3 *db = mem_db();
	sqlite3_stmt *st;
	char *scope;
	int n, has = 0, rc;

	if ((key = want_key(tc)) == NULL || (value = want_str(tc, "value")) ==
	    NULL)
		return;
	if (strlen(value) > MEM_VALUE_MAX) {
		tool_fail(tc, "value is %zu bytes; at most %d are kept",
		    strlen(value), MEM_VALUE_MAX);
		return;
	}
	if (db == NULL) {
		db_fail(tc, db);
		return;
	}
	scope = mem_scope(tc);
	/* Loop thread only, so nothing runs between the count and the write. */
	if ((n = count_scope(db, scope, key, &has)) == -1) {
		free(scope);
		db_fail(tc, db);
		return;
	}
	if (!has && n >= MEM_MAX_ENTRIES) {
		free(scope);
		tool_fail(tc, "memory is full (%d entries); forget one first",
		    MEM_MAX_ENTRIES);
		return;
	}
	if (sqlite3_prepare_v2(db, "INSERT INTO memory(scope, key, value, "
	    "updated_ms) VALUES (?1, ?2, ?3, ?4) ON CONFLICT(scope, key) DO "
	    "UPDATE SET value = excluded.value, updated_ms = excluded.updated_ms",
	    -1, &st, NULL) != SQLITE_OK) {
		free(scope);
		db_fail(tc, db);
		return;
	}
	sqlite3_bind_text(st, 1, scope, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, key, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, value, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 4, now_ms());
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	free(scope);
	if (rc != SQLITE_DONE) {
		db_fail(tc, db);
		return;
	}
	{
		char msg[MEM_KEY_MAX + 64];
		int len = snprintf(msg, sizeof(msg), "%s \"%s\"", has ?
		    "updated" : "remembered", key);

		tool_done(tc, msg, (size_t)len, 0);
	}
}

static void
recall_call(struct tool_call *tc)
{
	sqlite3 *db = mem_db();
	sqlite3_stmt *st;
	const char *key;
	char *scope;

	if ((key = want_key(tc)) == NULL)
		return;
	if (db == NULL || sqlite3_prepare_v2(db, "SELECT value FROM memory "
	    "WHERE scope = ?1 AND key = ?2", -1, &st, NULL) != SQLITE_OK) {
		db_fail(tc, db);
		return;
	}
	scope = mem_scope(tc);
	sqlite3_bind_text(st, 1, scope, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, key, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(st) == SQLITE_ROW)
		tool_done(tc, (const char *)sqlite3_column_text(st, 0),
		    (size_t)sqlite3_column_bytes(st, 0), 0);
	else
		tool_fail(tc, "nothing is remembered under \"%s\"", key);
	sqlite3_finalize(st);
	free(scope);
}

/* A value's first bytes for a listing, cut on a character boundary. */
static void
add_preview(cJSON *o, const char *v, size_t len)
{
	size_t keep = len;
	char *s;

	if (len > MEM_PREVIEW) {
		keep = MEM_PREVIEW;
		while (keep > 0 && ((unsigned char)v[keep] & 0xc0) == 0x80)
			keep--;
	}
	s = xstrndup(v, keep);
	cJSON_AddStringToObject(o, "preview", s);
	free(s);
	cJSON_AddBoolToObject(o, "cut", keep < len);
}

static void
list_call(struct tool_call *tc)
{
	sqlite3 *db = mem_db();
	sqlite3_stmt *st;
	cJSON *out, *arr;
	char *scope, *text, iso[32];

	if (tc->input->child != NULL) {
		tool_fail(tc, "list_memories takes no input");
		return;
	}
	if (db == NULL || sqlite3_prepare_v2(db, "SELECT key, value, "
	    "updated_ms FROM memory WHERE scope = ?1 ORDER BY key", -1, &st,
	    NULL) != SQLITE_OK) {
		db_fail(tc, db);
		return;
	}
	scope = mem_scope(tc);
	sqlite3_bind_text(st, 1, scope, -1, SQLITE_TRANSIENT);
	out = cJSON_CreateObject();
	arr = cJSON_AddArrayToObject(out, "memories");
	while (sqlite3_step(st) == SQLITE_ROW) {
		cJSON *o = cJSON_CreateObject();
		const char *v = (const char *)sqlite3_column_text(st, 1);

		cJSON_AddStringToObject(o, "key",
		    (const char *)sqlite3_column_text(st, 0));
		cJSON_AddNumberToObject(o, "bytes", sqlite3_column_bytes(st, 1));
		fmt_time_iso(sqlite3_column_int64(st, 2), iso, sizeof(iso));
		cJSON_AddStringToObject(o, "updated", iso);
		add_preview(o, v ? v : "", (size_t)sqlite3_column_bytes(st, 1));
		cJSON_AddItemToArray(arr, o);
	}
	sqlite3_finalize(st);
	free(scope);
	cJSON_AddNumberToObject(out, "count", cJSON_GetArraySize(arr));
	cJSON_AddNumberToObject(out, "max", MEM_MAX_ENTRIES);
	if ((text = cJSON_PrintUnformatted(out)) == NULL)
		fatalx("memory: out of memory");
	cJSON_Delete(out);
	tool_done(tc, text, strlen(text), 0);
	cJSON_free(text);
}

static void
forget_call(struct tool_call *tc)
{
	sqlite3 *db = mem_db();
	sqlite3_stmt *st;
	const char *key;
	char *scope;
	int rc;

	if ((key = want_key(tc)) == NULL)
		return;
	if (db == NULL || sqlite3_prepare_v2(db, "DELETE FROM memory WHERE "
	    "scope = ?1 AND key = ?2", -1, &st, NULL) != SQLITE_OK) {
		db_fail(tc, db);
		return;
	}
	scope = mem_scope(tc);
	sqlite3_bind_text(st, 1, scope, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, key, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	free(scope);
	if (rc != SQLITE_DONE)
		db_fail(tc, db);
	else if (sqlite3_changes(db) == 0)
		tool_fail(tc, "nothing is remembered under \"%s\"", key);
	else {
		char msg[MEM_KEY_MAX + 32];
		int len = snprintf(msg, sizeof(msg), "forgot \"%s\"", key);

		tool_done(tc, msg, (size_t)len, 0);
	}
}

#define MEM_SCOPE_DOC							\
    " Memories last across runs and restarts. With memory: agent, every "	\
    "run of this agent shares them; with memory: conversation, each "	\
    "conversation (a chat) has its own, and a run that has no "		\
    "conversation has its own, for that run only: it is deleted when the "	\
    "run ends."

const struct tool_def tool_remember = {
	.name = "remember",
	.description = "Store a value under a key (1-128 bytes; value at most "
	    "16 KiB; at most 1000 keys), replacing what the key held."
	    MEM_SCOPE_DOC,
	.input_schema = "{\"type\":\"object\",\"properties\":{"
	    "\"key\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":128},"
	    "\"value\":{\"type\":\"string\"}},"
	    "\"required\":[\"key\",\"value\"],\"additionalProperties\":false}",
	.axis = TOOL_NO_AXIS,
	.exists = mem_exists,
	.call = remember_call,
};

const struct tool_def tool_recall = {
	.name = "recall",
	.description = "The value stored under a key with remember, exactly "
	    "as it was written." MEM_SCOPE_DOC,
	.input_schema = "{\"type\":\"object\",\"properties\":{"
	    "\"key\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":128}},"
	    "\"required\":[\"key\"],\"additionalProperties\":false}",
	.axis = TOOL_NO_AXIS,
	.exists = mem_exists,
	.call = recall_call,
};

const struct tool_def tool_list_memories = {
	.name = "list_memories",
	.description = "Every key stored with remember, with its size, the "
	    "time it was last written and its first bytes." MEM_SCOPE_DOC,
	.input_schema = "{\"type\":\"object\",\"properties\":{},"
	    "\"additionalProperties\":false}",
	.axis = TOOL_NO_AXIS,
	.exists = mem_exists,
	.call = list_call,
};

const struct tool_def tool_forget = {
	.name = "forget",
	.description = "Delete the value stored under a key." MEM_SCOPE_DOC,
	.input_schema = "{\"type\":\"object\",\"properties\":{"
	    "\"key\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":128}},"
	    "\"required\":[\"key\"],\"additionalProperties\":false}",
	.axis = TOOL_NO_AXIS,
	.exists = mem_exists,
	.call = forget_call,
};
