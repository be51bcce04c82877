/* libFuzzer target for the Discord trigger's pure parts (discord_parse.c):
 * the same bytes go to the gateway payload parser, the 429 parser, the
 * GET /gateway/bot parser and the gateway URL choice, the URL splitter, the
 * prompt cleaner and the reply splitter, and what each
 * promises is checked: ids exact snowflakes, bounds kept, every part within
 * the limit and valid UTF-8, no visible character of a reply lost, and the
 * payloads af builds are JSON that says what was put in. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "fuzz/fuzz_util.h"
#include "triggers/discord.h"
#include "util.h"

/* What dc_split counts as whitespace when it drops a cut's edges. */
#define DC_SPACE	" \t\r\n\v\f"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
fuzz_frame(const char *data, size_t len)
{
	struct dc_frame f;

	if (dc_parse_frame(data, len, &f) == 0) {
		fuzz_check(f.op >= 0 && f.op <= 255 && f.seq >= -1);
		if (f.op == DC_OP_HELLO)
			fuzz_check(f.heartbeat_interval >= 100 &&
			    f.heartbeat_interval <= 3600000);
		if (f.op == DC_OP_DISPATCH && strcmp(f.t, "READY") == 0)
			fuzz_check(f.session_id[0] != '\0' &&
			    dc_snowflake_ok(f.user_id));
		if (f.has_message) {
			fuzz_check(dc_snowflake_ok(f.msg.id) &&
			    dc_snowflake_ok(f.msg.channel_id) &&
			    dc_snowflake_ok(f.msg.author_id));
			fuzz_check(f.msg.guild_id[0] == '\0' ||
			    dc_snowflake_ok(f.msg.guild_id));
			fuzz_check(f.msg.content != NULL);
			fuzz_check(f.msg.mentions.n <= 100);
			for (size_t i = 0; i < f.msg.mentions.n; i++)
				fuzz_check(dc_snowflake_ok(
				    f.msg.mentions.v[i]));
		}
	}
	fuzz_check(strlen(f.t) < sizeof(f.t));
	dc_frame_free(&f);
}

static void
fuzz_strings(const char *s, size_t len)
{
	struct dc_url u;
	long ms;
	int global;

	if (dc_parse_429(s, len, &ms, &global) == 0)
		fuzz_check(ms >= 0 && ms <= 86400000L);
	ms = dc_seconds_ms(s);
	fuzz_check(ms >= -1 && ms <= 86400000L);
	if (dc_url_split(s, &u) == 0) {
		fuzz_check(u.host[0] != '\0' && u.port >= 1 &&
		    u.port <= 65535);
		fuzz_check(u.path[0] == '/' &&
		    strpbrk(u.path, " \t\r\n#") == NULL);
	}
}

/* Bounds the parser promises, and a gateway URL af may open: the
 * configured one, or a wss one on the configured port. */
static void
fuzz_gateway_bot(const char *data, size_t len)
{
	struct dc_gateway_bot g;
	struct dc_url u;
	int rc;

	if (dc_parse_gateway_bot(data, len, &g) == 0) {
		fuzz_check(g.remaining >= 0 && g.total >= 0 && g.shards >= 0);
		fuzz_check(g.max_concurrency >= 1);
		fuzz_check(g.reset_after >= 0 && g.reset_after <= 86400000L);
		fuzz_check(strlen(g.url) < sizeof(g.url));
		rc = dc_gateway_pick(DC_GATEWAY_DEFAULT, g.url, &u);
		fuzz_check(rc == 0 || rc == 1);
		fuzz_check(u.port == 443 && strcmp(u.path,
		    "/?v=10&encoding=json") == 0);
		if (rc == 1)
			fuzz_check(u.tls);
	}
}

static void
fuzz_split(const char *text, size_t max_chars, size_t max_parts)
{
	struct strlist parts = { 0 };

	dc_split(text, max_chars, max_parts, &parts);
	fuzz_check_split(text, &parts, max_parts, DC_SPACE);
	for (size_t i = 0; i < parts.n; i++)
		fuzz_check(dc_utf8_chars(parts.v[i], strlen(parts.v[i])) <=
		    max_chars);
	strlist_free(&parts);
}

/* What af sends must parse and carry the content unchanged. */
static void
fuzz_payloads(const char *text)
{
	char *s = dc_message_json(text, "1400000000000000001");
	cJSON *o = cJSON_Parse(s);
	const cJSON *c, *am;

	fuzz_check(o != NULL);
	c = cJSON_GetObjectItemCaseSensitive(o, "content");
	am = cJSON_GetObjectItemCaseSensitive(o, "allowed_mentions");
	fuzz_check(cJSON_IsString(c));
	if (fuzz_utf8_ok((const unsigned char *)text, strlen(text)))
		fuzz_check(strcmp(c->valuestring, text) == 0);
	fuzz_check(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(am,
	    "parse")) == 0);
	cJSON_Delete(o);
	free(s);
	s = dc_resume_json(text, text, 42);
	fuzz_check((o = cJSON_Parse(s)) != NULL);
	cJSON_Delete(o);
	free(s);
}

static void
fuzz_prompt(const char *text)
{
	char *p = dc_prompt_text(text, "900000000000000001");
	size_t n = strlen(p);

	fuzz_check(n <= strlen(text));
	fuzz_check(n == 0 || (p[0] != ' ' && p[0] != '\n' && p[n - 1] != ' ' &&
	    p[n - 1] != '\n'));
	free(p);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	char *text;
	size_t max_chars;

	if (len > FUZZ_MAX_INPUT)
		return 0;
	fuzz_frame((const char *)data, len);
	fuzz_gateway_bot((const char *)data, len);
	text = xstrndup((const char *)data, len);
	fuzz_strings(text, strlen(text));
	fuzz_prompt(text);
	fuzz_payloads(text);
	free(text);

	/* The first two bytes pick a limit, so that small limits, where the
	 * edge cases live, come up often. */
	if (len < 2)
		return 0;
	max_chars = 1 + (((size_t)data[0] << 8 | data[1]) % DC_TEXT_MAX_CHARS);
	text = xstrndup((const char *)data + 2, len - 2);
	fuzz_split(text, max_chars, 1 + data[0] % DC_MAX_PARTS);
	fuzz_split(text, DC_TEXT_MAX_CHARS, DC_MAX_PARTS);
	free(text);
	return 0;
}
