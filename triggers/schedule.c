/* The "schedule" trigger: the home of the runs the agent's own schedules
 * start (engine/schedule.c fires them). Nobody waits for such a run's
 * answer, so delivering it means writing it to the log; the audit trail and
 * GET /runs hold the rest. */
#include <cjson/cJSON.h>

#include "config.h"
#include "schedule.h"
#include "trigger.h"
#include "util.h"

static int
st_enabled(const struct cfg *cfg)
{
	return cfg->schedules;
}

static int
st_start(const struct cfg *cfg, char *err, size_t errlen)
{
	trig_set_state(SCHED_TRIGGER, TRIG_UP, NULL);
	return 0;
}

static void
st_deliver(const struct run_outcome *o)
{
	if (o->error == NULL)
		log_info("schedule: run %s ended ok: %.200s", o->run_id,
		    o->reply != NULL ? o->reply : "");
	else
		log_warnx("schedule: run %s ended %s: %.200s", o->run_id,
		    o->status, o->error);
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
	.status = st_status,
};
