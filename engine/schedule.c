/*
 * Schedules. One loop timer waits for the earliest entry; when it is due,
 * the entry becomes a run (run_submit, trigger "schedule") and is deleted
 * (once) or moved to its next time (every).
 *
 * Exactly once across a crash: the entry's change and the run's journal
 * record are one SQLite transaction. Either both are on disk (the journal
 * replays the run at the next start and the entry is not fired again) or
 * neither is (the entry is still due and fires at the next start). A
 * recurring entry that missed several times while af was down fires once,
 * then keeps its rhythm from the next time after now.
 *
 * Scope: every query the tools make is limited by SCOPE_SQL to the caller's
 * conversation, or, for a run without one, to what that run made and the
 * repeating entry whose latest run it is (last_run). Ids are random, but an
 * id is not a capability: it leaks in a log or a quoted reply, so another
 * scope's id is treated as unknown.
 */
#include "schedule.h"

#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "loop.h"
#include "run.h"
#include "state.h"
#include "util.h"

#define SCHED_TICK_MAX_MS	60000	/* look again at least this often */
#define SCHED_RETRY_MS		5000	/* the run queue was full */
#define SCHED_PREVIEW		200	/* bytes of a prompt in a listing */

static const char *const sched_schema =
    "CREATE TABLE IF NOT EXISTS schedules ("
    "  id TEXT PRIMARY KEY, prompt TEXT NOT NULL, conv TEXT,"
    "  due_ms INTEGER NOT NULL, every_ms INTEGER NOT NULL DEFAULT 0,"
    "  created_ms INTEGER NOT NULL, created_by TEXT,"
    "  fired INTEGER NOT NULL DEFAULT 0, last_run TEXT, origin TEXT);"
    "CREATE INDEX IF NOT EXISTS schedules_due ON schedules(due_ms);";

/* ?1 the caller's conversation (NULL: none), ?2 its run id. */
#define SCOPE_SQL							\
    "(CASE WHEN ?1 IS NOT NULL THEN conv = ?1 ELSE conv IS NULL AND "	\
    "(created_by = ?2 OR last_run = ?2) END)"

static struct {
	const struct cfg	*cfg;
	struct loop_timer	*timer;
	int			 started;
} sc;

static void fire_due(void *);

static int
exec_sql(sqlite3 *db, const char *sql)
{
	if (sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK)
		return 0;
	log_warnx("schedules: %s: %s", sql, sqlite3_errmsg(db));
	return -1;
}

/* Columns a table made by an earlier version lacks: last_run (without it
 * no run without a conversation could see the entry that fired it) and
 * origin (where the answers go). */
static int
add_column(sqlite3 *db, const char *name)
{
	sqlite3_stmt *st;
	char *sql = xasprintf("SELECT %s FROM schedules LIMIT 0", name);
	int rc;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
		sqlite3_finalize(st);
		free(sql);
		return 0;
	}
	free(sql);
	sql = xasprintf("ALTER TABLE schedules ADD COLUMN %s TEXT", name);
	rc = exec_sql(db, sql);
	free(sql);
	return rc;
}

/* Created on first use, from here: agents without schedules never get the
 * table. */
static sqlite3 *
sched_db(void)
{
	sqlite3 *db = state_db();

	if (db == NULL)
		return NULL;
	if (sqlite3_exec(db, sched_schema, NULL, NULL, NULL) != SQLITE_OK) {
		log_warnx("schedules: %s", sqlite3_errmsg(db));
		return NULL;
	}
	if (add_column(db, "last_run") == -1 || add_column(db, "origin") == -1)
		return NULL;
	return db;
}

/* Text or NULL for the scope's parameters (SCOPE_SQL). */
static void
bind_scope(sqlite3_stmt *st, const struct sched_scope *scope)
{
	if (scope->conv != NULL)
		sqlite3_bind_text(st, 1, scope->conv, -1, SQLITE_TRANSIENT);
	if (scope->run != NULL)
		sqlite3_bind_text(st, 2, scope->run, -1, SQLITE_TRANSIENT);
}

