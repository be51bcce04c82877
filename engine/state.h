/* Durable state: one SQLite database in the data folder (af.db, WAL mode):
 * the journal of accepted events, trigger cursors, conversation history. A
 * write the daemon acknowledges is committed first. */
#ifndef AF_STATE_H
#define AF_STATE_H

#include <cjson/cJSON.h>
#include <sqlite3.h>
#include <stdint.h>

#define STATE_HISTORY_MAX	20	/* messages kept per conversation */

/*
 * What a run keeps for itself alone, the memory set of a run without a
 * conversation (tools/memory.c), is table memory's scope STATE_RUN_SCOPE +
 * the run id. Nothing can read it once the run is over, so it goes with the
 * run: state_journal_done removes it with the event, and state_open removes
 * the sets of runs that are not pending (af stopped between the two). A run
 * left pending keeps its set for its replay, which has the same id.
 */
#define STATE_RUN_SCOPE		"run:"

int state_open(const char *data_dir, char *err, size_t errlen);
void state_close(void);
sqlite3 *state_db(void);
/* Non-NULL once a commit failed (disk full, fsync): the reason. */
const char *state_failed(void);

/* The journal. */
int state_journal_add(const char *id, const char *trigger, const char *conv,
    const char *prompt, const char *meta);
/* The event is settled: status recorded, its run's own memory set removed. */
int state_journal_done(const char *id, const char *status);
/* Group commit: writes between begin and commit share one sync. */
int state_tx_begin(void);
int state_tx_commit(void);	/* -1: rolled back, and state_failed is set */
void state_tx_rollback(void);
typedef void (*state_journal_fn)(const char *id, const char *trigger,
    const char *conv, const char *prompt, const char *meta, void *arg);
/* Every event accepted but not done, oldest first. */
int state_journal_pending(state_journal_fn, void *arg);

/*
 * The outbox: the answer of a run whose trigger sends it somewhere (a chat,
 * a mail), kept from the run's end until the trigger has sent it or given
 * up, so that a crash or a stop in between (a reply held by a rate limit,
 * say) resends it at the next start instead of losing it.
 */
int state_outbox_add(const char *id, const char *trigger, const char *conv,
    const char *meta, const char *status, const char *reply);
int state_outbox_del(const char *id);
typedef void (*state_outbox_fn)(const char *id, const char *trigger,
    const char *conv, const char *meta, const char *status,
    const char *reply, void *arg);
/* Every answer not yet sent, oldest first. */
int state_outbox_each(state_outbox_fn, void *arg);

/* Trigger cursors (Telegram offset, IMAP UIDVALIDITY/UID, ...). */
int state_cursor_get(const char *key, char *out, size_t outlen);	/* 1 found */
int state_cursor_set(const char *key, const char *value);

/* Conversation history: role "user" or "assistant", plain text. */
int state_history_add(const char *conv, const char *role, const char *text);
/* Appends the last STATE_HISTORY_MAX messages to out (neutral model shape). */
int state_history_get(const char *conv, cJSON *out);
int state_history_clear(const char *conv);

/* Run history for the status server's GET /runs. */
int state_run_record(const char *id, const char *trigger, const char *status,
    int steps, long tokens_in, long tokens_out, double cost_usd,
    int64_t started_ms, const char *error);
/* Newest first: [{"run","trigger","status","steps","tokens_in",...}]. */
cJSON *state_runs_list(int limit, int offset);

#endif
