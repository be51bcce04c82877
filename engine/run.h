/* Runs: one trigger event becomes one run (system prompt, skills index, the
 * event's prompt, then model steps and tool calls until the model stops,
 * max_steps is hit or the run times out). Runs are concurrent up to
 * limits.concurrent_runs; extra events wait in a bounded queue. Every accepted
 * event is journaled in the state database first. */
#ifndef AF_RUN_H
#define AF_RUN_H

#include <stdint.h>

#include "config.h"
#include "trigger.h"

#define RUN_ID_LEN	32	/* "r-" + 24 hex + NUL, with room */

struct run_request {
	const char	*trigger;	/* the trigger_def name */
	const char	*prompt;	/* the rendered user message */
	const char	*conversation;	/* history and ordering key, or NULL */
	const char	*meta;		/* JSON text given back in deliver(), or NULL */
};

struct run_stats {
	uint64_t	runs_total;
	uint64_t	runs_ok;
	uint64_t	runs_failed;
	uint64_t	tool_calls;
	uint64_t	denials;
	uint64_t	tokens_in;
	uint64_t	tokens_out;
	uint64_t	refused;	/* events refused: queue full, stopping */
	long		inflight;
	long		queued;
};

int run_init(const struct cfg *);
/* Replay the journal's unfinished events (after a crash or restart). */
int run_recover(void);
/*
 * Accept an event: journaled and committed before this returns 0, with the run
 * id in id. -1 with errno: EAGAIN queue full, ESHUTDOWN stopping, EIO the
 * journal or the audit trail cannot be written.
 */
int run_submit(const struct run_request *, char *id, size_t idlen);
/*
 * The same, with group commit: events accepted in one turn of the loop share
 * one sync of the database. 0: cb(arg, id, 0) follows once the event is
 * committed, or cb(arg, id, EIO) if the commit failed; -1 with errno as
 * run_submit, and no callback. The request is copied.
 */
typedef void (*run_accept_cb)(void *arg, const char *id, int err);
int run_submit_async(const struct run_request *, run_accept_cb, void *arg);
const struct run_stats *run_stats(void);
/* Stop starting runs; cancel what is still running when drain ends. */
void run_stop_accepting(void);
void run_cancel_all(const char *why);
long run_inflight(void);
/* /reset of conv: the runs in it now in flight add nothing to the
 * history the reset clears (runs queued load it afresh when they start). */
void run_forget_history(const char *conv);
/* An outbox trigger has sent the answer of run id, or given up on it. */
void run_delivered(const char *id);
/* Hand every answer still in the outbox to its trigger again (at start,
 * once the triggers run). */
int run_outbox_replay(void);
void run_shutdown(void);

#endif
