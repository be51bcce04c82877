/*
 * The tool dispatcher. Every call passes here: the tool is looked up among
 * those that exist for the agent, its target is decided by the permission
 * engine, the decision is audited, and only then does the tool run. Results
 * are capped and redacted on their way back to the model.
 */
#include "tool.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "util.h"

#define TOOL_MAX_DYNAMIC	512

/* The native tools, in the order the model sees them. */
static const struct tool_def *const native_tools[] = {
	&tool_current_time,
	&tool_read_skill,
	&tool_read_file,
	&tool_write_file,
	&tool_run_bash,
	&tool_http_request,
	&tool_remember,
	&tool_recall,
	&tool_list_memories,
	&tool_forget,
	&tool_schedule,
	&tool_list_schedules,
	&tool_unschedule,
};

static const struct tool_def *dynamic_tools[TOOL_MAX_DYNAMIC];
static size_t ndynamic;

void
tool_register(const struct tool_def *def)
{
	if (ndynamic == TOOL_MAX_DYNAMIC) {
		log_warnx("tool %s: too many tools (limit %d); not added",
		    def->name, TOOL_MAX_DYNAMIC);
		return;
	}
	dynamic_tools[ndynamic++] = def;
}

void
tool_unregister_ctx(void *ctx)
{
	size_t j = 0;

	for (size_t i = 0; i < ndynamic; i++)
		if (dynamic_tools[i]->ctx != ctx)
			dynamic_tools[j++] = dynamic_tools[i];
	ndynamic = j;
}

static int
exists(const struct tool_def *d, const struct cfg *cfg)
{
	return d->exists == NULL || d->exists(cfg);
}

const struct tool_def *
tool_find(const struct cfg *cfg, const char *name)
{
	for (size_t i = 0; i < nitems(native_tools); i++)
		if (strcmp(native_tools[i]->name, name) == 0)
			return exists(native_tools[i], cfg) ? native_tools[i] :
			    NULL;
	for (size_t i = 0; i < ndynamic; i++)
		if (strcmp(dynamic_tools[i]->name, name) == 0)
			return exists(dynamic_tools[i], cfg) ? dynamic_tools[i] :
			    NULL;
	return NULL;
}

static void
add_schema(cJSON *arr, const struct tool_def *d)
{
	cJSON *t = cJSON_CreateObject();
	cJSON *schema = cJSON_Parse(d->input_schema);

	if (schema == NULL) {
		log_warnx("tool %s: bad input schema; not offered", d->name);
		cJSON_Delete(t);
		return;
	}
	cJSON_AddStringToObject(t, "name", d->name);
	cJSON_AddStringToObject(t, "description", d->description);
	cJSON_AddItemToObject(t, "input_schema", schema);
	cJSON_AddItemToArray(arr, t);
}

/* A tool that does not exist for the agent is not offered at all: no schema
 * is sent (SPEC section 3). */
cJSON *
tool_schemas(const struct cfg *cfg)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t i = 0; i < nitems(native_tools); i++)
		if (exists(native_tools[i], cfg))
			add_schema(arr, native_tools[i]);
	for (size_t i = 0; i < ndynamic; i++)
		if (exists(dynamic_tools[i], cfg))
			add_schema(arr, dynamic_tools[i]);
	return arr;
}

/* Take every secret value out, then cut the output at the agent's bound, on
 * a UTF-8 character boundary, and say how much was cut. Redaction comes
 * first: a secret straddling the cut would leave its head behind. */
static char *
shape_output(const struct cfg *cfg, const char *out, size_t len)
{
	size_t cap = (size_t)cfg->limits.tool_output;
	struct buf b;
	char *red;

	/* NUL bytes would cut the text short in JSON handling downstream. */
	buf_init(&b);
	buf_add(&b, out, len);
	for (size_t i = 0; i < b.len; i++)
		if (b.data[i] == '\0')
			b.data[i] = '?';
	red = redact_secrets(b.data != NULL ? b.data : "", &cfg->secret_values);
	len = strlen(red);
	if (len > cap) {
		size_t keep = cap;

		while (keep > 0 && ((unsigned char)red[keep] & 0xc0) == 0x80)
			keep--;
		buf_reset(&b);
		buf_add(&b, red, keep);
		buf_addf(&b, "\n[output truncated: %zu of %zu bytes shown]",
		    keep, len);
		free(red);
		red = buf_steal(&b);
	}
	buf_free(&b);
	return red;
}

void
tool_done(struct tool_call *tc, const char *output, size_t len, int is_error)
{
	char *shaped;

	if (tc->finished)
		return;
	tc->finished = 1;
	tc->cancel = NULL;
	shaped = shape_output(tc->cfg, output ? output : "", output ? len : 0);
	if (tc->on_done != NULL)
		tc->on_done(tc, shaped, strlen(shaped), is_error);
	free(shaped);
}

void
tool_fail(struct tool_call *tc, const char *fmt, ...)
{
	va_list ap;
	char msg[1024];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	tool_done(tc, msg, strlen(msg), 1);
}