/* The earliest due time, or -1 when there is none (or on error). */
static int64_t
earliest(sqlite3 *db)
{
	sqlite3_stmt *st;
	int64_t due = -1;

	if (sqlite3_prepare_v2(db, "SELECT MIN(due_ms) FROM schedules", -1,
	    &st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW &&
	    sqlite3_column_type(st, 0) != SQLITE_NULL)
		due = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return due;
}

/* Wait for the earliest entry, but never longer than SCHED_TICK_MAX_MS, so
 * a wall-clock step (NTP, a suspended VM) is noticed soon. */
static void
arm(long at_most_ms)
{
	sqlite3 *db = sched_db();
	int64_t due, delay;

	loop_timer_cancel(sc.timer);
	sc.timer = NULL;
	if (!sc.started || loop_stopping() || db == NULL)
		return;
	if ((due = earliest(db)) == -1)
		return;
	delay = due - now_ms();
	if (delay < 0)
		delay = 0;
	if (delay > at_most_ms)
		delay = at_most_ms;
	sc.timer = loop_timer_add((long)delay, fire_due, NULL);
}

/* The first time after now in the entry's rhythm. */
static int64_t
next_time(int64_t due, int64_t every, int64_t now)
{
	if (due > now)
		return due;
	return due + ((now - due) / every + 1) * every;
}

struct entry {
	char	 id[SCHED_ID_LEN];
	char	*prompt;
	char	*conv;
	char	*origin;	/* JSON text, or NULL */
	int64_t	 due;
	int64_t	 every;
};

/* One due entry, or 0 when none is due; -1 on error. */
static int
take_due(sqlite3 *db, int64_t now, struct entry *e)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(db, "SELECT id, prompt, conv, due_ms, every_ms, "
	    "origin FROM schedules WHERE due_ms <= ?1 ORDER BY due_ms, id LIMIT 1",
	    -1, &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_int64(st, 1, now);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *conv = (const char *)sqlite3_column_text(st, 2);
		const char *origin = (const char *)sqlite3_column_text(st, 5);

		snprintf(e->id, sizeof(e->id), "%s",
		    (const char *)sqlite3_column_text(st, 0));
		e->prompt = xstrdup((const char *)sqlite3_column_text(st, 1));
		e->conv = conv != NULL ? xstrdup(conv) : NULL;
		e->due = sqlite3_column_int64(st, 3);
		e->every = sqlite3_column_int64(st, 4);
		e->origin = origin != NULL ? xstrdup(origin) : NULL;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

static int
advance(sqlite3 *db, const struct entry *e, int64_t now)
{
	sqlite3_stmt *st;
	int rc;

	if (e->every > 0)
		rc = sqlite3_prepare_v2(db, "UPDATE schedules SET due_ms = ?2, "
		    "fired = fired + 1 WHERE id = ?1", -1, &st, NULL);
	else
		rc = sqlite3_prepare_v2(db, "DELETE FROM schedules WHERE id = ?1",
		    -1, &st, NULL);
	if (rc != SQLITE_OK)
		return -1;
	sqlite3_bind_text(st, 1, e->id, -1, SQLITE_TRANSIENT);
	if (e->every > 0)
		sqlite3_bind_int64(st, 2, next_time(e->due, e->every, now));
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -1;
}

/* The run a repeating entry fired last: a run without a conversation sees
 * its entry through it. In the fire's transaction, so a replayed run still
 * does; when it cannot be written the run goes on without seeing it. */
static void
note_run(sqlite3 *db, const struct entry *e, const char *rid)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(db, "UPDATE schedules SET last_run = ?2 WHERE "
	    "id = ?1", -1, &st, NULL) != SQLITE_OK) {
		log_warnx("schedules: %s: %s", e->id, sqlite3_errmsg(db));
		return;
	}
	sqlite3_bind_text(st, 1, e->id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, rid, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(st) != SQLITE_DONE)
		log_warnx("schedules: %s: %s", e->id, sqlite3_errmsg(db));
	sqlite3_finalize(st);
}

/* {"schedule": ID, "origin": ORIGIN}: the run's meta, which takes its
 * answer where the schedule was made (triggers/schedule.c). */
static char *
fire_meta(const struct entry *e)
{
	cJSON *m = cJSON_CreateObject(), *o;
	char *s;

	cJSON_AddStringToObject(m, "schedule", e->id);
	if (e->origin != NULL && (o = cJSON_Parse(e->origin)) != NULL)
		cJSON_AddItemToObject(m, "origin", o);
	s = cJSON_PrintUnformatted(m);
	cJSON_Delete(m);
	return s != NULL ? s : xstrdup("{}");
}

/*
 * Fire one entry: its change and the journal record commit together. 0 when
 * the run was accepted; otherwise -1 with errno from run_submit (EAGAIN: try
 * again later) and nothing changed.
 */
