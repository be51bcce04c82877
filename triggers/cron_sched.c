/* The cron trigger's pure parts (see cron.h): schedule parsing, matching, time
 * zone offsets and the next-fire search. */
#include "triggers/cron.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

#define CRON_TZ_FROM		946684800LL	/* 2000-01-01T00:00:00Z */
#define CRON_TZ_TO		4102444800LL	/* 2100-01-01T00:00:00Z */
#define CRON_TZ_NAME_MAX	128
#define DAY			86400
#define HOUR			3600
#define MINUTE			60

static const struct {
	const char	*name;
	int		 lo;
	int		 hi;
} fields[5] = {
	{ "minute", 0, 59 },
	{ "hour", 0, 23 },
	{ "day-of-month", 1, 31 },
	{ "month", 1, 12 },
	{ "day-of-week", 0, 7 },
};

/* Days in each month, February counted as 29: a schedule is refused only
 * when its day can never occur. */
static const int month_days[13] = { 0, 31, 29, 31, 30, 31, 30, 31, 31, 30,
    31, 30, 31 };

/* A decimal number of at most three digits (no field goes past 59). */
static int
parse_num(const char **pp, const char *end, int *out)
{
	const char *p = *pp;
	int v = 0, n = 0;

	while (p < end && *p >= '0' && *p <= '9') {
		if (++n > 3)
			return -1;
		v = v * 10 + (*p++ - '0');
	}
	if (n == 0)
		return -1;
	*pp = p;
	*out = v;
	return 0;
}

/* One field, the bytes [p, end), into a bit mask. */
static int
parse_field(const char *p, const char *end, int fi, uint64_t *mask,
    char *err, size_t errlen)
{
	int lo = fields[fi].lo, hi = fields[fi].hi;

	*mask = 0;
	for (;;) {
		int a, b, step = 1;

		if (p < end && *p == '*') {
			a = lo;
			b = hi;
			p++;
		} else if (parse_num(&p, end, &a) == 0) {
			b = a;
			if (p < end && *p == '-') {
				p++;
				if (parse_num(&p, end, &b) == -1)
					goto bad;
			} else if (p < end && *p == '/')
				b = hi;		/* N/STEP: from N to the end */
		} else
			goto bad;
		if (p < end && *p == '/') {
			p++;
			if (parse_num(&p, end, &step) == -1 || step < 1 ||
			    step > hi)
				goto bad;
		}
		if (a < lo || b > hi || a > b)
			goto range;
		for (int v = a; v <= b; v += step)
			*mask |= (uint64_t)1 << v;
		if (p == end)
			return 0;
		if (*p++ != ',' || p == end)
			goto bad;
	}
range:
	snprintf(err, errlen, "%s: values run from %d to %d", fields[fi].name,
	    lo, hi);
	return -1;
bad:
	snprintf(err, errlen, "%s: \"%.*s\" is not a list of *, N, N-M with "
	    "optional /STEP", fields[fi].name, (int)(end - p) > 40 ? 40 :
	    (int)(end - p), p);
	return -1;
}

static int
is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* With '*' weekdays the day of the month decides alone: refuse days that no
 * listed month has, which would otherwise never fire without a word. */
static int
days_exist(const struct cron_sched *s)
{
	if (s->dom_star || !s->dow_star)
		return 1;
	for (int m = 1; m <= 12; m++) {
		if (!(s->month & (1u << m)))
			continue;
		for (int d = 1; d <= month_days[m]; d++)
			if (s->dom & (1u << d))
				return 1;
	}
	return 0;
}