int
tool_pick(const cJSON *input, const char *const *names, size_t n,
    const cJSON **got, char *why, size_t whylen)
{
	const cJSON *f;
	size_t i;

	if (!cJSON_IsObject(input)) {
		snprintf(why, whylen, "the input must be a JSON object");
		return -1;
	}
	for (i = 0; got != NULL && i < n; i++)
		got[i] = NULL;
	cJSON_ArrayForEach(f, input) {
		for (i = 0; i < n; i++)
			if (f->string != NULL && strcmp(f->string, names[i]) == 0)
				break;
		if (i == n) {
			snprintf(why, whylen, "unknown input field \"%.64s\"",
			    f->string ? f->string : "");
			return -1;
		}
		if (got != NULL)
			got[i] = f;
	}
	return 0;
}

int
tool_input(struct tool_call *tc, const char *const *names, size_t n,
    const cJSON **got)
{
	char why[128];

	if (tool_pick(tc->input, names, n, got, why, sizeof(why)) == 0)
		return 0;
	tool_fail(tc, "%s: %s", tc->def->name, why);
	return -1;
}

int
tool_authorize(struct tool_call *tc, enum perm_axis axis, const char *target,
    struct perm_result *res)
{
	perm_check(&tc->cfg->perm, axis, target, res);
	if (audit_decision(tc->run_id, tc->def->name, perm_axis_name(axis),
	    target, res->allowed, res->allowed ? NULL : res->reason) == -1) {
		res->allowed = 0;
		snprintf(res->reason, sizeof(res->reason), "the audit trail "
		    "cannot be written, so nothing is allowed");
	}
	return res->allowed;
}

/* A short, bounded description of the call for the audit record of tools
 * that have no axis. */
static char *
input_summary(const cJSON *input)
{
	char *s = cJSON_PrintUnformatted(input);
	char *out;

	if (s == NULL)
		return xstrdup("");
	if (strlen(s) > 512) {
		out = xasprintf("%.500s...", s);
		free(s);
		return out;
	}
	out = xstrdup(s);
	free(s);
	return out;
}

static void
deny(struct tool_call *tc, const char *reason)
{
	char *msg = xasprintf("permission denied: %s", reason);

	tc->denied = 1;

	tool_done(tc, msg, strlen(msg), 1);
	free(msg);
}

struct tool_call *
tool_invoke(const struct cfg *cfg, const char *run_id, const char *trigger,
    const char *conversation, const char *meta, const char *use_id,
    const char *name, cJSON *input,
    void (*done)(struct tool_call *, const char *, size_t, int), void *owner)
{
	struct tool_call *tc = xcalloc(1, sizeof(*tc));
	const struct tool_def *def = tool_find(cfg, name);
	static const struct tool_def unknown = { .name = "unknown" };

	tc->cfg = cfg;
	tc->run_id = run_id;
	tc->use_id = use_id;
	tc->trigger = trigger;
	tc->conversation = conversation;
	tc->meta = meta;
	tc->input = input;
	tc->on_done = done;
	tc->owner = owner;
	tc->timeout_ms = cfg->limits.tool_timeout_ms;
	if (def == NULL) {
		/* A tool that does not exist is a denial, audited like any
		 * other: the model may have been told to try it. */
		char reason[PERM_REASON_MAX];

		tc->def = &unknown;
		snprintf(reason, sizeof(reason), "tool \"%.100s\" does not exist "
		    "for this agent", name);
		if (audit_decision(run_id, name, NULL, name, 0, reason) == -1)
			snprintf(reason, sizeof(reason), "the audit trail cannot "
			    "be written, so nothing is allowed");
		deny(tc, reason);
		return tc;
	}
	tc->def = def;
	if (!cJSON_IsObject(input)) {
		tool_fail(tc, "the input of %s must be a JSON object", name);
		return tc;
	}
	if (def->axis != TOOL_NO_AXIS) {
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(input,
		    def->target_key);

		if (!cJSON_IsString(t) || t->valuestring == NULL) {
			tool_fail(tc, "%s needs \"%s\" as a string", name,
			    def->target_key);
			return tc;
		}
		if (!tool_authorize(tc, (enum perm_axis)def->axis,
		    t->valuestring, &tc->perm)) {
			deny(tc, tc->perm.reason);
			return tc;
		}
	} else {
		char *sum = input_summary(input), reason[PERM_REASON_MAX];
		int no = def->refuse != NULL &&
		    def->refuse(tc, reason, sizeof(reason));
		int rc = audit_decision(run_id, name, NULL, sum, !no,
		    no ? reason : NULL);

		free(sum);
		if (rc == -1) {
			deny(tc, "the audit trail cannot be written, so nothing "
			    "is allowed");
			return tc;
		}
		if (no) {
			deny(tc, reason);
			return tc;
		}
	}
	def->call(tc);
	return tc;
}

void
tool_call_free(struct tool_call *tc)
{
	free(tc);
}
