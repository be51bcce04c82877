/* The cron trigger's pure parts: the schedule parser, the matcher (lists,
 * ranges, steps, the day-of-month/day-of-week rule) and the next-fire search
 * in UTC and across daylight-saving changes, leap days and year ends. Times
 * are written as UTC strings and checked against the search's answer. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "triggers/cron.h"
#include "tt.h"
#include "util.h"

/* "2025-03-30T01:00" (UTC) as unix seconds. */
static int64_t
utc(const char *s)
{
	struct tm tm;

	memset(&tm, 0, sizeof(tm));
	if (strptime(s, "%Y-%m-%dT%H:%M", &tm) == NULL)
		abort();
	return (int64_t)timegm(&tm);
}

static const char *
fmt(int64_t t)
{
	static char out[32];
	time_t tt = (time_t)t;
	struct tm tm;

	if (t == -1)
		return "never";
	gmtime_r(&tt, &tm);
	strftime(out, sizeof(out), "%Y-%m-%dT%H:%M", &tm);
	return out;
}

/* The next fire of spec in zone (NULL: UTC) after the UTC time from. */
static const char *
next_of(const char *spec, const char *zone, const char *from)
{
	struct cron_sched s;
	struct cron_tz tz;
	char err[256];
	const char *r;

	if (cron_parse(spec, &s, err, sizeof(err)) == -1)
		return err[0] ? "parse error" : "?";
	if (cron_tz_load(zone, &tz, err, sizeof(err)) == -1)
		return "tz error";
	r = fmt(cron_next(&s, &tz, utc(from)));
	cron_tz_free(&tz);
	return r;
}

static void
test_parse_good(void)
{
	static const char *const good[] = {
		"* * * * *", "0 0 1 1 0", "59 23 31 12 7", "*/5 * * * *",
		"0-59/15 0-23/6 1-31/10 1-12/3 0-7/2", "1,2,3 4,5 6 7 1-5",
		"  0   9 * *\t1-5  ", "5/10 * * * *", "007 01 * * *",
		"0 0 30 2 1", "0 0 29 2 *", "0 0 31 1-12 *",
	};
	struct cron_sched s;
	char err[256];

	for (size_t i = 0; i < nitems(good); i++)
		if (cron_parse(good[i], &s, err, sizeof(err)) == -1)
			tt_fail_msg("\"%s\" refused: %s", good[i], err);
end:;
}

static void
test_parse_bad(void)
{
	static const char *const bad[] = {
		"", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *",
		"* * 0 * *", "* * 32 * *", "* * * 0 *", "* * * 13 *",
		"* * * * 8", "5-1 * * * *", "*/0 * * * *", "*/60 * * * *",
		"1,,2 * * * *", "1, * * * *", ",1 * * * *", "a * * * *",
		"1- * * * *", "-1 * * * *", "1/ * * * *", "** * * * *",
		"*/5/2 * * * *", "0000 * * * *", "@daily", "JAN * * * *",
		"0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 2-6/2 *",
		"1-2-3 * * * *", "* * * * MON",
	};
	struct cron_sched s;
	char err[256];

	for (size_t i = 0; i < nitems(bad); i++) {
		err[0] = '\0';
		if (cron_parse(bad[i], &s, err, sizeof(err)) == 0)
			tt_fail_msg("\"%s\" accepted", bad[i]);
		tt_assert(err[0] != '\0');
	}
end:;
}

static void
test_masks(void)
{
	struct cron_sched s;
	char err[256];

	tt_int_op(cron_parse("1,3-5,50-59/4 */6 1-31/15 2-12/5 7", &s, err,
	    sizeof(err)), ==, 0);
	tt_assert(s.minute == ((1ull << 1) | (1ull << 3) | (1ull << 4) |
	    (1ull << 5) | (1ull << 50) | (1ull << 54) | (1ull << 58)));
	tt_int_op(s.hour, ==, (1u << 0) | (1u << 6) | (1u << 12) | (1u << 18));
	tt_int_op(s.dom, ==, (1u << 1) | (1u << 16) | (1u << 31));
	tt_int_op(s.month, ==, (1u << 2) | (1u << 7) | (1u << 12));
	/* 7 is Sunday, like 0. */
	tt_int_op(s.dow, ==, 1);
	tt_int_op(s.dom_star, ==, 0);
	tt_int_op(s.dow_star, ==, 0);
	tt_int_op(s.fixed, ==, 0);
	tt_int_op(cron_parse("5/20 3 * * *", &s, err, sizeof(err)), ==, 0);
	tt_assert(s.minute == ((1ull << 5) | (1ull << 25) | (1ull << 45)));
	tt_int_op(s.fixed, ==, 1);
	tt_int_op(s.dom_star, ==, 1);
	tt_int_op(cron_parse("0 0 * * 5-7", &s, err, sizeof(err)), ==, 0);
	tt_int_op(s.dow, ==, (1 << 0) | (1 << 5) | (1 << 6));
end:;
}

