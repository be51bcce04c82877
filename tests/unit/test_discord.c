/* The Discord trigger's pure parts: gateway payloads (snowflakes kept as
 * strings, bounds on what a peer may say), close codes, the payloads af
 * sends, 429 bodies, GET /gateway/bot's reply and the choice of gateway
 * URL, the URL splitter, the prompt cleaner and the reply splitter's limit,
 * character boundaries and preference for line breaks. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "triggers/discord.h"
#include "tt.h"
#include "util.h"

static int
parse(const char *json, struct dc_frame *f)
{
	return dc_parse_frame(json, strlen(json), f);
}

static void
test_hello_and_ops(void)
{
	struct dc_frame f;

	tt_int_op(parse("{\"op\":10,\"d\":{\"heartbeat_interval\":41250},"
	    "\"s\":null,\"t\":null}", &f), ==, 0);
	tt_int_op(f.op, ==, DC_OP_HELLO);
	tt_int_op(f.heartbeat_interval, ==, 41250);
	tt_int_op(f.seq, ==, -1);
	dc_frame_free(&f);
	/* A peer cannot make af beat a thousand times a second. */
	tt_int_op(parse("{\"op\":10,\"d\":{\"heartbeat_interval\":1}}", &f),
	    ==, 0);
	tt_int_op(f.heartbeat_interval, ==, 100);
	dc_frame_free(&f);
	tt_int_op(parse("{\"op\":10,\"d\":{\"heartbeat_interval\":0}}", &f),
	    ==, -1);
	dc_frame_free(&f);
	tt_int_op(parse("{\"op\":9,\"d\":true}", &f), ==, 0);
	tt_int_op(f.resumable, ==, 1);
	dc_frame_free(&f);
	tt_int_op(parse("{\"op\":9,\"d\":false}", &f), ==, 0);
	tt_int_op(f.resumable, ==, 0);
	dc_frame_free(&f);
	tt_int_op(parse("{\"op\":1.5}", &f), ==, -1);
	dc_frame_free(&f);
	tt_int_op(parse("[1]", &f), ==, -1);
	dc_frame_free(&f);
	tt_int_op(parse("{\"op\":11", &f), ==, -1);
end:
	dc_frame_free(&f);
}

static void
test_ready(void)
{
	struct dc_frame f;

	tt_int_op(parse("{\"op\":0,\"s\":1,\"t\":\"READY\",\"d\":{\"v\":10,"
	    "\"user\":{\"id\":\"900000000000000001\",\"bot\":true},"
	    "\"session_id\":\"abc\",\"resume_gateway_url\":"
	    "\"wss://gateway-us-east1-b.discord.gg\"}}", &f), ==, 0);
	tt_int_op(f.seq, ==, 1);
	tt_str_op(f.t, ==, "READY");
	tt_str_op(f.session_id, ==, "abc");
	tt_str_op(f.user_id, ==, "900000000000000001");
	tt_str_op(f.resume_url, ==, "wss://gateway-us-east1-b.discord.gg");
	dc_frame_free(&f);
	/* A user id as a number is not a snowflake string. */
	tt_int_op(parse("{\"op\":0,\"s\":1,\"t\":\"READY\",\"d\":{\"user\":"
	    "{\"id\":9},\"session_id\":\"abc\"}}", &f), ==, -1);
	/* The sequence is still known, for the caller to keep. */
	tt_int_op(f.seq, ==, 1);
end:
	dc_frame_free(&f);
}

static void
test_message(void)
{
	struct dc_frame f;

	tt_int_op(parse("{\"op\":0,\"s\":9007199254740992,\"t\":"
	    "\"MESSAGE_CREATE\",\"d\":{\"id\":\"18446744073709551615\","
	    "\"channel_id\":\"1234567890123456789\",\"guild_id\":\"2\","
	    "\"content\":\"hi\",\"author\":{\"id\":\"3\"},\"mentions\":[{\"id\":"
	    "\"4\"},{\"id\":5},{}]}}", &f), ==, 0);
	tt_int_op(f.has_message, ==, 1);
	tt_int_op(f.seq, ==, 9007199254740992LL);
	tt_str_op(f.msg.id, ==, "18446744073709551615");
	tt_str_op(f.msg.channel_id, ==, "1234567890123456789");
	tt_str_op(f.msg.guild_id, ==, "2");
	tt_str_op(f.msg.content, ==, "hi");
	tt_int_op(f.msg.author_bot, ==, 0);
	tt_int_op(f.msg.mentions.n, ==, 1);
	tt_str_op(f.msg.mentions.v[0], ==, "4");
	dc_frame_free(&f);
	/* A DM has no guild; a webhook's message counts as a bot's. */
	tt_int_op(parse("{\"op\":0,\"s\":2,\"t\":\"MESSAGE_CREATE\",\"d\":{"
	    "\"id\":\"1\",\"channel_id\":\"2\",\"author\":{\"id\":\"3\"},"
	    "\"webhook_id\":\"7\",\"type\":19}}", &f), ==, 0);
	tt_str_op(f.msg.guild_id, ==, "");
	tt_int_op(f.msg.author_bot, ==, 1);
	tt_int_op(f.msg.type, ==, 19);
	tt_str_op(f.msg.content, ==, "");
	dc_frame_free(&f);
	tt_int_op(parse("{\"op\":0,\"s\":2,\"t\":\"MESSAGE_CREATE\",\"d\":{"
	    "\"id\":\"1\",\"channel_id\":\"x2\",\"author\":{\"id\":\"3\"}}}",
	    &f), ==, -1);
	dc_frame_free(&f);
	tt_int_op(parse("{\"op\":0,\"s\":2,\"t\":\"MESSAGE_CREATE\",\"d\":{"
	    "\"id\":\"123456789012345678901\",\"channel_id\":\"2\","
	    "\"author\":{\"id\":\"3\"}}}", &f), ==, -1);
end:
	dc_frame_free(&f);
}