int
cron_parse(const char *spec, struct cron_sched *s, char *err, size_t errlen)
{
	const char *p = spec, *start[5], *end[5];
	uint64_t mask[5];
	int n = 0;

	memset(s, 0, sizeof(*s));
	if (spec == NULL || strnlen(spec, CRON_MAX_SCHEDULE + 1) >
	    CRON_MAX_SCHEDULE) {
		snprintf(err, errlen, "the schedule is longer than %d bytes",
		    CRON_MAX_SCHEDULE);
		return -1;
	}
	for (;;) {
		while (is_blank(*p))
			p++;
		if (*p == '\0')
			break;
		if (n == 5) {
			snprintf(err, errlen, "more than five fields");
			return -1;
		}
		start[n] = p;
		while (*p != '\0' && !is_blank(*p))
			p++;
		end[n++] = p;
	}
	if (n != 5) {
		snprintf(err, errlen, "%d field%s, want five (minute hour "
		    "day-of-month month day-of-week)", n, n == 1 ? "" : "s");
		return -1;
	}
	for (int i = 0; i < 5; i++)
		if (parse_field(start[i], end[i], i, &mask[i], err, errlen) == -1)
			return -1;
	s->minute = mask[0];
	s->hour = (uint32_t)mask[1];
	s->dom = (uint32_t)mask[2];
	s->month = (uint16_t)mask[3];
	s->dow = (uint8_t)((mask[4] | mask[4] >> 7) & 0x7f);
	s->dom_star = start[2][0] == '*';
	s->dow_star = start[4][0] == '*';
	s->fixed = start[0][0] != '*' && start[1][0] != '*';
	if (!days_exist(s)) {
		snprintf(err, errlen, "day-of-month: no listed month has that "
		    "day, so the schedule would never fire");
		return -1;
	}
	return 0;
}

static int
day_match(const struct cron_sched *s, const struct tm *tm)
{
	int dom = (s->dom >> tm->tm_mday) & 1;
	int dow = (s->dow >> tm->tm_wday) & 1;

	if (!((s->month >> (tm->tm_mon + 1)) & 1))
		return 0;
	return s->dom_star || s->dow_star ? dom && dow : dom || dow;
}

int
cron_match(const struct cron_sched *s, const struct tm *tm)
{
	return day_match(s, tm) && ((s->hour >> tm->tm_hour) & 1) &&
	    ((s->minute >> tm->tm_min) & 1);
}

static int
tz_name_ok(const char *name)
{
	size_t len = strlen(name);

	if (len == 0 || len > CRON_TZ_NAME_MAX || name[0] == '/' ||
	    name[0] == '.' || strstr(name, "..") != NULL ||
	    strstr(name, "//") != NULL)
		return 0;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || strchr("/_+-.", *p) != NULL))
			return 0;
	return 1;
}

/* glibc quietly falls back to UTC for a name it cannot read, so check that
 * the file is there and is a TZif file before asking it. */
static int
tz_file_ok(const char *path)
{
	char magic[4];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd == -1)
		return 0;
	n = read(fd, magic, sizeof(magic));
	close(fd);
	return n == 4 && memcmp(magic, "TZif", 4) == 0;
}

static int32_t
libc_offset(int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (localtime_r(&tt, &tm) == NULL)
		return 0;
	return (int32_t)tm.tm_gmtoff;
}

static void
tz_push(struct cron_tz *tz, size_t *cap, int64_t at, int32_t off)
{
	if (tz->n == *cap) {
		*cap = *cap ? *cap * 2 : 64;
		tz->at = xreallocarray(tz->at, *cap, sizeof(*tz->at));
		tz->off = xreallocarray(tz->off, *cap, sizeof(*tz->off));
	}
	tz->at[tz->n] = at;
	tz->off[tz->n++] = off;
}

/* Walk 2000..2100 a day at a time and find each offset change to the second
 * by bisection. Zones change at most twice a year, months apart. */
static void
tz_scan(struct cron_tz *tz)
{
	size_t cap = 0;
	int32_t prev = libc_offset(CRON_TZ_FROM);

	tz->off0 = prev;
	for (int64_t t = CRON_TZ_FROM + DAY; t <= CRON_TZ_TO; t += DAY) {
		int32_t o = libc_offset(t);
		int64_t lo = t - DAY, hi = t;

		if (o == prev)
			continue;
		while (hi - lo > 1) {
			int64_t mid = lo + (hi - lo) / 2;

			if (libc_offset(mid) == prev)
				lo = mid;
			else
				hi = mid;
		}
		tz_push(tz, &cap, hi, o);
		prev = o;
	}
}

