/* The model providers: request bodies and headers in both wire shapes, reply
 * parsing (real-looking replies and malformed ones), error texts and the
 * retry arithmetic without the network; then model_send end to end against
 * the stand-in server (tests/standin/model_server.py) on the real loop. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tt.h"
#include "http.h"
#include "loop.h"
#include "model.h"

#define KEY	"sk-unit-test-secret-0123456789"

static struct cfg_model anth = { .provider = PROVIDER_ANTHROPIC,
    .name = "claude-test", .base_url = "http://127.0.0.1:1", .api_key = KEY,
    .max_tokens = 1024, .max_steps = 10, .timeout_ms = 5000 };
static struct cfg_model oai = { .provider = PROVIDER_OPENAI,
    .name = "gpt-test", .base_url = "http://127.0.0.1:1/v1/", .api_key = KEY,
    .max_tokens = 512, .max_steps = 10, .timeout_ms = 5000 };

/* A conversation with every block kind af produces. */
static const char *convo =
    "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]},"
    "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":"
    "\"checking\"},{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":"
    "\"read_file\",\"input\":{\"path\":\"/etc/x\"}},{\"type\":\"tool_use\","
    "\"id\":\"toolu_2\",\"name\":\"current_time\",\"input\":{}}]},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
    "\"tool_use_id\":\"toolu_1\",\"content\":\"permission denied: read\","
    "\"is_error\":true},{\"type\":\"tool_result\",\"tool_use_id\":"
    "\"toolu_2\",\"content\":\"2026-01-01\"}]}]";
static const char *tools_json =
    "[{\"name\":\"read_file\",\"description\":\"Read a file\","
    "\"input_schema\":{\"type\":\"object\",\"properties\":{\"path\":"
    "{\"type\":\"string\"}},\"required\":[\"path\"]}}]";