static void
test_match(void)
{
	struct cron_sched s;
	struct tm tm;
	char err[256];
	time_t t;

	/* Friday 2025-06-13 09:30 UTC. */
	t = (time_t)utc("2025-06-13T09:30");
	gmtime_r(&t, &tm);
	tt_int_op(cron_parse("30 9 * * 5", &s, err, sizeof(err)), ==, 0);
	tt_int_op(cron_match(&s, &tm), ==, 1);
	tt_int_op(cron_parse("31 9 * * 5", &s, err, sizeof(err)), ==, 0);
	tt_int_op(cron_match(&s, &tm), ==, 0);
	tt_int_op(cron_parse("30 9 * 7 *", &s, err, sizeof(err)), ==, 0);
	tt_int_op(cron_match(&s, &tm), ==, 0);
	/* Both days restricted: either one is enough. */
	tt_int_op(cron_parse("30 9 1 * 5", &s, err, sizeof(err)), ==, 0);
	tt_int_op(cron_match(&s, &tm), ==, 1);
	tt_int_op(cron_parse("30 9 13 * 1", &s, err, sizeof(err)), ==, 0);
	tt_int_op(cron_match(&s, &tm), ==, 1);
	tt_int_op(cron_parse("30 9 12 * 1", &s, err, sizeof(err)), ==, 0);
	tt_int_op(cron_match(&s, &tm), ==, 0);
	/* A field starting with '*' counts as unrestricted: both must match. */
	tt_int_op(cron_parse("30 9 */2 * 1", &s, err, sizeof(err)), ==, 0);
	tt_int_op(cron_match(&s, &tm), ==, 0);
	tt_int_op(cron_parse("30 9 */2 * 5", &s, err, sizeof(err)), ==, 0);
	tt_int_op(cron_match(&s, &tm), ==, 1);
end:;
}

static void
test_next_utc(void)
{
	tt_str_op(next_of("* * * * *", NULL, "2025-06-13T09:30"), ==,
	    "2025-06-13T09:31");
	tt_str_op(next_of("*/15 9-17 * * 1-5", NULL, "2025-06-13T17:45"), ==,
	    "2025-06-16T09:00");
	tt_str_op(next_of("0 12 * * *", NULL, "2025-06-13T11:59"), ==,
	    "2025-06-13T12:00");
	tt_str_op(next_of("0 12 * * *", NULL, "2025-06-13T12:00"), ==,
	    "2025-06-14T12:00");
	tt_str_op(next_of("5,10 * * * *", NULL, "2025-06-13T09:05"), ==,
	    "2025-06-13T09:10");
	/* Friday the 13th or any Monday: the Monday comes first. */
	tt_str_op(next_of("0 0 13 * 1", NULL, "2025-06-13T01:00"), ==,
	    "2025-06-16T00:00");
	tt_str_op(next_of("0 0 13 * 5", NULL, "2025-06-14T00:00"), ==,
	    "2025-06-20T00:00");
	/* Sunday as 7. */
	tt_str_op(next_of("0 8 * * 7", NULL, "2025-06-13T09:00"), ==,
	    "2025-06-15T08:00");
	/* The 31st skips the months without one. */
	tt_str_op(next_of("0 0 31 * *", NULL, "2025-04-01T00:00"), ==,
	    "2025-05-31T00:00");
end:;
}

