/* The cron trigger's pure parts: the five-field schedule parser, the matcher,
 * time zone offsets and the next-fire computation. They touch neither the
 * loop nor the engine, so the unit test and the fuzzer link them alone
 * (cron_sched.c); the trigger itself is in cron.c. */
#ifndef AF_CRON_H
#define AF_CRON_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define CRON_MAX_SCHEDULE	256	/* longer schedules are refused */
#define CRON_SEARCH_YEARS	10	/* past this, a schedule never fires */
#define CRON_ZONEINFO		"/usr/share/zoneinfo"

/*
 * A parsed schedule: one bit per allowed value. dom_star and dow_star say
 * whether day-of-month and day-of-week began with '*' (the classic rule: when
 * neither does, a day matching either fires; otherwise both must match).
 * fixed: neither minute nor hour began with '*'; such a job runs once when a
 * daylight-saving change repeats its hour and runs at the change when it
 * skips it; the others follow the wall clock.
 */
struct cron_sched {
	uint64_t	minute;		/* bits 0..59 */
	uint32_t	hour;		/* bits 0..23 */
	uint32_t	dom;		/* bits 1..31 */
	uint16_t	month;		/* bits 1..12 */
	uint8_t		dow;		/* bits 0..6, Sunday 0 (7 folds into 0) */
	int		dom_star;
	int		dow_star;
	int		fixed;
};

/*
 * Parse five whitespace-separated fields (minute hour day-of-month month
 * day-of-week), each a comma list of '*', N or N-M, optionally followed by
 * /STEP (N/STEP runs from N to the field's maximum). A schedule whose days
 * can never occur (30 2 * with '*' weekdays) is refused too. 0, or -1 with
 * a reason in err.
 */
int cron_parse(const char *spec, struct cron_sched *, char *err,
    size_t errlen);

/* Does a wall-clock time (broken down, tm_wday and tm_mon as in struct tm)
 * match the schedule? Seconds are ignored. */
int cron_match(const struct cron_sched *, const struct tm *);

/*
 * A time zone as a table of UTC offset changes: off[i] holds from at[i]
 * on, off0 before at[0]. An empty table is UTC.
 */
struct cron_tz {
	int64_t		*at;
	int32_t		*off;
	size_t		 n;
	int32_t		 off0;
};

/*
 * Build the table for an IANA name ("Europe/Berlin") from the system's
 * zoneinfo, by asking the C library under a temporary TZ. TZ is process
 * global, so this may only run while af has a single thread (the triggers'
 * prepare step, the unit tests); TZ is restored before it returns. NULL or
 * "UTC" gives the empty table. 0, or -1 with a reason in err.
 */
int cron_tz_load(const char *name, struct cron_tz *, char *err,
    size_t errlen);
void cron_tz_free(struct cron_tz *);
/* The UTC offset in seconds at an instant. */
int32_t cron_tz_offset(const struct cron_tz *, int64_t t);

/*
 * The first whole minute strictly after `after` (unix seconds) at which the
 * schedule fires in that time zone, or -1 when none comes within
 * CRON_SEARCH_YEARS.
 */
int64_t cron_next(const struct cron_sched *, const struct cron_tz *,
    int64_t after);

#endif
