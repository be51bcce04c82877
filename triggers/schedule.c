/* The "schedule" trigger: the home of the runs the agent's own schedules
 * start (engine/schedule.c fires them). A schedule made in a chat or a mail
 * thread answers there: the run's meta carries the trigger and meta of the
 * run that made it, and the answer is handed to that trigger (when it sends
 * answers on and is still on). Any other answer is written to the log; the
 * audit trail and GET /runs hold the rest. */
#include <string.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "run.h"
#include "schedule.h"
#include "trigger.h"
#include "util.h"

static const struct cfg *st_cfg;

static int
st_enabled(const struct cfg *cfg)
{
	return cfg->schedules;
}

static int
st_start(const struct cfg *cfg, char *err, size_t errlen)
{
	st_cfg = cfg;
	trig_set_state(SCHED_TRIGGER, TRIG_UP, NULL);
	return 0;
}

/* The trigger the answer goes back to, with its meta, or NULL. */
static const struct trigger_def *
origin(const cJSON *meta, const char **origin_meta)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(meta, "origin");
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "trigger");
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "meta");
	const struct trigger_def *d;

	if (!cJSON_IsString(t) || !cJSON_IsString(m) ||
	    strcmp(t->valuestring, SCHED_TRIGGER) == 0 ||
	    (d = trig_answerer(t->valuestring, st_cfg)) == NULL)
		return NULL;
	*origin_meta = m->valuestring;
	return d;
}

static void
st_deliver(const struct run_outcome *o)
{
	const struct trigger_def *d = NULL;
	const char *om = NULL;
	cJSON *meta = o->meta != NULL ? cJSON_Parse(o->meta) : NULL;

	if (meta != NULL && (d = origin(meta, &om)) != NULL) {
		struct run_outcome fwd = *o;

		/* That trigger takes the answer out of the outbox once it
		 * is sent, under this run's id. */
		fwd.meta = om;
		log_info("schedule: run %s answers through %s", o->run_id,
		    d->name);
		d->deliver(&fwd);
	} else {
		if (o->error == NULL)
			log_info("schedule: run %s ended ok: %.200s", o->run_id,
			    o->reply != NULL ? o->reply : "");
		else
			log_warnx("schedule: run %s ended %s: %.200s",
			    o->run_id, o->status, o->error);
		run_delivered(o->run_id);
	}
	cJSON_Delete(meta);
}

static void
st_status(cJSON *obj)
{
	int n = sched_count();

	cJSON_AddNumberToObject(obj, "schedules", n < 0 ? 0 : n);
}

const struct trigger_def trigger_schedule = {
	.name = SCHED_TRIGGER,
	.enabled = st_enabled,
	.start = st_start,
	.deliver = st_deliver,
	.outbox = 1,
	.status = st_status,
};