static void
test_next_year_end_and_leap_day(void)
{
	tt_str_op(next_of("0 0 1 1 *", NULL, "2025-12-31T23:59"), ==,
	    "2026-01-01T00:00");
	tt_str_op(next_of("59 23 31 12 *", NULL, "2025-01-01T00:00"), ==,
	    "2025-12-31T23:59");
	tt_str_op(next_of("* * * * *", NULL, "2025-12-31T23:59"), ==,
	    "2026-01-01T00:00");
	/* February 29 only: the next leap year, and 2100 is not one. */
	tt_str_op(next_of("0 12 29 2 *", NULL, "2025-03-01T00:00"), ==,
	    "2028-02-29T12:00");
	tt_str_op(next_of("0 12 29 2 *", NULL, "2028-02-29T12:00"), ==,
	    "2032-02-29T12:00");
	tt_str_op(next_of("0 12 29 2 *", NULL, "2096-03-01T00:00"), ==,
	    "2104-02-29T12:00");
	/* In a zone east of UTC the leap day starts the evening before. */
	tt_str_op(next_of("0 0 29 2 *", "Asia/Tokyo", "2025-01-01T00:00"), ==,
	    "2028-02-28T15:00");
end:;
}

static void
test_next_dst_berlin(void)
{
	const char *z = "Europe/Berlin";

	/* 2025-03-30: 02:00 CET becomes 03:00 CEST at 01:00 UTC. A job at
	 * 02:30 runs at the change, once; the next day at 02:30 CEST. */
	tt_str_op(next_of("30 2 * * *", z, "2025-03-29T12:00"), ==,
	    "2025-03-30T01:00");
	tt_str_op(next_of("30 2 * * *", z, "2025-03-30T01:00"), ==,
	    "2025-03-31T00:30");
	/* A job at 01:30 CET and one at 03:30 CEST are not affected. */
	tt_str_op(next_of("30 1 * * *", z, "2025-03-29T12:00"), ==,
	    "2025-03-30T00:30");
	tt_str_op(next_of("30 3 * * *", z, "2025-03-29T12:00"), ==,
	    "2025-03-30T01:30");
	/* A wildcard-hour job follows the wall clock: 02:30 does not exist. */
	tt_str_op(next_of("30 * * * *", z, "2025-03-30T00:45"), ==,
	    "2025-03-30T01:30");
	/* 2025-10-26: 03:00 CEST becomes 02:00 CET at 01:00 UTC. A fixed job
	 * at 02:30 runs at the first 02:30 only. */
	tt_str_op(next_of("30 2 * * *", z, "2025-10-25T12:00"), ==,
	    "2025-10-26T00:30");
	tt_str_op(next_of("30 2 * * *", z, "2025-10-26T00:30"), ==,
	    "2025-10-27T01:30");
	/* A wildcard job runs in both 02:00 hours. */
	tt_str_op(next_of("*/30 * * * *", z, "2025-10-26T00:45"), ==,
	    "2025-10-26T01:00");
	tt_str_op(next_of("*/30 * * * *", z, "2025-10-26T01:00"), ==,
	    "2025-10-26T01:30");
	/* March 31 on a Sunday is always the change day; a wildcard-minute
	 * job only at 02:xx on it never finds its wall time (found by the
	 * cron fuzzer, whose invariant was wrong). UTC has it. */
	tt_str_op(next_of("* 2 31 3 */7", NULL, "2030-01-01T08:59"), ==,
	    "2030-03-31T02:00");
	tt_str_op(next_of("* 2 31 3 */7", z, "2030-01-01T08:59"), ==,
	    "never");
	tt_str_op(next_of("0 2 31 3 */7", z, "2030-01-01T08:59"), ==,
	    "2030-03-31T01:00");
	/* Plain local time, summer and winter. */
	tt_str_op(next_of("0 9 * * *", z, "2025-07-01T00:00"), ==,
	    "2025-07-01T07:00");
	tt_str_op(next_of("0 9 * * *", z, "2025-12-01T00:00"), ==,
	    "2025-12-01T08:00");
end:;
}