static int
fire_one(sqlite3 *db, const struct entry *e, int64_t now)
{
	struct run_request req;
	char rid[RUN_ID_LEN], *meta;
	int err;

	if (exec_sql(db, "SAVEPOINT sched_fire") == -1) {
		errno = EIO;
		return -1;
	}
	if (advance(db, e, now) == -1) {
		log_warnx("schedules: %s: %s", e->id, sqlite3_errmsg(db));
		err = EIO;
		goto undo;
	}
	meta = fire_meta(e);
	memset(&req, 0, sizeof(req));
	req.trigger = SCHED_TRIGGER;
	req.prompt = e->prompt;
	req.conversation = e->conv;
	req.meta = meta;
	if (run_submit(&req, rid, sizeof(rid)) == -1) {
		err = errno;
		free(meta);
		goto undo;
	}
	free(meta);
	if (e->every > 0)
		note_run(db, e, rid);
	if (exec_sql(db, "RELEASE sched_fire") == -1) {
		/* The run is queued in memory but neither change is on disk:
		 * it runs now and the entry fires again after a restart. The
		 * state database refuses further events by then. */
		log_warnx("schedules: %s fired as run %s but the commit failed",
		    e->id, rid);
		exec_sql(db, "ROLLBACK");
		return 0;
	}
	log_info("schedule %s is run %s%s", e->id, rid, e->every > 0 ?
	    "; it repeats" : "");
	return 0;
undo:
	exec_sql(db, "ROLLBACK TO sched_fire");
	exec_sql(db, "RELEASE sched_fire");
	errno = err;
	return -1;
}

static void
entry_free(struct entry *e)
{
	free(e->prompt);
	free(e->conv);
	free(e->origin);
	memset(e, 0, sizeof(*e));
}

static void
fire_due(void *arg)
{
	sqlite3 *db = sched_db();
	int64_t now = now_ms();
	struct entry e;
	int rc;

	sc.timer = NULL;
	if (!sc.started || db == NULL)
		return;
	/* Bounded: every entry fires at most once per pass. */
	for (int i = 0; i < SCHED_MAX * 2; i++) {
		memset(&e, 0, sizeof(e));
		if ((rc = take_due(db, now, &e)) != 1) {
			if (rc == -1)
				log_warnx("schedules: %s", sqlite3_errmsg(db));
			break;
		}
		rc = fire_one(db, &e, now);
		entry_free(&e);
		if (rc == -1 && errno == EAGAIN) {
			log_warnx("schedules: the run queue is full; due "
			    "entries wait");
			arm(SCHED_RETRY_MS);
			return;
		}
		if (rc == -1) {
			if (errno != ESHUTDOWN)
				log_warnx("schedules: due entries wait: events "
				    "cannot be journaled");
			return;
		}
	}
	arm(SCHED_TICK_MAX_MS);
}

int
sched_start(const struct cfg *cfg, char *err, size_t errlen)
{
	int n;

	sc.cfg = cfg;
	if (!cfg->schedules)
		return 0;
	if (sched_db() == NULL) {
		snprintf(err, errlen, "schedules: the state database cannot "
		    "hold them");
		return -1;
	}
	sc.started = 1;
	if ((n = sched_count()) > 0)
		log_info("schedules: %d stored", n);
	arm(0);		/* what fell due while af was down fires now */
	return 0;
}

void
sched_stop(void)
{
	sc.started = 0;
	loop_timer_cancel(sc.timer);
	sc.timer = NULL;
}

int
sched_count(void)
{
	sqlite3 *db = sched_db();
	sqlite3_stmt *st;
	int n = -1;

	if (db == NULL || sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM "
	    "schedules", -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return n;
}

/* Entries the scope sees; -1 on error. */
static int
count_scope(sqlite3 *db, const struct sched_scope *scope)
{
	sqlite3_stmt *st;
	int n = -1;

	if (sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM schedules WHERE "
	    SCOPE_SQL, -1, &st, NULL) != SQLITE_OK)
		return -1;
	bind_scope(st, scope);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return n;
}

/*
 * Two bounds: a scope's own, so that one chat (or one injected mail) cannot
 * take the slots of every other, and the agent's, which bounds the table and
 * each firing pass however many conversations there are. Loop thread only,
 * so nothing is added between the counts and the insert.
 */
