/* The audit trail (SPEC section 4): JSON Lines, one object per decision and per
 * run event, appended with one write(2) before the audited action proceeds. A
 * failed write refuses the action (fail closed). */
#ifndef AF_AUDIT_H
#define AF_AUDIT_H

#include <cjson/cJSON.h>

#include "util.h"

/* Open (create) the trail. secrets: values that must never be written. */
int audit_open(const char *path, const char *agent,
    const struct strlist *secrets, char *err, size_t errlen);
void audit_close(void);

/* A record with ts, agent, run and event filled in; add fields, then emit. */
cJSON *audit_new(const char *run, const char *event);
/* Redact, serialize and append one record; frees it. -1 when it could not be
 * written whole: the caller must not carry out the action. */
int audit_emit(cJSON *rec);

/* One permission decision: {"event":"tool","tool":..,"axis":..,"target":..,
 * "decision":"allow"|"deny"[,"reason":..]}. axis may be NULL. */
int audit_decision(const char *run, const char *tool, const char *axis,
    const char *target, int allowed, const char *reason);

/* fdatasync the trail if anything was written since the last call; the loop
 * calls it on a short timer (group commit). A failure is sticky: see
 * audit_failed. */
int audit_sync(void);
/* Non-NULL once a write or sync failed: the reason. New events are refused. */
const char *audit_failed(void);

/* Call fn for each run_end record in the last max bytes of the trail at path
 * (run id and status); used at start to settle runs that ended just before a
 * crash. Missing file: nothing. */
int audit_tail_run_ends(const char *path, size_t max,
    void (*fn)(const char *run, const char *status, void *), void *arg);

#endif