static void
test_next_dst_new_york(void)
{
	const char *z = "America/New_York";

	/* 2025-03-09 02:00 EST -> 03:00 EDT (07:00 UTC). */
	tt_str_op(next_of("0 9 * * *", z, "2025-03-08T12:00"), ==,
	    "2025-03-08T14:00");
	tt_str_op(next_of("0 9 * * *", z, "2025-03-08T14:00"), ==,
	    "2025-03-09T13:00");
	tt_str_op(next_of("15 2 * * *", z, "2025-03-08T12:00"), ==,
	    "2025-03-09T07:00");
	/* 2025-11-02 02:00 EDT -> 01:00 EST (06:00 UTC): 01:30 comes twice. */
	tt_str_op(next_of("30 1 * * *", z, "2025-11-02T00:00"), ==,
	    "2025-11-02T05:30");
	tt_str_op(next_of("30 1 * * *", z, "2025-11-02T05:30"), ==,
	    "2025-11-03T06:30");
	/* Local midnight on a Sunday. */
	tt_str_op(next_of("0 0 * * 0", z, "2025-11-01T00:00"), ==,
	    "2025-11-02T04:00");
end:;
}

static void
test_tz_table(void)
{
	struct cron_tz tz;
	char err[256];

	tt_int_op(cron_tz_load("Europe/Berlin", &tz, err, sizeof(err)), ==, 0);
	tt_int_op(cron_tz_offset(&tz, utc("2025-03-30T00:59")), ==, 3600);
	tt_int_op(cron_tz_offset(&tz, utc("2025-03-30T01:00")), ==, 7200);
	tt_int_op(cron_tz_offset(&tz, utc("2025-10-26T00:59")), ==, 7200);
	tt_int_op(cron_tz_offset(&tz, utc("2025-10-26T01:00")), ==, 3600);
	/* Past 2037, where the zone file's footer rule takes over. */
	tt_int_op(cron_tz_offset(&tz, utc("2060-07-01T00:00")), ==, 7200);
	cron_tz_free(&tz);
	/* TZ is left as it was. */
	tt_assert(getenv("TZ") == NULL);
	tt_int_op(cron_tz_load("UTC", &tz, err, sizeof(err)), ==, 0);
	tt_int_op(tz.n, ==, 0);
	tt_int_op(cron_tz_load("Etc/UTC", &tz, err, sizeof(err)), ==, 0);
	tt_int_op(tz.n, ==, 0);
	tt_int_op(tz.off0, ==, 0);
	cron_tz_free(&tz);
	tt_int_op(cron_tz_load("Asia/Kolkata", &tz, err, sizeof(err)), ==, 0);
	tt_int_op(cron_tz_offset(&tz, utc("2025-01-01T00:00")), ==, 19800);
	cron_tz_free(&tz);
	tt_int_op(cron_tz_load("Mars/Olympus", &tz, err, sizeof(err)), ==, -1);
	tt_int_op(cron_tz_load("../etc/passwd", &tz, err, sizeof(err)), ==, -1);
	tt_int_op(cron_tz_load("/etc/localtime", &tz, err, sizeof(err)), ==,
	    -1);
	tt_int_op(cron_tz_load("Europe", &tz, err, sizeof(err)), ==, -1);
	tt_int_op(cron_tz_load("", &tz, err, sizeof(err)), ==, -1);
	tt_int_op(cron_tz_load("Europe/Berlin\n", &tz, err, sizeof(err)), ==,
	    -1);
end:;
}

static void
test_never(void)
{
	struct cron_sched s;
	struct cron_tz tz;
	char err[256];

	memset(&tz, 0, sizeof(tz));
	/* Parseable, and the 31st of February never comes even with the
	 * weekday rule, since '*' weekdays make it an AND. The parser refuses
	 * it; the search bound is the second line of defence. */
	tt_int_op(cron_parse("0 0 31 2 *", &s, err, sizeof(err)), ==, -1);
	s.dow_star = 1;
	s.dom_star = 0;
	s.dom = 1u << 31;
	s.month = 1u << 2;
	tt_int_op(cron_next(&s, &tz, utc("2025-01-01T00:00")), ==, -1);
end:;
}

static const struct tt_case cases[] = {
	{ "parse_good", test_parse_good },
	{ "parse_bad", test_parse_bad },
	{ "masks", test_masks },
	{ "match", test_match },
	{ "next_utc", test_next_utc },
	{ "next_year_end_and_leap_day", test_next_year_end_and_leap_day },
	{ "next_dst_berlin", test_next_dst_berlin },
	{ "next_dst_new_york", test_next_dst_new_york },
	{ "tz_table", test_tz_table },
	{ "never", test_never },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return tt_main(argc, argv, cases);
}