static int
check_room(sqlite3 *db, const struct sched_scope *scope, char *err,
    size_t errlen)
{
	int mine, all;

	if ((mine = count_scope(db, scope)) == -1 ||
	    (all = sched_count()) == -1) {
		snprintf(err, errlen, "schedules cannot be stored right now");
		return -1;
	}
	if (mine >= SCHED_SCOPE_MAX) {
		snprintf(err, errlen, "there are already %d schedules here, the "
		    "most one conversation may have; remove one with unschedule "
		    "first", SCHED_SCOPE_MAX);
		return -1;
	}
	if (all >= SCHED_MAX) {
		snprintf(err, errlen, "the agent already has %d schedules, the "
		    "most it may have in all conversations; none can be added "
		    "until some are removed", SCHED_MAX);
		return -1;
	}
	return 0;
}

/* Where the answers of a schedule's runs go: the trigger and meta of the run
 * that made it, {"trigger": T, "meta": M}; a schedule made by a scheduled
 * run inherits that run's origin. NULL: nowhere (the log). */
static char *
origin_of(const struct sched_scope *scope)
{
	cJSON *m, *o = NULL;
	char *s = NULL;

	if (scope->trigger == NULL || scope->meta == NULL)
		return NULL;
	if (strcmp(scope->trigger, SCHED_TRIGGER) == 0) {
		if ((m = cJSON_Parse(scope->meta)) == NULL)
			return NULL;
		o = cJSON_DetachItemFromObjectCaseSensitive(m, "origin");
		cJSON_Delete(m);
	} else {
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "trigger", scope->trigger);
		cJSON_AddStringToObject(o, "meta", scope->meta);
	}
	if (cJSON_IsObject(o))
		s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

