/*
 * Schedule tools: schedule, list_schedules, unschedule. They exist only with
 * `schedules: true`. The agent plans its own later runs: a prompt to run once
 * (`at` a time or `in` a delay) or repeatedly (`every`). The engine
 * (engine/schedule.c) stores and fires them; a scheduled run belongs to the
 * conversation of the run that made it, so it sees that conversation's
 * history and memories.
 *
 * The tools see only the calling run's scope (struct sched_scope): its
 * conversation's schedules, or, for a run without one, those it made and the
 * one it was fired by. A prompt is a user's words, and an id that leaked
 * must not let another chat read or cancel it. Each scope may hold
 * SCHED_SCOPE_MAX, the agent SCHED_MAX in all.
 *
 * No cron expressions: one-shot times and fixed intervals cover what an
 * agent asks for ("remind me in 10 minutes", "check every hour"), and cron
 * lives in the config, where a person writes it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"
#include "tool.h"
#include "util.h"

/* The schedule tool's description states both bounds to the model. */
_Static_assert(SCHED_SCOPE_MAX == 20 && SCHED_MAX == 100,
    "tool_schedule's description names the schedule bounds");

static int
sc_exists(const struct cfg *cfg)
{
	return cfg->schedules;
}

/* The optional string field; NULL when absent, -1 in *bad when present but
 * not a string. */
static const char *
opt_str(struct tool_call *tc, const char *field, int *bad)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(tc->input, field);

	if (v == NULL)
		return NULL;
	if (!cJSON_IsString(v) || v->valuestring == NULL) {
		tool_fail(tc, "%s needs \"%s\" as a string", tc->def->name,
		    field);
		*bad = 1;
		return NULL;
	}
	return v->valuestring;
}

static void
call_scope(const struct tool_call *tc, struct sched_scope *scope)
{
	scope->conv = tc->conversation;
	scope->run = tc->run_id;
	scope->trigger = tc->trigger;
	scope->meta = tc->meta;
}

/* When the first run is due: from at, in or (alone) every. -1 after failing
 * the call. */
static int
first_due(struct tool_call *tc, const char *at, const char *in,
    int64_t every, int64_t now, int64_t *due)
{
	int64_t d;

	if (at != NULL && in != NULL) {
		tool_fail(tc, "give either \"at\" or \"in\", not both");
		return -1;
	}
	if (at != NULL) {
		if (sched_parse_time(at, due) == -1) {
			tool_fail(tc, "at: \"%.64s\" is not an ISO 8601 time "
			    "such as 2026-12-02T03:00:00Z", at);
			return -1;
		}
		if (*due <= now) {
			tool_fail(tc, "at: %.64s is in the past", at);
			return -1;
		}
	} else if (in != NULL) {
		if ((d = sched_parse_duration(in)) == -1 ||
		    d < SCHED_MIN_DELAY_MS) {
			tool_fail(tc, "in: \"%.32s\" is not a delay of at least "
			    "1s such as 90s, 10m, 2h or 1d", in);
			return -1;
		}
		if (d > SCHED_HORIZON_MS) {
			tool_fail(tc, "a schedule may start at most 366 days "
			    "ahead");
			return -1;
		}
		*due = now + d;
	} else if (every > 0)
		*due = now + every;
	else {
		tool_fail(tc, "give \"at\" (a time), \"in\" (a delay) or "
		    "\"every\" (an interval)");
		return -1;
	}
	if (*due - now > SCHED_HORIZON_MS) {
		tool_fail(tc, "a schedule may start at most 366 days ahead");
		return -1;
	}
	return 0;
}

static void
schedule_call(struct tool_call *tc)
{
	static const char *const known[] = { "prompt", "at", "in", "every" };
	const char *prompt, *at, *in, *every_s;
	struct sched_scope scope;
	char id[SCHED_ID_LEN], err[256], iso[32], out[512];
	int64_t now = now_ms(), due, every = 0;
	int bad = 0, n;

	if (tool_input(tc, known, nitems(known), NULL) == -1)
		return;
	prompt = opt_str(tc, "prompt", &bad);
	at = opt_str(tc, "at", &bad);
	in = opt_str(tc, "in", &bad);
	every_s = opt_str(tc, "every", &bad);
	if (bad)
		return;
	if (prompt == NULL || prompt[0] == '\0' ||
	    strlen(prompt) > SCHED_PROMPT_MAX) {
		tool_fail(tc, "prompt must be a string of 1 to %d bytes",
		    SCHED_PROMPT_MAX);
		return;
	}
	if (every_s != NULL && ((every = sched_parse_duration(every_s)) == -1 ||
	    every < SCHED_MIN_EVERY_MS || every > SCHED_HORIZON_MS)) {
		tool_fail(tc, "every: \"%.32s\" is not an interval from 1m to "
		    "366d such as 15m, 1h or 1d", every_s);
		return;
	}
	if (first_due(tc, at, in, every, now, &due) == -1)
		return;
	call_scope(tc, &scope);
	if (sched_add(&scope, prompt, due, every, id, sizeof(id), err,
	    sizeof(err)) == -1) {
		tool_fail(tc, "%s", err);
		return;
	}
	fmt_time_iso(due, iso, sizeof(iso));
	if (every > 0)
		n = snprintf(out, sizeof(out), "scheduled %s: first run at %s, "
		    "then every %s", id, iso, every_s);
	else
		n = snprintf(out, sizeof(out), "scheduled %s: runs once at %s",
		    id, iso);
	tool_done(tc, out, (size_t)n, 0);
}

