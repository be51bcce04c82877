/*
 * The cron trigger: triggers.cron entries start runs on a five-field schedule,
 * in UTC or in an entry's time zone. Schedules and zones are read in
 * prepare(), before the sandbox and while af has one thread (cron_tz_load
 * switches TZ for a moment); start() catches up on what was missed while af
 * was down; then a timer on the loop checks the entries.
 *
 * Each entry's last fire time is a cursor committed in the same transaction
 * as the run's journal entry, so a restart neither loses a tick nor runs it
 * twice. Ticks missed while af was down run once at start, not once per
 * missed tick. The cursor is named by a digest of what the entry is
 * (schedule, time zone, prompt), not by its place in the list: entries can
 * be reordered, added and removed without one taking over another's time,
 * and an edited entry is a new one.
 */
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "audit/audit.h"
#include "config.h"
#include "loop.h"
#include "run.h"
#include "state.h"
#include "trigger.h"
#include "triggers/cron.h"
#include "util.h"

#define CRON_NAME		"cron"
#define CRON_CHECK_MAX_MS	60000	/* a wall-clock jump is seen within this */
#define CRON_CHECK_SLACK_MS	5	/* wake just after the minute turns */
#define CRON_TEST_CHECK_MS	1000	/* with the test clock: every second */
#define CRON_CLOCK_ENV		"AF_TEST_CLOCK_FILE"
#define CRON_CURSOR_MAX		(CRON_MAX_SCHEDULE + 200)
#define CRON_SHA256_LEN		32
#define CRON_KEY_BYTES		16	/* of the digest, in the cursor name */
#define CRON_KEY_MAX		64

struct cron_entry {
	const struct cfg_cron	*c;
	struct cron_sched	 sched;
	struct cron_tz		 tz;
	char			 key[CRON_KEY_MAX];	/* cron.DIGEST[.N] */
	int64_t			 last;		/* last fire (or first start) */
	int64_t			 next;		/* -1: never */
	uint64_t		 fired;
};

static struct {
	const struct cfg	*cfg;
	struct cron_entry	*e;
	size_t			 n;
	int			 clock_fd;	/* test clock; -1: real time */
	int			 clock_bad;	/* warned about the test clock */
	struct loop_timer	*timer;
	int			 stopping;
} cr = { .clock_fd = -1 };

static void check(void *);

static int
cron_enabled(const struct cfg *cfg)
{
	return cfg->trig.ncron > 0;
}

/*
 * "Now" in unix seconds. With AF_TEST_CLOCK_FILE set, the file (opened before
 * the sandbox and re-read at every check) holds it: tests move time forward
 * by rewriting the file. -1 when the file does not hold a number.
 */
