/* The trigger table and each trigger's state for the status port. */
#include "trigger.h"

#include <stdio.h>
#include <string.h>

#include "util.h"

/* Every trigger af knows, like tmux's command table. */
static const struct trigger_def *const trigger_defs[] = {
	&trigger_webhook,
	&trigger_telegram,
	&trigger_imap,
	&trigger_cron,
	&trigger_github,
	&trigger_schedule,
	&trigger_discord,
};

struct trig_slot {
	enum trig_state	state;
	char		error[256];
	int64_t		since_ms;
	int		set;
};

static struct trig_slot slots[nitems(trigger_defs)];
static const struct cfg *trig_cfg;

static int
slot_index(const char *name)
{
	for (size_t i = 0; i < nitems(trigger_defs); i++)
		if (strcmp(trigger_defs[i]->name, name) == 0)
			return (int)i;
	return -1;
}

const struct trigger_def *
trig_find(const char *name)
{
	int i = slot_index(name);

	return i == -1 ? NULL : trigger_defs[i];
}

const struct trigger_def *
trig_answerer(const char *name, const struct cfg *cfg)
{
	const struct trigger_def *t = trig_find(name);

	if (t == NULL || !t->outbox || t->deliver == NULL || cfg == NULL ||
	    !t->enabled(cfg))
		return NULL;
	return t;
}

const char *
trig_state_name(enum trig_state s)
{
	static const char *const names[] = { "connecting", "up", "backoff",
	    "down" };

	return names[s];
}

void
trig_set_state(const char *name, enum trig_state s, const char *error)
{
	int i = slot_index(name);

	if (i == -1)
		return;
	if (!slots[i].set || slots[i].state != s) {
		slots[i].since_ms = now_ms();
		if (s == TRIG_DOWN || s == TRIG_BACKOFF)
			log_warnx("trigger %s: %s%s%s", name, trig_state_name(s),
			    error ? ": " : "", error ? error : "");
		else
			log_info("trigger %s: %s", name, trig_state_name(s));
	}
	slots[i].set = 1;
	slots[i].state = s;
	if (error != NULL)
		snprintf(slots[i].error, sizeof(slots[i].error), "%s", error);
	else if (s == TRIG_UP)
		slots[i].error[0] = '\0';
}

int
trig_any_down(void)
{
	for (size_t i = 0; i < nitems(trigger_defs); i++)
		if (slots[i].set && slots[i].state == TRIG_DOWN)
			return 1;
	return 0;
}

cJSON *
trig_status_json(const struct cfg *cfg)
{
	cJSON *all = cJSON_CreateObject();

	for (size_t i = 0; i < nitems(trigger_defs); i++) {
		const struct trigger_def *t = trigger_defs[i];
		cJSON *o;

		if (!t->enabled(cfg))
			continue;
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "state", trig_state_name(
		    slots[i].set ? slots[i].state : TRIG_CONNECTING));
		if (slots[i].error[0])
			cJSON_AddStringToObject(o, "last_error", slots[i].error);
		else
			cJSON_AddNullToObject(o, "last_error");
		if (t->status != NULL)
			t->status(o);
		cJSON_AddItemToObject(all, t->name, o);
	}
	return all;
}

int
trig_prepare_all(const struct cfg *cfg, char *err, size_t errlen)
{
	trig_cfg = cfg;
	for (size_t i = 0; i < nitems(trigger_defs); i++) {
		const struct trigger_def *t = trigger_defs[i];

		if (!t->enabled(cfg) || t->prepare == NULL)
			continue;
		trig_set_state(t->name, TRIG_CONNECTING, NULL);
		if (t->prepare(cfg, err, errlen) == -1)
			return -1;
	}
	return 0;
}

int
trig_start_all(const struct cfg *cfg, char *err, size_t errlen)
{
	for (size_t i = 0; i < nitems(trigger_defs); i++) {
		const struct trigger_def *t = trigger_defs[i];

		if (!t->enabled(cfg) || t->start == NULL)
			continue;
		if (t->start(cfg, err, errlen) == -1)
			return -1;
	}
	return 0;
}

void
trig_stop_all(void)
{
	for (size_t i = 0; i < nitems(trigger_defs); i++) {
		const struct trigger_def *t = trigger_defs[i];

		if (trig_cfg != NULL && t->enabled(trig_cfg) && t->stop != NULL)
			t->stop();
	}
}

void
trig_free_all(void)
{
	for (size_t i = 0; i < nitems(trigger_defs); i++) {
		const struct trigger_def *t = trigger_defs[i];

		if (trig_cfg != NULL && t->enabled(trig_cfg) && t->free != NULL)
			t->free();
	}
}

const char *
trig_error_note(const char *status)
{
	if (strcmp(status, "error_timeout") == 0)
		return "Sorry, that took too long and was stopped. Please try "
		    "again.";
	if (strcmp(status, "error_max_steps") == 0)
		return "Sorry, I could not finish that within my step limit.";
	if (strcmp(status, "error_provider") == 0)
		return "Sorry, the model service is not answering right now. "
		    "Please try again later.";
	if (strcmp(status, "error_max_cost") == 0)
		return "Sorry, that would cost more than I am allowed to spend.";
	return "Sorry, something went wrong on my side. Please try again "
	    "later.";
}