static void
test_close_codes(void)
{
	static const struct { int code; enum dc_close_action a; } t[] = {
		{ 0, DC_CLOSE_RESUME }, { 1000, DC_CLOSE_RESUME },
		{ 4000, DC_CLOSE_RESUME }, { 4008, DC_CLOSE_RESUME },
		{ 4004, DC_CLOSE_FATAL }, { 4010, DC_CLOSE_FATAL },
		{ 4011, DC_CLOSE_FATAL }, { 4012, DC_CLOSE_FATAL },
		{ 4013, DC_CLOSE_FATAL }, { 4014, DC_CLOSE_FATAL },
		{ 4007, DC_CLOSE_REIDENTIFY }, { 4009, DC_CLOSE_REIDENTIFY },
	};

	for (size_t i = 0; i < nitems(t); i++)
		tt_int_op(dc_close_action(t[i].code), ==, t[i].a);
	tt_assert(strstr(dc_close_text(4004), "authentication failed") != NULL);
	tt_assert(strstr(dc_close_text(4014), "4014") != NULL);
end:
	;
}

static void
test_payloads(void)
{
	char *s = dc_identify_json("tok", DC_INTENTS);
	cJSON *o = cJSON_Parse(s), *d;

	tt_assert(o != NULL);
	d = cJSON_GetObjectItemCaseSensitive(o, "d");
	tt_int_op(cJSON_GetObjectItemCaseSensitive(o, "op")->valueint, ==, 2);
	tt_int_op(cJSON_GetObjectItemCaseSensitive(d, "intents")->valueint,
	    ==, 37376);
	tt_str_op(cJSON_GetObjectItemCaseSensitive(d, "token")->valuestring,
	    ==, "tok");
	cJSON_Delete(o);
	o = NULL;
	free(s);
	s = dc_heartbeat_json(-1);
	tt_str_op(s, ==, "{\"op\":1,\"d\":null}");
	free(s);
	s = dc_heartbeat_json(9007199254740992LL);
	tt_str_op(s, ==, "{\"op\":1,\"d\":9007199254740992}");
	free(s);
	s = dc_resume_json("tok", "sess", 42);
	tt_str_op(s, ==, "{\"op\":6,\"d\":{\"token\":\"tok\",\"session_id\":"
	    "\"sess\",\"seq\":42}}");
	free(s);
	s = dc_message_json("@everyone \"hi\"", "17");
	tt_str_op(s, ==, "{\"content\":\"@everyone \\\"hi\\\"\","
	    "\"allowed_mentions\":{\"parse\":[]},\"message_reference\":{"
	    "\"message_id\":\"17\",\"fail_if_not_exists\":false}}");
	free(s);
	s = dc_message_json("x", NULL);
	tt_str_op(s, ==, "{\"content\":\"x\",\"allowed_mentions\":{\"parse\":"
	    "[]}}");
end:
	cJSON_Delete(o);
	free(s);
}

static int
p429(const char *body, long *ms, int *global)
{
	return dc_parse_429(body, strlen(body), ms, global);
}