int
sched_add(const struct sched_scope *scope, const char *prompt,
    int64_t due_ms, int64_t every_ms, char *id, size_t idlen, char *err,
    size_t errlen)
{
	sqlite3 *db = sched_db();
	sqlite3_stmt *st;
	char sid[SCHED_ID_LEN], *origin;
	int rc;

	if (db == NULL) {
		snprintf(err, errlen, "schedules cannot be stored right now");
		return -1;
	}
	if (check_room(db, scope, err, errlen) == -1)
		return -1;
	if (sqlite3_prepare_v2(db, "INSERT INTO schedules(id, prompt, conv, "
	    "due_ms, every_ms, created_ms, created_by, origin) VALUES (?1, ?2, "
	    "?3, ?4, ?5, ?6, ?7, ?8)", -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "schedules cannot be stored right now");
		return -1;
	}
	make_id("s-", sid, sizeof(sid));
	sqlite3_bind_text(st, 1, sid, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, prompt, -1, SQLITE_TRANSIENT);
	if (scope->conv != NULL)
		sqlite3_bind_text(st, 3, scope->conv, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 4, due_ms);
	sqlite3_bind_int64(st, 5, every_ms);
	sqlite3_bind_int64(st, 6, now_ms());
	if (scope->run != NULL)
		sqlite3_bind_text(st, 7, scope->run, -1, SQLITE_TRANSIENT);
	if ((origin = origin_of(scope)) != NULL)
		sqlite3_bind_text(st, 8, origin, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	free(origin);
	if (rc != SQLITE_DONE) {
		log_warnx("schedules: %s", sqlite3_errmsg(db));
		snprintf(err, errlen, "schedules cannot be stored right now");
		return -1;
	}
	snprintf(id, idlen, "%s", sid);
	if (sc.started)
		arm(SCHED_TICK_MAX_MS);
	return 0;
}

static void
add_prompt(cJSON *o, const char *p)
{
	size_t len = strlen(p), keep = len;
	char *s;

	if (len > SCHED_PREVIEW) {
		keep = SCHED_PREVIEW;
		while (keep > 0 && ((unsigned char)p[keep] & 0xc0) == 0x80)
			keep--;
	}
	s = keep < len ? xasprintf("%.*s...", (int)keep, p) : xstrdup(p);
	cJSON_AddStringToObject(o, "prompt", s);
	free(s);
}

cJSON *
sched_list(const struct sched_scope *scope)
{
	sqlite3 *db = sched_db();
	sqlite3_stmt *st;
	cJSON *arr;
	char iso[32];

	if (db == NULL || sqlite3_prepare_v2(db, "SELECT id, prompt, due_ms, "
	    "every_ms, fired FROM schedules WHERE " SCOPE_SQL " ORDER BY "
	    "due_ms, id", -1, &st, NULL) != SQLITE_OK)
		return NULL;
	bind_scope(st, scope);
	arr = cJSON_CreateArray();
	while (sqlite3_step(st) == SQLITE_ROW) {
		cJSON *o = cJSON_CreateObject();
		const char *prompt = (const char *)sqlite3_column_text(st, 1);

		cJSON_AddStringToObject(o, "id",
		    (const char *)sqlite3_column_text(st, 0));
		add_prompt(o, prompt != NULL ? prompt : "");
		fmt_time_iso(sqlite3_column_int64(st, 2), iso, sizeof(iso));
		cJSON_AddStringToObject(o, "next", iso);
		if (sqlite3_column_int64(st, 3) > 0)
			cJSON_AddNumberToObject(o, "every_s",
			    (double)(sqlite3_column_int64(st, 3) / 1000));
		cJSON_AddNumberToObject(o, "fired", sqlite3_column_int(st, 4));
		cJSON_AddItemToArray(arr, o);
	}
	sqlite3_finalize(st);
	return arr;
}

int
sched_remove(const struct sched_scope *scope, const char *id)
{
	sqlite3 *db = sched_db();
	sqlite3_stmt *st;
	int rc;

	if (db == NULL || sqlite3_prepare_v2(db, "DELETE FROM schedules WHERE "
	    "id = ?3 AND " SCOPE_SQL, -1, &st, NULL) != SQLITE_OK)
		return -1;
	bind_scope(st, scope);
	sqlite3_bind_text(st, 3, id, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return -1;
	if (sqlite3_changes(db) == 0)
		return 0;
	if (sc.started)
		arm(SCHED_TICK_MAX_MS);
	return 1;
}

/* Exactly n decimal digits into *v. */
static const char *
digits(const char *s, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++, s++) {
		if (*s < '0' || *s > '9')
			return NULL;
		*v = *v * 10 + (*s - '0');
	}
	return s;
}

/* The offset at s: "Z", "+HH:MM" or "-HH:MM" (also without the colon), in
 * seconds east of UTC; -1 when malformed. */
static int
parse_offset(const char *s, long *off)
{
	int h, m, sign;

	if (strcmp(s, "Z") == 0 || strcmp(s, "z") == 0) {
		*off = 0;
		return 0;
	}
	if (*s != '+' && *s != '-')
		return -1;
	sign = *s++ == '-' ? -1 : 1;
	if ((s = digits(s, 2, &h)) == NULL)
		return -1;
	if (*s == ':')
		s++;
	if ((s = digits(s, 2, &m)) == NULL || *s != '\0' || h > 23 || m > 59)
		return -1;
	*off = sign * (h * 3600L + m * 60L);
	return 0;
}

int
sched_parse_time(const char *s, int64_t *ms)
{
	struct tm tm, back;
	int y, mo, d, h, mi, sec = 0, frac = 0, scale = 100;
	long off;
	time_t t;

	if ((s = digits(s, 4, &y)) == NULL || *s++ != '-' ||
	    (s = digits(s, 2, &mo)) == NULL || *s++ != '-' ||
	    (s = digits(s, 2, &d)) == NULL || (*s != 'T' && *s != 't' &&
	    *s != ' ') || (s = digits(s + 1, 2, &h)) == NULL || *s++ != ':' ||
	    (s = digits(s, 2, &mi)) == NULL)
		return -1;
	if (*s == ':' && (s = digits(s + 1, 2, &sec)) == NULL)
		return -1;
	if (*s == '.') {
		for (s++; *s >= '0' && *s <= '9'; s++) {
			frac += (*s - '0') * scale;
			scale /= 10;
		}
	}
	if (parse_offset(s, &off) == -1 || y < 1970 || mo < 1 || mo > 12 ||
	    d < 1 || d > 31 || h > 23 || mi > 59 || sec > 59)
		return -1;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	/* timegm moves February 30 to March 2: such a date is a mistake. */
	if (t == (time_t)-1 || gmtime_r(&t, &back) == NULL ||
	    back.tm_mday != d || back.tm_mon != mo - 1)
		return -1;
	*ms = ((int64_t)t - off) * 1000 + frac;
	return 0;
}

int64_t
sched_parse_duration(const char *s)
{
	size_t n = strlen(s);
	char *hours;
	int64_t v;

	/* Days are not a config duration, but "every 1d" is natural here. */
	if (n >= 2 && s[n - 1] == 'd') {
		hours = xasprintf("%.*sh", (int)(n - 1), s);
		v = parse_duration(hours);
		free(hours);
		return v == -1 || v > INT64_MAX / 24 ? -1 : v * 24;
	}
	return parse_duration(s);
}