int
cron_tz_load(const char *name, struct cron_tz *tz, char *err, size_t errlen)
{
	char path[sizeof(CRON_ZONEINFO) + CRON_TZ_NAME_MAX + 2];
	char val[sizeof(path) + 1];
	char *saved = NULL;
	const char *old;

	memset(tz, 0, sizeof(*tz));
	if (name == NULL || strcmp(name, "UTC") == 0)
		return 0;
	if (!tz_name_ok(name)) {
		snprintf(err, errlen, "\"%.*s\" is not a time zone name", 60,
		    name);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/%s", CRON_ZONEINFO, name);
	if (!tz_file_ok(path)) {
		snprintf(err, errlen, "unknown time zone \"%s\" (no TZif file "
		    "%s)", name, path);
		return -1;
	}
	if ((old = getenv("TZ")) != NULL)
		saved = xstrdup(old);
	/* A leading colon makes glibc read exactly this file. */
	snprintf(val, sizeof(val), ":%s", path);
	if (setenv("TZ", val, 1) == -1)
		goto fail;
	tzset();
	tz_scan(tz);
	if (saved != NULL)
		setenv("TZ", saved, 1);
	else
		unsetenv("TZ");
	tzset();
	free(saved);
	return 0;
fail:
	snprintf(err, errlen, "time zone %s: %s", name, strerror(errno));
	free(saved);
	return -1;
}

void
cron_tz_free(struct cron_tz *tz)
{
	free(tz->at);
	free(tz->off);
	memset(tz, 0, sizeof(*tz));
}

/* How many changes happened at or before t. */
static size_t
tz_count(const struct cron_tz *tz, int64_t t)
{
	size_t lo = 0, hi = tz->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (tz->at[mid] <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int32_t
off_before(const struct cron_tz *tz, size_t i)
{
	return i == 0 ? tz->off0 : tz->off[i - 1];
}

int32_t
cron_tz_offset(const struct cron_tz *tz, int64_t t)
{
	size_t k = tz_count(tz, t);

	return k == 0 ? tz->off0 : tz->off[k - 1];
}

static int64_t
mod(int64_t a, int64_t b)
{
	int64_t r = a % b;

	return r < 0 ? r + b : r;
}

static void
wall_tm(int64_t w, struct tm *tm)
{
	time_t tt = (time_t)w;

	if (gmtime_r(&tt, tm) == NULL)
		memset(tm, 0, sizeof(*tm));
}

/* Change i moved the clock forward: the wall minutes it skipped are
 * [at + before, at + after). A fixed-time job due in them runs at the
 * change itself, as cron does, rather than not at all that day. */
static int
gap_fires(const struct cron_sched *s, const struct cron_tz *tz, size_t i)
{
	int64_t a = off_before(tz, i), b = tz->off[i];
	struct tm tm;

	if (!s->fixed || b <= a)
		return 0;
	for (int64_t w = tz->at[i] + a; w < tz->at[i] + b; w += MINUTE) {
		wall_tm(w, &tm);
		if (cron_match(s, &tm))
			return 1;
	}
	return 0;
}

/* Is t's wall time the second showing of an hour a change moved back? A
 * fixed-time job ran at the first. k: changes at or before t. */
static int
repeated(const struct cron_tz *tz, size_t k, int64_t t)
{
	int64_t a, b;

	if (k == 0)
		return 0;
	a = off_before(tz, k - 1);
	b = tz->off[k - 1];
	return a > b && t < tz->at[k - 1] + (a - b);
}

/*
 * Walk forward in UTC, judging each instant by its wall-clock time, and skip
 * whole days, hours and minutes that cannot match. A skip never crosses an
 * offset change: the walk stops at each one, so the wall clock it reasons
 * about is always the one in force.
 */
int64_t
cron_next(const struct cron_sched *s, const struct cron_tz *tz, int64_t after)
{
	int64_t t = after - mod(after, MINUTE) + MINUTE;
	int64_t limit = t + (int64_t)CRON_SEARCH_YEARS * 366 * DAY;

	while (t < limit) {
		size_t k = tz_count(tz, t);
		int64_t w = t + (k == 0 ? tz->off0 : tz->off[k - 1]);
		int64_t change = k < tz->n ? tz->at[k] : INT64_MAX, next;
		struct tm tm;

		if (k > 0 && tz->at[k - 1] == t && gap_fires(s, tz, k - 1))
			return t;
		wall_tm(w, &tm);
		if (!day_match(s, &tm))
			next = t + DAY - mod(w, DAY);
		else if (!((s->hour >> tm.tm_hour) & 1))
			next = t + HOUR - mod(w, HOUR);
		else if (!((s->minute >> tm.tm_min) & 1) ||
		    (s->fixed && repeated(tz, k, t)))
			next = t + MINUTE - mod(w, MINUTE);
		else
			return t;
		t = next < change ? next : change;
	}
	return -1;
}
