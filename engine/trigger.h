/* The trigger interface. A trigger knows nothing about tools: it turns outside
 * events into run requests (run_submit) and gets each run's outcome back in
 * deliver(). One file per trigger in triggers/, listed in trigger.c. */
#ifndef AF_TRIGGER_H
#define AF_TRIGGER_H

#include <cjson/cJSON.h>

#include "config.h"

enum trig_state { TRIG_CONNECTING, TRIG_UP, TRIG_BACKOFF, TRIG_DOWN };

struct run_outcome {
	const char	*run_id;
	const char	*trigger;
	const char	*meta;		/* what the trigger attached (JSON text) */
	const char	*conversation;
	const char	*status;	/* "ok", "error_max_steps", "error_timeout",
					   "error_provider", "error_max_cost",
					   "error_internal" */
	const char	*reply;		/* the model's final text, may be "" */
	const char	*error;		/* NULL when ok */
	int		 steps;
	long		 in_tokens;
	long		 out_tokens;
	double		 cost_usd;
	/* Handed over from the outbox after a restart: the run was not one
	 * of this process (a chat shows no typing for it). */
	int		 again;
};

struct trigger_def {
	const char	*name;
	int		(*enabled)(const struct cfg *);
	/* Bind listeners, open files: runs before the sandbox is applied. */
	int		(*prepare)(const struct cfg *, char *err, size_t errlen);
	/* Start taking events: runs after the sandbox, on the loop. */
	int		(*start)(const struct cfg *, char *err, size_t errlen);
	/* Stop taking events (shutdown begins); in-flight replies may finish. */
	void		(*stop)(void);
	/* A run this trigger started has ended. May be NULL. */
	void		(*deliver)(const struct run_outcome *);
	/* deliver() sends the answer on: it is kept in the outbox until the
	 * trigger calls run_delivered, and delivered again after a restart
	 * when it never was. */
	int		 outbox;
	/* Add trigger-specific fields to its /status object. May be NULL. */
	void		(*status)(cJSON *obj);
	/* Free everything (after the loop ended). May be NULL. */
	void		(*free)(void);
};

/* What a person sees when a chat trigger's run failed: short, and nothing
 * internal (status is the run_outcome's). */
const char *trig_error_note(const char *status);

/* State shown on the status port: connecting, up, backoff, down (with why). */
void trig_set_state(const char *name, enum trig_state, const char *error);
const char *trig_state_name(enum trig_state);
/* 1 when some trigger is down past its retries (healthz 503). */
int trig_any_down(void);
/* {"webhook":{"state":"up","last_error":null,...},...} */
cJSON *trig_status_json(const struct cfg *);

/* Lifecycle over every enabled trigger. */
int trig_prepare_all(const struct cfg *, char *err, size_t errlen);
int trig_start_all(const struct cfg *, char *err, size_t errlen);
void trig_stop_all(void);
void trig_free_all(void);
const struct trigger_def *trig_find(const char *name);
/* The trigger named name when it can take an answer from the outbox now
 * (it sends answers on and is enabled in cfg), else NULL. */
const struct trigger_def *trig_answerer(const char *name,
    const struct cfg *cfg);

extern const struct trigger_def trigger_webhook;
extern const struct trigger_def trigger_telegram;
extern const struct trigger_def trigger_discord;
extern const struct trigger_def trigger_imap;
extern const struct trigger_def trigger_cron;
extern const struct trigger_def trigger_github;
extern const struct trigger_def trigger_schedule;

#endif
