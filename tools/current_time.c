/* current_time: the wall clock, for agents that must date what they write or
 * compare against deadlines. It exists for every agent and takes no input. */
#include <stdio.h>

#include "tool.h"
#include "util.h"

static int
ct_exists(const struct cfg *cfg)
{
	(void)cfg;
	return 1;
}

static void
ct_call(struct tool_call *tc)
{
	char iso[32], out[96];
	int64_t ms;
	int n;

	/* No input is expected; anything other than an empty object is a
	 * mistake the model should hear about rather than have ignored. */
	if (tc->input != NULL && (!cJSON_IsObject(tc->input) ||
	    tc->input->child != NULL)) {
		tool_fail(tc, "current_time takes no input");
		return;
	}
	ms = now_ms();
	fmt_time_iso(ms, iso, sizeof(iso));
	n = snprintf(out, sizeof(out), "%s (unix time %lld)", iso,
	    (long long)(ms / 1000));
	tool_done(tc, out, (size_t)n, 0);
}

const struct tool_def tool_current_time = {
	.name = "current_time",
	.description = "The current date and time: ISO 8601 in UTC and Unix "
	    "seconds.",
	.input_schema = "{\"type\":\"object\",\"properties\":{},"
	    "\"additionalProperties\":false}",
	.axis = TOOL_NO_AXIS,
	.target_key = NULL,
	.exists = ct_exists,
	.call = ct_call,
};