static void
test_rate_limits(void)
{
	long ms;
	int global;

	tt_int_op(p429("{\"message\":\"x\",\"retry_after\":0.812,"
	    "\"global\":true}", &ms, &global), ==, 0);
	tt_int_op(ms, ==, 812);
	tt_int_op(global, ==, 1);
	tt_int_op(p429("{\"retry_after\":1e300}", &ms, &global),
	    ==, 0);
	tt_int_op(ms, ==, 86400000);
	tt_int_op(p429("{\"retry_after\":-1}", &ms, &global), ==,
	    -1);
	tt_int_op(p429("<html>", &ms, &global), ==, -1);
	tt_int_op(dc_seconds_ms("1.2501"), ==, 1251);
	tt_int_op(dc_seconds_ms("0"), ==, 0);
	tt_int_op(dc_seconds_ms("-1"), ==, -1);
	tt_int_op(dc_seconds_ms("1s"), ==, -1);
	tt_int_op(dc_seconds_ms("nan"), ==, -1);
	tt_int_op(dc_seconds_ms(NULL), ==, -1);
end:
	;
}

static void
test_urls(void)
{
	struct dc_url u;

	tt_int_op(dc_url_split("wss://gateway.discord.gg/?v=10&encoding=json",
	    &u), ==, 0);
	tt_int_op(u.tls, ==, 1);
	tt_str_op(u.host, ==, "gateway.discord.gg");
	tt_int_op(u.port, ==, 443);
	tt_str_op(u.path, ==, "/?v=10&encoding=json");
	tt_int_op(dc_url_split("ws://127.0.0.1:8080?v=10#x", &u), ==, 0);
	tt_int_op(u.tls, ==, 0);
	tt_int_op(u.port, ==, 8080);
	tt_str_op(u.path, ==, "/?v=10");
	tt_int_op(dc_url_split("ws://[::1]:9/", &u), ==, 0);
	tt_str_op(u.host, ==, "::1");
	tt_int_op(dc_url_split("https://discord.com/", &u), ==, -1);
	tt_int_op(dc_url_split("ws://:80/", &u), ==, -1);
	tt_int_op(dc_url_split("ws://a:0/", &u), ==, -1);
	tt_int_op(dc_url_split("ws://a:65536/", &u), ==, -1);
	tt_int_op(dc_url_split("ws://user@a/", &u), ==, -1);
	tt_int_op(dc_url_split("ws://a/b c", &u), ==, -1);
end:
	;
}

static int
pgb(const char *json, struct dc_gateway_bot *g)
{
	return dc_parse_gateway_bot(json, strlen(json), g);
}

static void
test_gateway_bot(void)
{
	struct dc_gateway_bot g;

	tt_int_op(pgb("{\"url\":\"wss://gateway.discord.gg\",\"shards\":1,"
	    "\"session_start_limit\":{\"total\":1000,\"remaining\":998,"
	    "\"reset_after\":84686789,\"max_concurrency\":1}}", &g), ==, 0);
	tt_str_op(g.url, ==, "wss://gateway.discord.gg");
	tt_int_op(g.shards, ==, 1);
	tt_int_op(g.total, ==, 1000);
	tt_int_op(g.remaining, ==, 998);
	tt_int_op(g.reset_after, ==, 84686789);
	tt_int_op(g.max_concurrency, ==, 1);
	/* Spent; a wait past a day is clamped to one. */
	tt_int_op(pgb("{\"session_start_limit\":{\"remaining\":0,"
	    "\"reset_after\":1e15}}", &g), ==, 0);
	tt_int_op(g.remaining, ==, 0);
	tt_int_op(g.reset_after, ==, 86400000);
	tt_str_op(g.url, ==, "");
	tt_int_op(g.max_concurrency, ==, 1);
	/* Without remaining and reset_after af cannot tell. */
	tt_int_op(pgb("{\"url\":\"wss://x\"}", &g), ==, -1);
	tt_int_op(pgb("{\"session_start_limit\":{\"remaining\":1}}", &g),
	    ==, -1);
	tt_int_op(pgb("{\"session_start_limit\":{\"remaining\":-1,"
	    "\"reset_after\":5}}", &g), ==, -1);
	tt_int_op(pgb("{\"session_start_limit\":{\"remaining\":1.5,"
	    "\"reset_after\":5}}", &g), ==, -1);
	tt_int_op(pgb("{\"session_start_limit\":{\"remaining\":\"1\","
	    "\"reset_after\":5}}", &g), ==, -1);
	tt_int_op(pgb("{\"session_start_limit\":{\"remaining\":1,"
	    "\"reset_after\":-5}}", &g), ==, -1);
	tt_int_op(pgb("{\"message\": \"401: Unauthorized\", \"code\": 0}",
	    &g), ==, -1);
	tt_int_op(pgb("[]", &g), ==, -1);
	tt_int_op(pgb("{", &g), ==, -1);
end:
	;
}

