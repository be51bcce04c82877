/* libFuzzer target for the cron trigger's schedule parser and next-fire
 * search: arbitrary bytes go to cron_parse, and an accepted schedule must
 * keep what the trigger relies on: every mask inside its field's range and
 * non-empty, the next fire time a whole minute after the start that the
 * schedule matches, and a fire time found in a zone with daylight saving
 * too unless every matching wall time falls in a skipped hour. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "triggers/cron.h"
#include "util.h"

#define FUZZ_MAX_INPUT	(CRON_MAX_SCHEDULE + 64)
#define FUZZ_START	1893488340LL	/* 2030-01-01T08:59:00Z */

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
check(int cond)
{
	if (!cond)
		abort();
}

static struct cron_tz utc, berlin;
static int loaded;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char buf[FUZZ_MAX_INPUT + 1];
	struct cron_sched s, again;
	char err[256];
	struct tm tm;
	time_t tt;
	int64_t n, utc_next;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	if (!loaded) {
		/* One thread here: cron_tz_load may switch TZ. */
		check(cron_tz_load("Europe/Berlin", &berlin, err,
		    sizeof(err)) == 0);
		loaded = 1;
	}
	memcpy(buf, data, size);
	buf[size] = '\0';
	err[0] = '\0';
	if (cron_parse(buf, &s, err, sizeof(err)) == -1) {
		check(err[0] != '\0');
		return 0;
	}
	check(s.minute != 0 && s.minute < (1ull << 60));
	check(s.hour != 0 && s.hour < (1u << 24));
	check(s.dom != 0 && (s.dom & 1) == 0);
	check(s.month != 0 && (s.month & 1) == 0 && s.month < (1u << 13));
	check(s.dow != 0 && s.dow < (1u << 7));
	check(cron_parse(buf, &again, err, sizeof(err)) == 0);
	check(memcmp(&s, &again, sizeof(s)) == 0);

	n = cron_next(&s, &utc, FUZZ_START);
	check(n != -1);
	check(n > FUZZ_START && n % 60 == 0);
	tt = (time_t)n;
	check(gmtime_r(&tt, &tm) != NULL);
	check(cron_match(&s, &tm));
	/* Nothing matches between the start and the answer: spot-check the
	 * minute before it. */
	if (n - 60 > FUZZ_START) {
		tt = (time_t)(n - 60);
		gmtime_r(&tt, &tm);
		check(!cron_match(&s, &tm));
	}
	utc_next = n;
	n = cron_next(&s, &berlin, FUZZ_START);
	check(n == -1 || n > FUZZ_START);
	/* Berlin may never fire a schedule that UTC does: a wildcard-minute
	 * job whose only matching days are the spring-forward Sundays and
	 * whose only hour is the skipped 02:00 (minute "*", hour 2, the 31st
	 * of March, weekdays "*" stepped by 7: Sundays only, ANDed). A
	 * fixed-time job in the gap runs at the change, so it always fires;
	 * and the day UTC found may be the start day, already past in
	 * Berlin's later wall clock. */
	if (n == -1)
		check((!s.fixed && s.hour == (1u << 2)) ||
		    utc_next - FUZZ_START < 86400);
	return 0;
}
