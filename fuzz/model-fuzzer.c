/* libFuzzer: both providers' reply parsers and the error-body reader on
 * arbitrary bytes, as a model server (or anything between us and it) could
 * send them. A reply that parses must also pass the neutral-content check and
 * survive a round trip through both request builders. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define FUZZ_MAX	(1 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* The parsed content goes back as an assistant turn, as the run would send
 * it on the next step. */
static void
round_trip(const cJSON *content)
{
	static const struct cfg_model m = { .name = "m", .base_url = "http://x",
	    .max_tokens = 1 };
	const struct provider *p[] = { &provider_anthropic, &provider_openai };
	cJSON *msgs = cJSON_CreateArray(), *msg;
	char err[128], *s;
	size_t i;

	msg = cJSON_CreateObject();
	cJSON_AddStringToObject(msg, "role", "assistant");
	cJSON_AddItemToObject(msg, "content", cJSON_Duplicate(content, 1));
	cJSON_AddItemToArray(msgs, msg);
	for (i = 0; i < nitems(p); i++) {
		s = p[i]->request(&m, "sys", msgs, NULL, err, sizeof(err));
		if (s == NULL)
			abort();	/* a checked reply is always expressible */
		free(s);
	}
	cJSON_Delete(msgs);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	const struct provider *p[] = { &provider_anthropic, &provider_openai };
	struct model_reply r;
	char out[512];
	size_t i;

	if (len > FUZZ_MAX)
		return 0;
	for (i = 0; i < nitems(p); i++) {
		memset(&r, 0, sizeof(r));
		if (p[i]->parse((const char *)data, len, &r) == 0) {
			if (r.content == NULL || model_check_content(r.content,
			    out, sizeof(out)) == -1)
				abort();
			round_trip(r.content);
		} else if (r.content != NULL || r.error[0] == '\0')
			abort();
		cJSON_Delete(r.content);
	}
	model_error_text((const char *)data, len, out, sizeof(out));
	return 0;
}