static void
test_gateway_pick(void)
{
	struct dc_url u;

	/* The default: Discord's url, with v=10 and JSON. */
	tt_int_op(dc_gateway_pick(DC_GATEWAY_DEFAULT,
	    "wss://gateway-us-east1-b.discord.gg", &u), ==, 1);
	tt_str_op(u.host, ==, "gateway-us-east1-b.discord.gg");
	tt_int_op(u.port, ==, 443);
	tt_str_op(u.path, ==, "/?v=10&encoding=json");
	tt_int_op(dc_gateway_pick(DC_GATEWAY_DEFAULT, "wss://g.example/", &u),
	    ==, 1);
	/* Not wss, another port, a path of its own, nothing: the default. */
	tt_int_op(dc_gateway_pick(DC_GATEWAY_DEFAULT, "ws://g.example", &u),
	    ==, 0);
	tt_str_op(u.host, ==, "gateway.discord.gg");
	tt_int_op(dc_gateway_pick(DC_GATEWAY_DEFAULT, "wss://g.example:8443",
	    &u), ==, 0);
	tt_int_op(dc_gateway_pick(DC_GATEWAY_DEFAULT, "wss://g.example/x", &u),
	    ==, 0);
	tt_int_op(dc_gateway_pick(DC_GATEWAY_DEFAULT, "", &u), ==, 0);
	tt_int_op(dc_gateway_pick(DC_GATEWAY_DEFAULT, NULL, &u), ==, 0);
	/* An operator's gateway (a proxy, a stand-in) is kept. */
	tt_int_op(dc_gateway_pick("ws://127.0.0.1:9000/?v=10&encoding=json",
	    "wss://gateway.discord.gg", &u), ==, 0);
	tt_str_op(u.host, ==, "127.0.0.1");
	tt_int_op(u.port, ==, 9000);
	tt_int_op(dc_gateway_pick("https://x/", "wss://g.example", &u), ==,
	    -1);
end:
	;
}

static void
test_prompt(void)
{
	char *p = dc_prompt_text("  <@900> hello <@!900> <@901>\n", "900");

	tt_str_op(p, ==, "hello  <@901>");
	free(p);
	p = dc_prompt_text("<@900>", "900");
	tt_str_op(p, ==, "");
end:
	free(p);
}

static void
test_split(void)
{
	struct strlist parts = { 0 };
	struct buf b;
	size_t n;

	/* Exactly at the limit: one part. */
	buf_init(&b);
	for (int i = 0; i < DC_TEXT_MAX_CHARS; i++)
		buf_adds(&b, "\xc3\xa9");
	dc_split(b.data, DC_TEXT_MAX_CHARS, DC_MAX_PARTS, &parts);
	tt_int_op(parts.n, ==, 1);
	strlist_free(&parts);
	/* One more character: two parts, never inside a character. */
	buf_adds(&b, "x");
	dc_split(b.data, DC_TEXT_MAX_CHARS, DC_MAX_PARTS, &parts);
	tt_int_op(parts.n, ==, 2);
	n = strlen(parts.v[0]);
	tt_int_op(dc_utf8_chars(parts.v[0], n), ==, DC_TEXT_MAX_CHARS);
	tt_str_op(parts.v[1], ==, "x");
	strlist_free(&parts);
	/* A line break in the second half is where it cuts. */
	dc_split("aaaaaa\nbbbbbbb", 10, 5, &parts);
	tt_int_op(parts.n, ==, 2);
	tt_str_op(parts.v[0], ==, "aaaaaa\n");
	tt_str_op(parts.v[1], ==, "bbbbbbb");
	strlist_free(&parts);
	/* Invalid UTF-8 is replaced, blank text gives nothing. */
	dc_split("a\xff", 10, 5, &parts);
	tt_str_op(parts.v[0], ==, "a\xef\xbf\xbd");
	strlist_free(&parts);
	dc_split(" \n\t ", 10, 5, &parts);
	tt_int_op(parts.n, ==, 0);
	/* Too long for the parts allowed: the last one says so. */
	buf_reset(&b);
	for (int i = 0; i < 100; i++)
		buf_adds(&b, "0123456789");
	dc_split(b.data, 100, 2, &parts);
	tt_int_op(parts.n, ==, 2);
	tt_assert(strstr(parts.v[1], "cut") != NULL);
	tt_int_op(dc_utf8_chars(parts.v[1], strlen(parts.v[1])), <=, 100);
end:
	strlist_free(&parts);
	buf_free(&b);
}

static const struct tt_case cases[] = {
	{ "hello_and_ops", test_hello_and_ops },
	{ "ready", test_ready },
	{ "message", test_message },
	{ "close_codes", test_close_codes },
	{ "payloads", test_payloads },
	{ "rate_limits", test_rate_limits },
	{ "urls", test_urls },
	{ "gateway_bot", test_gateway_bot },
	{ "gateway_pick", test_gateway_pick },
	{ "prompt", test_prompt },
	{ "split", test_split },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return tt_main(argc, argv, cases);
}