static int64_t
clock_now(void)
{
	char buf[32], *end;
	ssize_t n;
	long long v;

	if (cr.clock_fd == -1)
		return now_ms() / 1000;
	n = pread(cr.clock_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		goto bad;
	buf[n] = '\0';
	errno = 0;
	v = strtoll(buf, &end, 10);
	while (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t')
		end++;
	if (errno != 0 || end == buf || *end != '\0' || v < 0)
		goto bad;
	cr.clock_bad = 0;
	return (int64_t)v;
bad:
	if (!cr.clock_bad)
		log_warnx("cron: %s does not hold a unix time; the check is "
		    "skipped", CRON_CLOCK_ENV);
	cr.clock_bad = 1;
	return -1;
}

static const char *
tz_name(const struct cfg_cron *c)
{
	return c->timezone ? c->timezone : "UTC";
}

static int
same_entry(const struct cfg_cron *a, const struct cfg_cron *b)
{
	return strcmp(a->schedule, b->schedule) == 0 &&
	    strcmp(tz_name(a), tz_name(b)) == 0 &&
	    strcmp(a->prompt, b->prompt) == 0;
}

/*
 * Entry i's cursor name: "cron." and the SHA-256 of its schedule, zone and
 * prompt, each with its NUL (so no two different entries hash the same
 * text). Identical entries fire alike, so which of them gets which cursor
 * does not matter; they are told apart by how many come before them.
 */
static int
cursor_key(const struct cfg_cron *all, size_t i, char *out, size_t outlen)
{
	const struct cfg_cron *c = &all[i];
	unsigned char md[CRON_SHA256_LEN];
	char hex[2 * CRON_KEY_BYTES + 1];
	struct buf b;
	size_t dup = 0;
	int rc;

	for (size_t j = 0; j < i; j++)
		dup += same_entry(&all[j], c);
	buf_init(&b);
	buf_add(&b, c->schedule, strlen(c->schedule) + 1);
	buf_add(&b, tz_name(c), strlen(tz_name(c)) + 1);
	buf_add(&b, c->prompt, strlen(c->prompt) + 1);
	rc = gnutls_hash_fast(GNUTLS_DIG_SHA256, b.data, b.len, md);
	buf_free(&b);
	if (rc < 0)
		return -1;
	for (size_t k = 0; k < CRON_KEY_BYTES; k++)
		snprintf(hex + 2 * k, 3, "%02x", md[k]);
	if (dup == 0)
		snprintf(out, outlen, "cron.%s", hex);
	else
		snprintf(out, outlen, "cron.%s.%zu", hex, dup);
	return 0;
}

/* The value also names the schedule and zone it was written for, a check
 * behind the digest in the cursor's name: a stored time means nothing to
 * another schedule. */
static void
cursor_value(const struct cron_entry *e, int64_t t, char *out, size_t outlen)
{
	snprintf(out, outlen, "%" PRId64 " %s|%s", t, e->c->schedule,
	    tz_name(e->c));
}

/* The stored last fire time, or -1 when there is none for this schedule. */
static int64_t
cursor_load(const struct cron_entry *e)
{
	char val[CRON_CURSOR_MAX], want[CRON_CURSOR_MAX], *sp, *end;
	long long t;

	if (state_cursor_get(e->key, val, sizeof(val)) != 1)
		return -1;
	if ((sp = strchr(val, ' ')) == NULL)
		return -1;
	*sp = '\0';
	errno = 0;
	t = strtoll(val, &end, 10);
	if (errno != 0 || end == val || *end != '\0' || t < 0)
		return -1;
	cursor_value(e, 0, want, sizeof(want));
	if (strcmp(sp + 1, strchr(want, ' ') + 1) != 0)
		return -1;
	return (int64_t)t;
}

static void
tx(const char *sql)
{
	char *msg = NULL;

	if (state_db() == NULL)
		return;
	if (sqlite3_exec(state_db(), sql, NULL, NULL, &msg) != SQLITE_OK) {
		log_warnx("cron: %s: %s", sql, msg ? msg : "?");
		sqlite3_free(msg);
	}
}

static void
audit_refused(size_t i, const char *reason)
{
	cJSON *rec = audit_new(NULL, "cron_refused");

	if (rec == NULL)
		return;
	cJSON_AddNumberToObject(rec, "entry", (double)i);
	cJSON_AddStringToObject(rec, "schedule", cr.e[i].c->schedule);
	cJSON_AddStringToObject(rec, "reason", reason);
	if (audit_emit(rec) == -1)
		log_warnx("cron: the refusal could not be audited");
}

/*
 * Start entry i's run. The journal entry and the cursor are committed
 * together. A refused event (queue full, stopping, disk failing) is logged
 * and audited, and the tick counts as spent: cron does not queue ticks up.
 */
static void
fire(size_t i, int64_t now, const char *why)
{
	struct cron_entry *e = &cr.e[i];
	char id[RUN_ID_LEN], val[CRON_CURSOR_MAX], due[32];
	struct run_request rr;
	cJSON *meta = cJSON_CreateObject();
	char *mtext;
	int rc;

	fmt_time_iso(e->next * 1000, due, sizeof(due));
	cJSON_AddNumberToObject(meta, "entry", (double)i);
	cJSON_AddStringToObject(meta, "schedule", e->c->schedule);
	cJSON_AddStringToObject(meta, "due", due);
	if ((mtext = cJSON_PrintUnformatted(meta)) == NULL)
		fatalx("cron: out of memory");
	cJSON_Delete(meta);
	memset(&rr, 0, sizeof(rr));
	rr.trigger = CRON_NAME;
	rr.prompt = e->c->prompt;
	rr.meta = mtext;
	cursor_value(e, now, val, sizeof(val));
	tx("BEGIN IMMEDIATE");
	rc = run_submit(&rr, id, sizeof(id));
	if (state_cursor_set(e->key, val) == -1)
		log_warnx("cron: the cursor %s could not be written", e->key);
	tx("COMMIT");
	if (rc == 0) {
		e->fired++;
		log_info("cron: entry %zu (%s, due %s%s) started run %s", i,
		    e->c->schedule, due, why, id);
	} else {
		log_warnx("cron: entry %zu (%s, due %s): the event was refused: "
		    "%s", i, e->c->schedule, due, strerror(errno));
		audit_refused(i, errno == EAGAIN ? "queue full" :
		    errno == ESHUTDOWN ? "stopping" : "journal or audit failed");
	}
	free(mtext);
	e->last = now;
	e->next = cron_next(&e->sched, &e->tz, now);
}

static void
arm(int64_t now)
{
	long ms = CRON_CHECK_MAX_MS;

	if (cr.stopping)
		return;
	if (cr.clock_fd != -1)
		ms = CRON_TEST_CHECK_MS;
	else
		for (size_t i = 0; i < cr.n; i++) {
			int64_t d;

			if (cr.e[i].next == -1)
				continue;
			d = cr.e[i].next * 1000 - now_ms() + CRON_CHECK_SLACK_MS;
			if (d < ms)
				ms = d < 0 ? 0 : (long)d;
		}
	cr.timer = loop_timer_add(ms, check, NULL);
	(void)now;
}

static void
check(void *arg)
{
	int64_t now;

	cr.timer = NULL;
	if (cr.stopping)
		return;
	if ((now = clock_now()) != -1)
		for (size_t i = 0; i < cr.n; i++)
			if (cr.e[i].next != -1 && now >= cr.e[i].next)
				fire(i, now, "");
	arm(now);
}

static int
cron_prepare(const struct cfg *cfg, char *err, size_t errlen)
{
	const char *clock = getenv(CRON_CLOCK_ENV);
	char why[256];

	cr.cfg = cfg;
	cr.stopping = 0;
	cr.n = cfg->trig.ncron;
	cr.e = xcalloc(cr.n, sizeof(*cr.e));
	for (size_t i = 0; i < cr.n; i++) {
		struct cron_entry *e = &cr.e[i];

		e->c = &cfg->trig.cron[i];
		e->next = -1;
		if (cursor_key(cfg->trig.cron, i, e->key, sizeof(e->key)) ==
		    -1) {
			snprintf(err, errlen, "cron: triggers.cron[%zu]: the "
			    "cursor name cannot be computed", i);
			return -1;
		}
		if (cron_parse(e->c->schedule, &e->sched, why,
		    sizeof(why)) == -1) {
			snprintf(err, errlen, "%s:%d: triggers.cron[%zu].schedule: "
			    "%s", cfg->path, e->c->line, i, why);
			return -1;
		}
		if (cron_tz_load(e->c->timezone, &e->tz, why, sizeof(why)) ==
		    -1) {
			snprintf(err, errlen, "%s:%d: triggers.cron[%zu].timezone: "
			    "%s", cfg->path, e->c->line, i, why);
			return -1;
		}
	}
	if (clock != NULL && clock[0] != '\0') {
		if ((cr.clock_fd = open(clock, O_RDONLY | O_CLOEXEC)) == -1) {
			snprintf(err, errlen, "%s=%s: %s", CRON_CLOCK_ENV, clock,
			    strerror(errno));
			return -1;
		}
		log_warnx("cron: the clock is read from %s (%s): a test hook, "
		    "never for production", clock, CRON_CLOCK_ENV);
	}
	return 0;
}

/* A tick that came due while af was down runs now, once; a first start only
 * records the time, so that later downtime can be measured against it. */
static int
cron_start(const struct cfg *cfg, char *err, size_t errlen)
{
	int64_t now = clock_now();

	if (now == -1) {
		snprintf(err, errlen, "cron: %s does not hold a unix time",
		    CRON_CLOCK_ENV);
		return -1;
	}
	for (size_t i = 0; i < cr.n; i++) {
		struct cron_entry *e = &cr.e[i];
		int64_t last = cursor_load(e);
		char val[CRON_CURSOR_MAX];

		if (last != -1) {
			e->last = last;
			e->next = cron_next(&e->sched, &e->tz, last);
			if (e->next != -1 && e->next <= now) {
				fire(i, now, ", missed while af was down");
				continue;
			}
		} else {
			e->last = now;
			cursor_value(e, now, val, sizeof(val));
			if (state_cursor_set(e->key, val) == -1) {
				snprintf(err, errlen, "cron: the cursor %s cannot "
				    "be written", e->key);
				return -1;
			}
			e->next = cron_next(&e->sched, &e->tz, now);
		}
		if (e->next == -1)
			log_warnx("cron: entry %zu (%s) has no fire time in the "
			    "next %d years", i, e->c->schedule,
			    CRON_SEARCH_YEARS);
	}
	arm(now);
	trig_set_state(CRON_NAME, TRIG_UP, NULL);
	return 0;
}

static void
cron_stop(void)
{
	cr.stopping = 1;
	loop_timer_cancel(cr.timer);
	cr.timer = NULL;
}

static void
cron_status(cJSON *obj)
{
	cJSON *arr = cJSON_AddArrayToObject(obj, "entries");
	char ts[32];

	for (size_t i = 0; i < cr.n; i++) {
		const struct cron_entry *e = &cr.e[i];
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "schedule", e->c->schedule);
		cJSON_AddStringToObject(o, "timezone", e->c->timezone ?
		    e->c->timezone : "UTC");
		if (e->next != -1) {
			fmt_time_iso(e->next * 1000, ts, sizeof(ts));
			cJSON_AddStringToObject(o, "next", ts);
		} else
			cJSON_AddNullToObject(o, "next");
		fmt_time_iso(e->last * 1000, ts, sizeof(ts));
		cJSON_AddStringToObject(o, "last", ts);
		cJSON_AddNumberToObject(o, "fired", (double)e->fired);
		cJSON_AddItemToArray(arr, o);
	}
}

static void
cron_free(void)
{
	cron_stop();
	for (size_t i = 0; i < cr.n; i++)
		cron_tz_free(&cr.e[i].tz);
	free(cr.e);
	cr.e = NULL;
	cr.n = 0;
	if (cr.clock_fd != -1)
		close(cr.clock_fd);
	cr.clock_fd = -1;
	cr.cfg = NULL;
}

const struct trigger_def trigger_cron = {
	.name = CRON_NAME,
	.enabled = cron_enabled,
	.prepare = cron_prepare,
	.start = cron_start,
	.stop = cron_stop,
	.deliver = NULL,
	.status = cron_status,
	.free = cron_free,
};
