/* Schedules the agent made for itself (the schedule tools, `schedules: true`):
 * a prompt to run once at a time, or again every interval. They live in the
 * state database (table `schedules`); one loop timer waits for the earliest,
 * and a due entry becomes a run with trigger "schedule".
 *
 * A schedule belongs to the conversation of the run that made it, or, when
 * that run had none, to that run: the tools see and remove only their own
 * scope's (struct sched_scope), so one chat cannot read or cancel another's
 * plans, and each scope has its own SCHED_SCOPE_MAX slots under the agent's
 * SCHED_MAX. */
#ifndef AF_SCHEDULE_H
#define AF_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "config.h"

#define SCHED_SCOPE_MAX		20			/* per scope */
#define SCHED_MAX		100			/* per agent */
#define SCHED_PROMPT_MAX	(16 << 10)		/* bytes */
#define SCHED_MIN_DELAY_MS	1000			/* `in` */
#define SCHED_MIN_EVERY_MS	60000			/* `every` */
#define SCHED_HORIZON_MS	(366LL * 86400 * 1000)	/* how far ahead */
#define SCHED_ID_LEN		20			/* "s-" + 16 hex + NUL */
#define SCHED_TRIGGER		"schedule"

/* Start firing (after the triggers started, the journal replayed): what
 * fell due while af was down fires now, once. Does nothing unless the config
 * has `schedules: true`. */
int sched_start(const struct cfg *, char *err, size_t errlen);
/* Stop firing (af is stopping). */
void sched_stop(void);

/*
 * Whose schedules a caller sees. A run in a conversation: the conversation's.
 * A run without one: those it made, and the repeating one it was fired by
 * (so a "check every hour" run can stop itself), nothing else.
 */
struct sched_scope {
	const char	*conv;		/* the run's conversation, or NULL */
	const char	*run;		/* the run's id */
	/* The run's trigger and meta: sched_add keeps them so that the
	 * schedule's answers go back where it was made. May be NULL. */
	const char	*trigger;
	const char	*meta;
};

/* Add a schedule in the scope: first due at due_ms (Unix ms), then every
 * every_ms (0: once); its runs belong to the scope's conversation. -1 with
 * err when it is refused (the scope or the agent full, out of range) or
 * cannot be stored. */
int sched_add(const struct sched_scope *, const char *prompt, int64_t due_ms,
    int64_t every_ms, char *id, size_t idlen, char *err, size_t errlen);
/* The scope's [{"id","prompt","next","every_s","fired"}], soonest first;
 * NULL on error. */
cJSON *sched_list(const struct sched_scope *);
/* 1 removed, 0 no such id in the scope (another scope's is not touched),
 * -1 on error. */
int sched_remove(const struct sched_scope *, const char *id);
/* Entries stored, in every scope; -1 on error. */
int sched_count(void);

/* "2026-12-02T03:00:00Z" (seconds, fraction and the offset's form are
 * optional parts: "+00:00", "+02:00" are accepted) into Unix ms; -1 when
 * malformed. */
int sched_parse_time(const char *, int64_t *ms);
/* "90s", "10m", "2h", "1d" (and "500ms") into ms; -1 when malformed. */
int64_t sched_parse_duration(const char *);

#endif