static void
list_call(struct tool_call *tc)
{
	struct sched_scope scope;
	cJSON *arr, *out;
	char *text;

	if (tc->input->child != NULL) {
		tool_fail(tc, "list_schedules takes no input");
		return;
	}
	call_scope(tc, &scope);
	if ((arr = sched_list(&scope)) == NULL) {
		tool_fail(tc, "schedules cannot be read right now");
		return;
	}
	out = cJSON_CreateObject();
	cJSON_AddNumberToObject(out, "count", cJSON_GetArraySize(arr));
	cJSON_AddNumberToObject(out, "max", SCHED_SCOPE_MAX);
	cJSON_AddItemToObject(out, "schedules", arr);
	if ((text = cJSON_PrintUnformatted(out)) == NULL)
		fatalx("schedule: out of memory");
	cJSON_Delete(out);
	tool_done(tc, text, strlen(text), 0);
	cJSON_free(text);
}

static void
unschedule_call(struct tool_call *tc)
{
	static const char *const known[] = { "id" };
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(tc->input, "id");
	struct sched_scope scope;
	char out[128];
	int n;

	if (tool_input(tc, known, nitems(known), NULL) == -1)
		return;
	if (!cJSON_IsString(id) || id->valuestring == NULL ||
	    strlen(id->valuestring) >= SCHED_ID_LEN) {
		tool_fail(tc, "unschedule needs \"id\" as a schedule id such as "
		    "s-0123456789abcdef");
		return;
	}
	call_scope(tc, &scope);
	/* Another scope's id answers like one that never existed. */
	switch (sched_remove(&scope, id->valuestring)) {
	case 1:
		n = snprintf(out, sizeof(out), "removed %s", id->valuestring);
		tool_done(tc, out, (size_t)n, 0);
		break;
	case 0:
		tool_fail(tc, "there is no schedule %s (list_schedules shows "
		    "them)", id->valuestring);
		break;
	default:
		tool_fail(tc, "schedules cannot be changed right now");
		break;
	}
}

const struct tool_def tool_schedule = {
	.name = "schedule",
	.description = "Plan a later run of this agent with the given prompt: "
	    "once, at a time (\"at\": ISO 8601, e.g. 2026-12-02T03:00:00Z) or "
	    "after a delay (\"in\": 90s, 10m, 2h, 1d; at least 1s); or "
	    "repeatedly (\"every\": 15m, 1h, 1d; at least 1m), starting at "
	    "\"at\"/\"in\" or one interval from now. At most 20 schedules in "
	    "this conversation (100 for the whole agent), 366 days ahead. The "
	    "run belongs to this conversation; its answer is not sent to "
	    "anyone, so do what must be done with tools.",
	.input_schema = "{\"type\":\"object\",\"properties\":{"
	    "\"prompt\":{\"type\":\"string\",\"minLength\":1},"
	    "\"at\":{\"type\":\"string\"},"
	    "\"in\":{\"type\":\"string\"},"
	    "\"every\":{\"type\":\"string\"}},"
	    "\"required\":[\"prompt\"],\"additionalProperties\":false}",
	.axis = TOOL_NO_AXIS,
	.exists = sc_exists,
	.call = schedule_call,
};

const struct tool_def tool_list_schedules = {
	.name = "list_schedules",
	.description = "This conversation's schedules, soonest first: id, "
	    "prompt (shortened), next run time and interval. A run without a "
	    "conversation sees the ones it made and the one that started it.",
	.input_schema = "{\"type\":\"object\",\"properties\":{},"
	    "\"additionalProperties\":false}",
	.axis = TOOL_NO_AXIS,
	.exists = sc_exists,
	.call = list_call,
};

const struct tool_def tool_unschedule = {
	.name = "unschedule",
	.description = "Remove one of this conversation's schedules by its id "
	    "(from schedule or list_schedules).",
	.input_schema = "{\"type\":\"object\",\"properties\":{"
	    "\"id\":{\"type\":\"string\"}},"
	    "\"required\":[\"id\"],\"additionalProperties\":false}",
	.axis = TOOL_NO_AXIS,
	.exists = sc_exists,
	.call = unschedule_call,
};