static const cJSON *
get(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

static const char *
str(const cJSON *o, const char *k)
{
	const cJSON *v = get(o, k);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static cJSON *
build(const struct provider *p, const struct cfg_model *m, const char *sys)
{
	cJSON *msgs = cJSON_Parse(convo), *tools = cJSON_Parse(tools_json), *r;
	char err[128], *s;

	s = p->request(m, sys, msgs, tools, err, sizeof(err));
	r = s != NULL ? cJSON_Parse(s) : NULL;
	free(s);
	cJSON_Delete(msgs);
	cJSON_Delete(tools);
	return r;
}

static void
test_anthropic_request(void)
{
	cJSON *r = build(&provider_anthropic, &anth, "be brief");
	cJSON *msgs = cJSON_Parse(convo), *tools = cJSON_Parse(tools_json);

	tt_assert(r != NULL);
	tt_str_op(str(r, "model"), ==, "claude-test");
	tt_int_op(get(r, "max_tokens")->valuedouble, ==, 1024);
	tt_str_op(str(r, "system"), ==, "be brief");
	tt_assert(cJSON_Compare(get(r, "messages"), msgs, 1));
	tt_assert(cJSON_Compare(get(r, "tools"), tools, 1));
	tt_assert(cJSON_IsTrue(get(cJSON_GetArrayItem(get(cJSON_GetArrayItem(
	    get(r, "messages"), 2), "content"), 0), "is_error")));
 end:
	cJSON_Delete(r);
	cJSON_Delete(msgs);
	cJSON_Delete(tools);
}

static void
test_anthropic_request_minimal(void)
{
	cJSON *msgs = cJSON_Parse("[{\"role\":\"user\",\"content\":\"x\"}]");
	cJSON *tools = cJSON_CreateArray(), *r = NULL;
	char err[128], *s;

	s = provider_anthropic.request(&anth, NULL, msgs, tools, err,
	    sizeof(err));
	tt_assert(s != NULL);
	r = cJSON_Parse(s);
	tt_assert(get(r, "system") == NULL);
	tt_assert(get(r, "tools") == NULL);
	free(s);
	cJSON_Delete(tools);
	tools = cJSON_CreateArray();
	cJSON_Delete(msgs);
	msgs = cJSON_CreateArray();
	s = provider_anthropic.request(&anth, NULL, msgs, tools, err,
	    sizeof(err));
	tt_assert(s == NULL);
	tt_assert(strstr(err, "no messages") != NULL);
 end:
	cJSON_Delete(r);
	cJSON_Delete(msgs);
	cJSON_Delete(tools);
}

static void
test_openai_request(void)
{
	cJSON *r = build(&provider_openai, &oai, "be brief"), *in = NULL;
	const cJSON *m, *tc, *fn, *t;

	tt_assert(r != NULL);
	tt_str_op(str(r, "model"), ==, "gpt-test");
	/* A local server: the classic key. */
	tt_int_op(get(r, "max_tokens")->valuedouble, ==, 512);
	tt_assert(get(r, "max_completion_tokens") == NULL);
	m = get(r, "messages");
	tt_int_op(cJSON_GetArraySize(m), ==, 5);
	tt_str_op(str(cJSON_GetArrayItem(m, 0), "role"), ==, "system");
	tt_str_op(str(cJSON_GetArrayItem(m, 0), "content"), ==, "be brief");
	tt_str_op(str(cJSON_GetArrayItem(m, 1), "role"), ==, "user");
	tt_str_op(str(cJSON_GetArrayItem(m, 1), "content"), ==, "hi");
	/* Text and tool calls in one assistant message. */
	tt_str_op(str(cJSON_GetArrayItem(m, 2), "role"), ==, "assistant");
	tt_str_op(str(cJSON_GetArrayItem(m, 2), "content"), ==, "checking");
	tc = get(cJSON_GetArrayItem(m, 2), "tool_calls");
	tt_int_op(cJSON_GetArraySize(tc), ==, 2);
	tt_str_op(str(tc->child, "id"), ==, "toolu_1");
	tt_str_op(str(tc->child, "type"), ==, "function");
	fn = get(tc->child, "function");
	tt_str_op(str(fn, "name"), ==, "read_file");
	/* arguments is a string holding the input object. */
	tt_assert(cJSON_IsString(get(fn, "arguments")));
	in = cJSON_Parse(str(fn, "arguments"));
	tt_str_op(str(in, "path"), ==, "/etc/x");
	tt_str_op(str(cJSON_GetArrayItem(m, 3), "role"), ==, "tool");
	tt_str_op(str(cJSON_GetArrayItem(m, 3), "tool_call_id"), ==, "toolu_1");
	tt_str_op(str(cJSON_GetArrayItem(m, 3), "content"), ==,
	    "ERROR: permission denied: read");
	tt_str_op(str(cJSON_GetArrayItem(m, 4), "tool_call_id"), ==, "toolu_2");
	tt_str_op(str(cJSON_GetArrayItem(m, 4), "content"), ==, "2026-01-01");
	t = get(r, "tools")->child;
	tt_str_op(str(t, "type"), ==, "function");
	tt_str_op(str(get(t, "function"), "name"), ==, "read_file");
	tt_str_op(str(get(t, "function"), "description"), ==, "Read a file");
	tt_str_op(str(get(get(t, "function"), "parameters"), "type"), ==,
	    "object");
 end:
	cJSON_Delete(in);
	cJSON_Delete(r);
}

static void
test_openai_request_details(void)
{
	struct cfg_model real = oai;
	cJSON *r = NULL, *msgs = NULL;
	const cJSON *m;
	char err[128], *s = NULL;

	real.base_url = "https://api.openai.com/v1";
	r = build(&provider_openai, &real, NULL);
	tt_assert(get(r, "max_completion_tokens") != NULL);
	tt_assert(get(r, "max_tokens") == NULL);
	/* No system prompt: no system message. */
	tt_str_op(str(get(r, "messages")->child, "role"), ==, "user");
	cJSON_Delete(r);
	/* A tool call alone: content null, as documented. */
	msgs = cJSON_Parse("[{\"role\":\"user\",\"content\":\"x\"},"
	    "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\","
	    "\"id\":\"c1\",\"name\":\"t\",\"input\":{}}]},"
	    "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
	    "\"tool_use_id\":\"c1\",\"content\":[{\"type\":\"text\",\"text\":"
	    "\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},{\"type\":\"text\","
	    "\"text\":\"go on\"}]}]");
	s = provider_openai.request(&oai, NULL, msgs, NULL, err, sizeof(err));
	tt_assert(s != NULL);
	r = cJSON_Parse(s);
	m = get(r, "messages");
	tt_assert(cJSON_IsNull(get(cJSON_GetArrayItem(m, 1), "content")));
	tt_str_op(str(get(get(cJSON_GetArrayItem(m, 1), "tool_calls")->child,
	    "function"), "arguments"), ==, "{}");
	tt_str_op(str(cJSON_GetArrayItem(m, 2), "content"), ==, "a\nb");
	tt_str_op(str(cJSON_GetArrayItem(m, 3), "role"), ==, "user");
	tt_str_op(str(cJSON_GetArrayItem(m, 3), "content"), ==, "go on");
	tt_assert(get(r, "tools") == NULL);
	free(s);
	s = NULL;
	cJSON_Delete(msgs);
	/* A block the wire cannot carry is an error, not silence. */
	msgs = cJSON_Parse("[{\"role\":\"user\",\"content\":[{\"type\":"
	    "\"image\",\"source\":{}}]}]");
	s = provider_openai.request(&oai, NULL, msgs, NULL, err, sizeof(err));
	tt_assert(s == NULL);
	tt_assert(strstr(err, "cannot express") != NULL);
 end:
	free(s);
	cJSON_Delete(msgs);
	cJSON_Delete(r);
}

static int
has_line(const struct strlist *l, const char *s)
{
	return strlist_has(l, s);
}

static void
test_headers(void)
{
	struct strlist h = { NULL, 0 };
	struct cfg_model local = oai;

	provider_anthropic.headers(&anth, &h);
	tt_assert(has_line(&h, "x-api-key: " KEY));
	tt_assert(has_line(&h, "anthropic-version: 2023-06-01"));
	tt_assert(has_line(&h, "content-type: application/json"));
	strlist_free(&h);
	provider_openai.headers(&oai, &h);
	tt_assert(has_line(&h, "Authorization: Bearer " KEY));
	tt_assert(has_line(&h, "Content-Type: application/json"));
	strlist_free(&h);
	local.api_key = NULL;
	provider_openai.headers(&local, &h);
	for (size_t i = 0; i < h.n; i++)
		tt_assert(strncmp(h.v[i], "Authorization", 13) != 0);
	tt_str_op(provider_anthropic.path, ==, "/v1/messages");
	tt_str_op(provider_openai.path, ==, "/chat/completions");
 end:
	strlist_free(&h);
}

static int
parse(const struct provider *p, const char *body, struct model_reply *r)
{
	memset(r, 0, sizeof(*r));
	return p->parse(body, strlen(body), r);
}

static void
test_anthropic_parse(void)
{
	struct model_reply r;
	const cJSON *b;

	memset(&r, 0, sizeof(r));
	tt_int_op(parse(&provider_anthropic, "{\"id\":\"msg_01Aq9w938a90dw8q\","
	    "\"type\":\"message\",\"role\":\"assistant\",\"model\":"
	    "\"claude-sonnet-4-5\",\"content\":[{\"type\":\"text\",\"text\":"
	    "\"I'll check the time.\"},{\"type\":\"tool_use\",\"id\":"
	    "\"toolu_01A09q90qw90lq917835lq9\",\"name\":\"current_time\","
	    "\"input\":{}}],\"stop_reason\":\"tool_use\",\"stop_sequence\":null,"
	    "\"usage\":{\"input_tokens\":472,\"output_tokens\":91}}", &r), ==, 0);
	tt_str_op(r.stop, ==, "tool_use");
	tt_int_op(r.in_tokens, ==, 472);
	tt_int_op(r.out_tokens, ==, 91);
	tt_int_op(cJSON_GetArraySize(r.content), ==, 2);
	b = cJSON_GetArrayItem(r.content, 1);
	tt_str_op(str(b, "type"), ==, "tool_use");
	tt_str_op(str(b, "id"), ==, "toolu_01A09q90qw90lq917835lq9");
	tt_assert(cJSON_IsObject(get(b, "input")));
	cJSON_Delete(r.content);
	r.content = NULL;

	/* Thinking blocks are skipped, empty text dropped, stop_sequence is a
	 * normal end. */
	tt_int_op(parse(&provider_anthropic, "{\"type\":\"message\",\"content\":"
	    "[{\"type\":\"thinking\",\"thinking\":\"hm\",\"signature\":\"s\"},"
	    "{\"type\":\"text\",\"text\":\"\"},{\"type\":\"text\",\"text\":"
	    "\"done\"}],\"stop_reason\":\"stop_sequence\",\"usage\":"
	    "{\"input_tokens\":1,\"output_tokens\":1}}", &r), ==, 0);
	tt_str_op(r.stop, ==, "end_turn");
	tt_int_op(cJSON_GetArraySize(r.content), ==, 1);
	cJSON_Delete(r.content);
	r.content = NULL;

	tt_int_op(parse(&provider_anthropic, "{\"type\":\"message\",\"content\":"
	    "[],\"stop_reason\":\"max_tokens\"}", &r), ==, 0);
	tt_str_op(r.stop, ==, "max_tokens");
	tt_int_op(r.in_tokens, ==, 0);
	cJSON_Delete(r.content);
	r.content = NULL;
	tt_int_op(parse(&provider_anthropic, "{\"type\":\"message\",\"content\":"
	    "[{\"type\":\"text\",\"text\":\"no\"}],\"stop_reason\":\"refusal\"}",
	    &r), ==, 0);
	tt_str_op(r.stop, ==, "other");
 end:
	cJSON_Delete(r.content);
}

struct bad {
	const char	*body;
	const char	*why;	/* a part of the error */
};

static const struct bad anthropic_bad[] = {
	{ "", "not JSON" },
	{ "{\"type\":\"message\",\"content\":[", "not JSON" },
	{ "<html>502 Bad Gateway</html>", "not JSON" },
	{ "[1,2]", "not a JSON object" },
	{ "{\"type\":\"message\",\"content\":[]} trailing", "not JSON" },
	{ "{\"type\":\"message\"}", "content" },
	{ "{\"type\":\"message\",\"content\":\"hi\"}", "content" },
	{ "{\"type\":\"message\",\"content\":null}", "content" },
	{ "{\"type\":\"completion\",\"content\":[]}", "type" },
	{ "{\"content\":[{\"type\":\"text\",\"text\":5}]}", "text" },
	{ "{\"content\":[{\"text\":\"x\"}]}", "type" },
	{ "{\"content\":[\"x\"]}", "type" },
	{ "{\"content\":[{\"type\":\"tool_use\",\"name\":\"t\",\"input\":{}}]}",
	    "id" },
	{ "{\"content\":[{\"type\":\"tool_use\",\"id\":\"\",\"name\":\"t\","
	    "\"input\":{}}]}", "id" },
	{ "{\"content\":[{\"type\":\"tool_use\",\"id\":7,\"name\":\"t\","
	    "\"input\":{}}]}", "id" },
	{ "{\"content\":[{\"type\":\"tool_use\",\"id\":\"a\",\"input\":{}}]}",
	    "name" },
	{ "{\"content\":[{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"t\","
	    "\"input\":\"{}\"}]}", "input" },
	{ "{\"content\":[{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"t\"}]}",
	    "input" },
	{ "{\"content\":[{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"t\","
	    "\"input\":{}},{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"u\","
	    "\"input\":{}}]}", "duplicate" },
	{ "{\"content\":[{\"type\":\"text\",\"text\":\"x\"}],"
	    "\"stop_reason\":\"tool_use\"}", "tool_use" },
	{ "{\"content\":[],\"stop_reason\":3}", "stop_reason" },
	{ "{\"content\":[],\"usage\":{\"input_tokens\":\"12\"}}", "usage" },
	{ "{\"content\":[],\"usage\":{\"output_tokens\":-1}}", "usage" },
	{ "{\"content\":[],\"usage\":[]}", "usage" },
	{ "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
	    "\"message\":\"Overloaded\"}}", "Overloaded" },
};

static const struct bad openai_bad[] = {
	{ "garbage", "not JSON" },
	{ "{}", "no choices" },
	{ "{\"choices\":[]}", "no choices" },
	{ "{\"choices\":{}}", "no choices" },
	{ "{\"choices\":[{\"finish_reason\":\"stop\"}]}", "message" },
	{ "{\"choices\":[{\"message\":\"hi\"}]}", "message" },
	{ "{\"choices\":[{\"message\":{\"content\":5}}]}", "content" },
	{ "{\"choices\":[{\"message\":{\"content\":\"x\"},\"finish_reason\":1}]}",
	    "finish_reason" },
	{ "{\"choices\":[{\"message\":{\"content\":null,\"tool_calls\":"
	    "[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"t\","
	    "\"arguments\":\"{\\\"path\\\": \"}}]}}]}", "arguments" },
	{ "{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":\"c\","
	    "\"function\":{\"name\":\"t\",\"arguments\":{\"a\":1}}}]}}]}",
	    "arguments" },
	{ "{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":\"c\","
	    "\"function\":{\"name\":\"t\",\"arguments\":\"[1]\"}}]}}]}",
	    "arguments" },
	{ "{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":\"c\","
	    "\"function\":{\"name\":\"t\",\"arguments\":\"{} x\"}}]}}]}",
	    "arguments" },
	{ "{\"choices\":[{\"message\":{\"tool_calls\":[{\"function\":"
	    "{\"name\":\"t\",\"arguments\":\"{}\"}}]}}]}", "id" },
	{ "{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":\"\","
	    "\"function\":{\"name\":\"t\",\"arguments\":\"{}\"}}]}}]}", "id" },
	{ "{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":\"c\","
	    "\"function\":{\"arguments\":\"{}\"}}]}}]}", "name" },
	{ "{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":\"c\","
	    "\"type\":\"retrieval\",\"function\":{\"name\":\"t\","
	    "\"arguments\":\"{}\"}}]}}]}", "function" },
	{ "{\"choices\":[{\"message\":{\"tool_calls\":{}}}]}", "tool_calls" },
	{ "{\"choices\":[{\"message\":{\"content\":\"x\"}}],\"usage\":"
	    "{\"prompt_tokens\":\"many\"}}", "usage" },
	{ "{\"choices\":[{\"message\":{\"content\":\"x\"},\"finish_reason\":"
	    "\"tool_calls\"}]}", "tool_use" },
	{ "{\"error\":{\"message\":\"model not loaded\"}}", "model not loaded" },
};

static int
check_bad(const struct provider *p, const struct bad *t, size_t n)
{
	struct model_reply r;
	size_t i;
	int bad = 0;

	for (i = 0; i < n; i++) {
		if (parse(p, t[i].body, &r) != -1 || r.content != NULL ||
		    strstr(r.error, t[i].why) == NULL) {
			fprintf(stderr, "  %s: %s -> \"%s\"\n", p->name,
			    t[i].body, r.error);
			bad++;
		}
		cJSON_Delete(r.content);
	}
	return bad;
}

static void
test_malformed(void)
{
	tt_int_op(check_bad(&provider_anthropic, anthropic_bad,
	    nitems(anthropic_bad)), ==, 0);
	tt_int_op(check_bad(&provider_openai, openai_bad, nitems(openai_bad)),
	    ==, 0);
 end:
	;
}

static void
test_openai_parse(void)
{
	struct model_reply r;
	const cJSON *b;

	memset(&r, 0, sizeof(r));
	tt_int_op(parse(&provider_openai, "{\"id\":\"chatcmpl-123\",\"object\":"
	    "\"chat.completion\",\"created\":1677652288,\"model\":\"gpt-4o\","
	    "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
	    "\"content\":\"Hello there, how may I assist you today?\"},"
	    "\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":"
	    "{\"prompt_tokens\":9,\"completion_tokens\":12,\"total_tokens\":21}}",
	    &r), ==, 0);
	tt_str_op(r.stop, ==, "end_turn");
	tt_int_op(r.in_tokens, ==, 9);
	tt_int_op(r.out_tokens, ==, 12);
	tt_str_op(str(r.content->child, "text"), ==,
	    "Hello there, how may I assist you today?");
	cJSON_Delete(r.content);
	r.content = NULL;

	tt_int_op(parse(&provider_openai, "{\"choices\":[{\"index\":0,"
	    "\"message\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":"
	    "[{\"id\":\"call_abc123\",\"type\":\"function\",\"function\":"
	    "{\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\":\\\"/a\\\"}\"}}"
	    "]},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":"
	    "82,\"completion_tokens\":17}}", &r), ==, 0);
	tt_str_op(r.stop, ==, "tool_use");
	tt_int_op(cJSON_GetArraySize(r.content), ==, 1);
	b = r.content->child;
	tt_str_op(str(b, "type"), ==, "tool_use");
	tt_str_op(str(b, "id"), ==, "call_abc123");
	tt_str_op(str(b, "name"), ==, "read_file");
	tt_str_op(str(get(b, "input"), "path"), ==, "/a");
	cJSON_Delete(r.content);
	r.content = NULL;

	/* A local server: no usage, finish_reason "stop" although it calls a
	 * tool, empty arguments for a tool without parameters. */
	tt_int_op(parse(&provider_openai, "{\"choices\":[{\"message\":"
	    "{\"content\":\"\",\"tool_calls\":[{\"id\":\"1\",\"function\":"
	    "{\"name\":\"current_time\",\"arguments\":\"\"}}]},"
	    "\"finish_reason\":\"stop\"}]}", &r), ==, 0);
	tt_str_op(r.stop, ==, "tool_use");
	tt_int_op(r.in_tokens, ==, 0);
	tt_int_op(r.out_tokens, ==, 0);
	tt_int_op(cJSON_GetArraySize(r.content), ==, 1);
	tt_assert(cJSON_IsObject(get(r.content->child, "input")));
	cJSON_Delete(r.content);
	r.content = NULL;

	tt_int_op(parse(&provider_openai, "{\"choices\":[{\"message\":"
	    "{\"content\":\"cut\"},\"finish_reason\":\"length\"}],\"usage\":null}",
	    &r), ==, 0);
	tt_str_op(r.stop, ==, "max_tokens");
 end:
	cJSON_Delete(r.content);
}

static void
test_error_text(void)
{
	char out[128];
	static const char html[] = "<html>\r\n<b>502</b>\x01\n</html>";

	model_error_text("{\"type\":\"error\",\"error\":{\"type\":"
	    "\"overloaded_error\",\"message\":\"Overloaded\"},\"request_id\":"
	    "\"req_1\"}", 96, out, sizeof(out));
	tt_str_op(out, ==, "overloaded_error: Overloaded");
	{
		const char *b = "{\"error\":{\"message\":\"Invalid 'messages[1]'"
		    "\",\"type\":\"invalid_request_error\",\"param\":null,"
		    "\"code\":null}}";

		model_error_text(b, strlen(b), out, sizeof(out));
		tt_str_op(out, ==,
		    "invalid_request_error: Invalid 'messages[1]'");
	}
	model_error_text("{\"error\":\"model 'x' not found\"}", 31, out,
	    sizeof(out));
	tt_str_op(out, ==, "model 'x' not found");
	model_error_text(html, sizeof(html) - 1, out, sizeof(out));
	tt_str_op(out, ==, "<html>  <b>502</b> </html>");
	model_error_text("", 0, out, sizeof(out));
	tt_str_op(out, ==, "");
	model_error_text("{\"error\":{\"message\":\"x\"}}", 25, out, 4);
	tt_str_op(out, ==, "x");
 end:
	;
}

static void
test_retry_after(void)
{
	int64_t now = 1700000000000LL;
	char date[64];
	time_t t = (time_t)(now / 1000) + 10;
	struct tm tm;

	tt_int_op(model_retry_after("2", now), ==, 2000);
	tt_int_op(model_retry_after(" 0 ", now), ==, 0);
	tt_int_op(model_retry_after("1.5", now), ==, 1500);
	tt_int_op(model_retry_after("86400", now), ==, MODEL_RETRY_AFTER_MAX_MS);
	tt_int_op(model_retry_after("soon", now), ==, -1);
	tt_int_op(model_retry_after("2x", now), ==, -1);
	tt_int_op(model_retry_after("", now), ==, -1);
	tt_int_op(model_retry_after(NULL, now), ==, -1);
	gmtime_r(&t, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	tt_int_op(model_retry_after(date, now), ==, 10000);
	tt_int_op(model_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now), ==,
	    0);
	for (int n = 1; n < 12; n++) {
		long b = model_backoff(n);
		long ceiling = MODEL_BACKOFF_BASE_MS << (n - 1);

		if (ceiling > MODEL_BACKOFF_CAP_MS || n > 7)
			ceiling = MODEL_BACKOFF_CAP_MS;
		tt_assert(b >= 0 && b <= ceiling);
	}
 end:
	;
}

/* model_send against the stand-in on the real loop. */

static pid_t standin_pid = -1;
static int standin_port;

/* Start the stand-in with a script; its first line of output is the port. */
static int
standin_start(const char *script)
{
	char path[] = "/tmp/af-model-script-XXXXXX", line[32];
	int fd, p[2];
	FILE *f;

	if (access("tests/standin/model_server.py", R_OK) == -1)
		return -1;
	if ((fd = mkstemp(path)) == -1)
		return -1;
	if (write(fd, script, strlen(script)) != (ssize_t)strlen(script)) {
		close(fd);
		return -1;
	}
	close(fd);
	if (pipe(p) == -1)
		return -1;
	if ((standin_pid = fork()) == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		/* The system python first: a version manager's shim on PATH
		 * can take seconds to start. */
		execl("/usr/bin/python3", "python3",
		    "tests/standin/model_server.py", "--key", KEY, path,
		    (char *)NULL);
		execlp("python3", "python3", "tests/standin/model_server.py",
		    "--key", KEY, path, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	f = fdopen(p[0], "r");
	standin_port = 0;
	if (f != NULL && fgets(line, sizeof(line), f) != NULL)
		standin_port = atoi(line);
	if (f != NULL)
		fclose(f);
	unlink(path);
	return standin_port > 0 ? 0 : -1;
}

static void
standin_stop(void)
{
	if (standin_pid > 0) {
		kill(standin_pid, SIGTERM);
		waitpid(standin_pid, NULL, 0);
	}
	standin_pid = -1;
}

struct outcome {
	int			 done;
	struct model_reply	 r;
	char			*text;	/* first text block */
	int64_t			 ms;
};

static void
on_reply(struct model_reply *r, void *arg)
{
	struct outcome *o = arg;

	o->done++;
	o->r = *r;
	o->r.content = NULL;
	if (r->ok && r->content != NULL && r->content->child != NULL &&
	    str(r->content->child, "text") != NULL)
		o->text = xstrdup(str(r->content->child, "text"));
	event_base_loopbreak(loop_base());
}

static void
on_guard(void *arg)
{
	*(int *)arg = 1;
	event_base_loopbreak(loop_base());
}

/* Run the loop until the reply comes or secs pass. */
static void
spin(struct outcome *o, long ms)
{
	int expired = 0;
	struct loop_timer *g = loop_timer_add(ms, on_guard, &expired);
	int64_t t0 = mono_ms();

	while (!o->done && !expired)
		event_base_dispatch(loop_base());
	if (!expired)
		loop_timer_cancel(g);
	o->ms = mono_ms() - t0;
}

static int
net_setup(void)
{
	static int ready;

	if (!ready && (loop_init() == -1 || http_init() == -1))
		return -1;
	ready = 1;
	return 0;
}

static struct outcome *
send_one(const struct cfg_model *m, const char *script, const char *msgs,
    long guard_ms)
{
	static struct outcome o;
	cJSON *mj;
	struct cfg_model cm = *m;
	char url[64];

	free(o.text);
	memset(&o, 0, sizeof(o));
	if (net_setup() == -1 || standin_start(script) == -1)
		return NULL;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", standin_port,
	    cm.provider == PROVIDER_OPENAI ? "/v1" : "");
	cm.base_url = url;
	mj = cJSON_Parse(msgs);
	model_send(&cm, "sys", mj, NULL, on_reply, &o);
	cJSON_Delete(mj);	/* serialized by model_send */
	spin(&o, guard_ms);
	return &o;
}

static const char *hello = "[{\"role\":\"user\",\"content\":\"hello\"}]";

static void
test_send_429_retry_after(void)
{
	struct outcome *o = send_one(&anth, "[{\"error\":{\"status\":429,"
	    "\"retry_after\":\"1\",\"message\":\"slow down\"}},"
	    "{\"reply\":{\"text\":\"fine\"}}]", hello, 10000);

	tt_assert(o != NULL);
	tt_int_op(o->done, ==, 1);
	tt_int_op(o->r.ok, ==, 1);
	tt_int_op(o->r.attempts, ==, 2);
	tt_int_op(o->r.http_status, ==, 200);
	tt_str_op(o->text, ==, "fine");
	tt_int_op(o->r.in_tokens, ==, 10);
	/* retry-after was honoured, not the sub-second backoff. */
	tt_int_op(o->ms, >=, 950);
 end:
	standin_stop();
}

static void
test_send_529_then_ok(void)
{
	struct outcome *o = send_one(&anth, "[{\"error\":{\"status\":529,"
	    "\"message\":\"Overloaded\"}},{\"reply\":{\"text\":\"back\"}}]",
	    hello, 10000);

	tt_assert(o != NULL);
	tt_int_op(o->r.ok, ==, 1);
	tt_int_op(o->r.attempts, ==, 2);
	tt_str_op(o->text, ==, "back");
	tt_int_op(o->ms, <=, 3000);
 end:
	standin_stop();
}

static void
test_send_400_no_retry(void)
{
	struct outcome *o = send_one(&oai, "[{\"error\":{\"status\":400,"
	    "\"message\":\"Invalid value for 'model'\"}},"
	    "{\"reply\":{\"text\":\"never\"}}]", hello, 10000);

	tt_assert(o != NULL);
	tt_int_op(o->r.ok, ==, 0);
	tt_int_op(o->r.attempts, ==, 1);
	tt_int_op(o->r.http_status, ==, 400);
	tt_assert(strstr(o->r.error, "HTTP 400") != NULL);
	tt_assert(strstr(o->r.error, "Invalid value for 'model'") != NULL);
 end:
	standin_stop();
}

static void
test_send_garbage(void)
{
	struct outcome *o = send_one(&oai, "[{\"garbage\":true},"
	    "{\"reply\":{\"text\":\"never\"}}]", hello, 10000);

	tt_assert(o != NULL);
	tt_int_op(o->r.ok, ==, 0);
	tt_int_op(o->r.attempts, ==, 1);
	tt_assert(strstr(o->r.error, "malformed") != NULL);
 end:
	standin_stop();
}

static void
test_send_timeout_then_ok(void)
{
	struct cfg_model m = anth;
	struct outcome *o;

	m.timeout_ms = 300;
	o = send_one(&m, "[{\"hang\":true},{\"reply\":{\"text\":\"late\"}}]",
	    hello, 10000);
	tt_assert(o != NULL);
	tt_int_op(o->r.ok, ==, 1);
	tt_int_op(o->r.attempts, ==, 2);
	tt_str_op(o->text, ==, "late");
 end:
	standin_stop();
}

static void
test_send_timeout_gives_up(void)
{
	struct cfg_model m = anth;
	struct outcome *o;

	m.timeout_ms = 200;
	o = send_one(&m, "{\"default\":[],\"exhausted\":{\"hang\":true}}",
	    hello, 30000);
	tt_assert(o != NULL);
	tt_int_op(o->done, ==, 1);
	tt_int_op(o->r.ok, ==, 0);
	tt_int_op(o->r.attempts, ==, MODEL_MAX_ATTEMPTS);
	tt_int_op(o->r.http_status, ==, 0);
	tt_assert(strstr(o->r.error, "model API call failed") != NULL);
 end:
	standin_stop();
}

static void
test_send_cut_then_ok(void)
{
	struct outcome *o = send_one(&oai, "[{\"close\":true},"
	    "{\"reply\":{\"text\":\"whole\"}}]", hello, 10000);

	tt_assert(o != NULL);
	tt_int_op(o->r.ok, ==, 1);
	tt_int_op(o->r.attempts, ==, 2);
	tt_str_op(o->text, ==, "whole");
 end:
	standin_stop();
}

static void
test_send_should_not_retry(void)
{
	struct outcome *o = send_one(&anth, "[{\"error\":{\"status\":500,"
	    "\"message\":\"no\",\"headers\":{\"x-should-retry\":\"false\"}}},"
	    "{\"reply\":{\"text\":\"never\"}}]", hello, 10000);

	tt_assert(o != NULL);
	tt_int_op(o->r.ok, ==, 0);
	tt_int_op(o->r.attempts, ==, 1);
	tt_str_op(o->r.error, ==, "model API HTTP 500: api_error: no");
 end:
	standin_stop();
}

static void
test_send_key_never_in_error(void)
{
	struct outcome *o = send_one(&anth, "[{\"error\":{\"status\":403,"
	    "\"message\":\"key " KEY " may not use this model\"}}]", hello,
	    10000);

	tt_assert(o != NULL);
	tt_int_op(o->r.ok, ==, 0);
	tt_assert(strstr(o->r.error, KEY) == NULL);
	tt_assert(strstr(o->r.error, "[redacted]") != NULL);
 end:
	standin_stop();
}

static void
test_send_wrong_key(void)
{
	struct cfg_model m = oai;
	struct outcome *o;

	m.api_key = "sk-wrong";
	o = send_one(&m, "[{\"reply\":{\"text\":\"never\"}}]", hello, 10000);
	tt_assert(o != NULL);
	tt_int_op(o->r.ok, ==, 0);
	tt_int_op(o->r.http_status, ==, 401);
	tt_int_op(o->r.attempts, ==, 1);
	tt_assert(strstr(o->r.error, "Incorrect API key") != NULL);
 end:
	standin_stop();
}

struct fetch {
	int	 done;
	char	*body;
};

static void
on_fetch(struct http_response *res, void *arg)
{
	struct fetch *f = arg;

	f->done = 1;
	f->body = xstrdup(res->body.data != NULL ? res->body.data : "");
	event_base_loopbreak(loop_base());
}

/* The stand-in's record of what af sent, through af's own HTTP client. */
static cJSON *
standin_requests(void)
{
	struct fetch f = { 0, NULL };
	struct http_request req;
	char url[64];
	cJSON *r;
	int i;

	memset(&req, 0, sizeof(req));
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/_requests",
	    standin_port);
	req.method = "GET";
	req.url = url;
	req.timeout_ms = 5000;
	if (http_start(&req, on_fetch, &f) == NULL)
		return NULL;
	for (i = 0; i < 100 && !f.done; i++)
		event_base_dispatch(loop_base());
	r = f.body != NULL ? cJSON_Parse(f.body) : NULL;
	free(f.body);
	return r;
}

static void
test_send_openai_tool_round(void)
{
	struct outcome *o;
	cJSON *recs = NULL;
	const cJSON *rec, *msgs, *tool;
	char *raw;

	o = send_one(&oai, "[{\"reply\":{\"text\":\"ok\"}}]", convo, 10000);
	tt_assert(o != NULL);
	tt_int_op(o->r.ok, ==, 1);
	recs = standin_requests();
	tt_int_op(cJSON_GetArraySize(recs), ==, 1);
	rec = recs->child;
	tt_str_op(str(rec, "path"), ==, "/v1/chat/completions");
	tt_str_op(str(get(rec, "headers"), "authorization"), ==, "Bearer " KEY);
	msgs = get(get(rec, "body"), "messages");
	tool = cJSON_GetArrayItem(msgs, 3);
	tt_str_op(str(tool, "role"), ==, "tool");
	tt_str_op(str(tool, "content"), ==, "ERROR: permission denied: read");
	/* The key is in the auth header and nowhere in the body. */
	raw = (char *)str(rec, "raw");
	tt_assert(raw != NULL && strstr(raw, KEY) == NULL);
 end:
	cJSON_Delete(recs);
	standin_stop();
}

static int cancelled_cb;

static void
on_cancelled(struct model_reply *r, void *arg)
{
	cancelled_cb++;
}

static void
test_send_cancel(void)
{
	struct cfg_model m = anth;
	struct model_call *mc;
	cJSON *mj = cJSON_Parse(hello);
	char url[64];
	int expired = 0;

	tt_assert(net_setup() == 0);
	tt_assert(standin_start("[{\"hang\":true}]") == 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", standin_port);
	m.base_url = url;
	mc = model_send(&m, NULL, mj, NULL, on_cancelled, NULL);
	/* Let the request go out, then cancel it mid-flight. */
	loop_timer_add(300, on_guard, &expired);
	while (!expired)
		event_base_dispatch(loop_base());
	tt_int_op(http_inflight(), ==, 1);
	model_cancel(mc);
	tt_int_op(http_inflight(), ==, 0);
	expired = 0;
	loop_timer_add(200, on_guard, &expired);
	while (!expired)
		event_base_dispatch(loop_base());
	tt_int_op(cancelled_cb, ==, 0);
	/* Cancel while the first attempt still waits on its timer. */
	mc = model_send(&m, NULL, mj, NULL, on_cancelled, NULL);
	model_cancel(mc);
	expired = 0;
	loop_timer_add(100, on_guard, &expired);
	while (!expired)
		event_base_dispatch(loop_base());
	tt_int_op(cancelled_cb, ==, 0);
 end:
	cJSON_Delete(mj);
	standin_stop();
}

static const struct tt_case cases[] = {
	{ "anthropic_request", test_anthropic_request },
	{ "anthropic_request_minimal", test_anthropic_request_minimal },
	{ "openai_request", test_openai_request },
	{ "openai_request_details", test_openai_request_details },
	{ "headers", test_headers },
	{ "anthropic_parse", test_anthropic_parse },
	{ "openai_parse", test_openai_parse },
	{ "malformed", test_malformed },
	{ "error_text", test_error_text },
	{ "retry_after", test_retry_after },
	{ "send_429_retry_after", test_send_429_retry_after },
	{ "send_529_then_ok", test_send_529_then_ok },
	{ "send_400_no_retry", test_send_400_no_retry },
	{ "send_garbage", test_send_garbage },
	{ "send_timeout_then_ok", test_send_timeout_then_ok },
	{ "send_timeout_gives_up", test_send_timeout_gives_up },
	{ "send_cut_then_ok", test_send_cut_then_ok },
	{ "send_should_not_retry", test_send_should_not_retry },
	{ "send_key_never_in_error", test_send_key_never_in_error },
	{ "send_wrong_key", test_send_wrong_key },
	{ "send_openai_tool_round", test_send_openai_tool_round },
	{ "send_cancel", test_send_cancel },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return tt_main(argc, argv, cases);
}
