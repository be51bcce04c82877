/* OpenAI chat completions (POST {base_url}/chat/completions), which is also
 * what llama.cpp, vLLM and Ollama speak. The conversation is translated both
 * ways: tool results become "tool" messages, a tool_use's input object becomes
 * the arguments string and back, and an assistant turn's text and tool calls
 * share one message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define OPENAI_ERROR_PREFIX	"ERROR: "

/* Text of a block list (or a plain string), joined by newlines: tool results
 * and multi-block turns become one string on this wire. Non-text blocks are
 * not expressible and make the caller fail. */
static int
join_text(const cJSON *content, struct buf *out)
{
	const cJSON *b, *type, *text;
	int first = 1;

	if (content == NULL || cJSON_IsNull(content))
		return 0;
	if (cJSON_IsString(content)) {
		buf_adds(out, content->valuestring);
		return 0;
	}
	if (!cJSON_IsArray(content))
		return -1;
	cJSON_ArrayForEach(b, content) {
		type = cJSON_GetObjectItemCaseSensitive(b, "type");
		text = cJSON_GetObjectItemCaseSensitive(b, "text");
		if (!cJSON_IsString(type) || strcmp(type->valuestring,
		    "text") != 0 || !cJSON_IsString(text))
			return -1;
		if (!first)
			buf_addc(out, '\n');
		buf_adds(out, text->valuestring);
		first = 0;
	}
	return 0;
}

/* The type of a neutral content block; a "text" block's text is joined to
 * text first, a line apart from the one before. NULL: malformed. */
static const char *
block_type(const cJSON *b, struct buf *text, int *ntext)
{
	const cJSON *type, *v;

	type = cJSON_GetObjectItemCaseSensitive(b, "type");
	if (!cJSON_IsString(type))
		return NULL;
	if (strcmp(type->valuestring, "text") != 0)
		return type->valuestring;
	v = cJSON_GetObjectItemCaseSensitive(b, "text");
	if (!cJSON_IsString(v))
		return NULL;
	if ((*ntext)++ > 0)
		buf_addc(text, '\n');
	buf_adds(text, v->valuestring);
	return type->valuestring;
}

/* A user turn: its tool results first, as "tool" messages (they must follow
 * the assistant message that asked for them), then any text as a user
 * message. An error result says so in its text, since this wire has no flag. */
static int
user_turn(cJSON *out, const cJSON *content, char *err, size_t errlen)
{
	const cJSON *b, *v;
	const char *type;
	struct buf text, res;
	cJSON *msg;
	int ntext = 0, rc = -1;

	buf_init(&text);
	buf_init(&res);
	if (cJSON_IsString(content)) {
		buf_adds(&text, content->valuestring);
		ntext = 1;
		goto done;
	}
	if (!cJSON_IsArray(content)) {
		snprintf(err, errlen, "user message content is not a list");
		goto out;
	}
	cJSON_ArrayForEach(b, content) {
		if ((type = block_type(b, &text, &ntext)) == NULL)
			goto bad;
		if (strcmp(type, "text") == 0)
			continue;
		if (strcmp(type, "tool_result") != 0)
			goto bad;
		v = cJSON_GetObjectItemCaseSensitive(b, "tool_use_id");
		if (!cJSON_IsString(v))
			goto bad;
		buf_reset(&res);
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b,
		    "is_error")))
			buf_adds(&res, OPENAI_ERROR_PREFIX);
		if (join_text(cJSON_GetObjectItemCaseSensitive(b, "content"),
		    &res) == -1)
			goto bad;
		msg = cJSON_CreateObject();
		cJSON_AddStringToObject(msg, "role", "tool");
		cJSON_AddStringToObject(msg, "tool_call_id", v->valuestring);
		cJSON_AddStringToObject(msg, "content", res.data ? res.data : "");
		cJSON_AddItemToArray(out, msg);
	}
 done:
	if (ntext > 0) {
		msg = cJSON_CreateObject();
		cJSON_AddStringToObject(msg, "role", "user");
		cJSON_AddStringToObject(msg, "content",
		    text.data ? text.data : "");
		cJSON_AddItemToArray(out, msg);
	}
	rc = 0;
	goto out;
 bad:
	snprintf(err, errlen, "user message has a block the openai provider "
	    "cannot express");
 out:
	buf_free(&text);
	buf_free(&res);
	return rc;
}

static int
assistant_turn(cJSON *out, const cJSON *content, char *err, size_t errlen)
{
	const cJSON *b, *v;
	const char *type;
	cJSON *msg, *calls = NULL, *call, *fn;
	struct buf text;
	char *args;
	int ntext = 0;

	buf_init(&text);
	msg = cJSON_CreateObject();
	cJSON_AddStringToObject(msg, "role", "assistant");
	if (cJSON_IsString(content)) {
		buf_adds(&text, content->valuestring);
		ntext = 1;
	} else if (!cJSON_IsArray(content))
		goto bad;
	else cJSON_ArrayForEach(b, content) {
		if ((type = block_type(b, &text, &ntext)) == NULL)
			goto bad;
		if (strcmp(type, "text") == 0)
			continue;
		if (strcmp(type, "tool_use") != 0)
			goto bad;
		v = cJSON_GetObjectItemCaseSensitive(b, "input");
		args = cJSON_IsObject(v) ? cJSON_PrintUnformatted(v) : NULL;
		if (args == NULL)
			goto bad;
		if (calls == NULL)
			calls = cJSON_CreateArray();
		call = cJSON_CreateObject();
		v = cJSON_GetObjectItemCaseSensitive(b, "id");
		cJSON_AddStringToObject(call, "id",
		    cJSON_IsString(v) ? v->valuestring : "");
		cJSON_AddStringToObject(call, "type", "function");
		fn = cJSON_AddObjectToObject(call, "function");
		v = cJSON_GetObjectItemCaseSensitive(b, "name");
		cJSON_AddStringToObject(fn, "name",
		    cJSON_IsString(v) ? v->valuestring : "");
		cJSON_AddStringToObject(fn, "arguments", args);
		cJSON_free(args);
		cJSON_AddItemToArray(calls, call);
	}
	/* With tool calls and no text, content is null, as the API documents. */
	if (ntext > 0)
		cJSON_AddStringToObject(msg, "content", text.data ? text.data : "");
	else
		cJSON_AddNullToObject(msg, "content");
	if (calls != NULL)
		cJSON_AddItemToObject(msg, "tool_calls", calls);
	cJSON_AddItemToArray(out, msg);
	buf_free(&text);
	return 0;
 bad:
	snprintf(err, errlen, "assistant message has a block the openai "
	    "provider cannot express");
	cJSON_Delete(calls);
	cJSON_Delete(msg);
	buf_free(&text);
	return -1;
}

static cJSON *
translate_tools(const cJSON *tools)
{
	const cJSON *t, *v;
	cJSON *out = cJSON_CreateArray(), *o, *fn;

	cJSON_ArrayForEach(t, tools) {
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "type", "function");
		fn = cJSON_AddObjectToObject(o, "function");
		v = cJSON_GetObjectItemCaseSensitive(t, "name");
		cJSON_AddStringToObject(fn, "name",
		    cJSON_IsString(v) ? v->valuestring : "");
		v = cJSON_GetObjectItemCaseSensitive(t, "description");
		if (cJSON_IsString(v))
			cJSON_AddStringToObject(fn, "description",
			    v->valuestring);
		v = cJSON_GetObjectItemCaseSensitive(t, "input_schema");
		if (cJSON_IsObject(v))
			cJSON_AddItemToObject(fn, "parameters",
			    cJSON_Duplicate(v, 1));
		else
			cJSON_AddItemToObject(fn, "parameters",
			    cJSON_Parse("{\"type\":\"object\",\"properties\":{}}"));
		cJSON_AddItemToArray(out, o);
	}
	return out;
}

static char *
openai_request(const struct cfg_model *m, const char *system,
    const cJSON *messages, const cJSON *tools, char *err, size_t errlen)
{
	const cJSON *msg, *role, *content;
	cJSON *root, *out;
	const char *maxkey;
	char *s;

	if (!cJSON_IsArray(messages) || cJSON_GetArraySize(messages) == 0) {
		snprintf(err, errlen, "no messages to send");
		return NULL;
	}
	root = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "model", m->name ? m->name : "");
	/* OpenAI's own newer models refuse max_tokens, while local servers
	 * have long known only max_tokens: pick by who we talk to. */
	maxkey = m->base_url != NULL && strstr(m->base_url,
	    "://api.openai.com") != NULL ? "max_completion_tokens" :
	    "max_tokens";
	cJSON_AddNumberToObject(root, maxkey, (double)m->max_tokens);
	out = cJSON_AddArrayToObject(root, "messages");
	if (system != NULL && *system != '\0') {
		cJSON *sm = cJSON_CreateObject();

		cJSON_AddStringToObject(sm, "role", "system");
		cJSON_AddStringToObject(sm, "content", system);
		cJSON_AddItemToArray(out, sm);
	}
	cJSON_ArrayForEach(msg, messages) {
		role = cJSON_GetObjectItemCaseSensitive(msg, "role");
		content = cJSON_GetObjectItemCaseSensitive(msg, "content");
		if (cJSON_IsString(role) && strcmp(role->valuestring,
		    "user") == 0) {
			if (user_turn(out, content, err, errlen) == -1)
				goto fail;
		} else if (cJSON_IsString(role) && strcmp(role->valuestring,
		    "assistant") == 0) {
			if (assistant_turn(out, content, err, errlen) == -1)
				goto fail;
		} else {
			snprintf(err, errlen, "message with an unknown role");
			goto fail;
		}
	}
	if (cJSON_IsArray(tools) && cJSON_GetArraySize(tools) > 0)
		cJSON_AddItemToObject(root, "tools", translate_tools(tools));
	s = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (s == NULL)
		snprintf(err, errlen, "cannot serialize the request");
	return s;
 fail:
	cJSON_Delete(root);
	return NULL;
}

static void
openai_headers(const struct cfg_model *m, struct strlist *out)
{
	char *h;

	strlist_add(out, "Content-Type: application/json");
	strlist_add(out, "Accept: application/json");
	if (m->api_key != NULL && *m->api_key != '\0') {
		h = xasprintf("Authorization: Bearer %s", m->api_key);
		strlist_add(out, h);
		explicit_bzero(h, strlen(h));
		free(h);
	}
}

static void
add_text(cJSON *out, const char *s)
{
	cJSON *b;

	/* Anthropic refuses empty text blocks, and they say nothing. */
	if (*s == '\0')
		return;
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "type", "text");
	cJSON_AddStringToObject(b, "text", s);
	cJSON_AddItemToArray(out, b);
}

/* The message's text: a string, null or absent (local servers send null with
 * tool calls), or a list of text parts. */
static int
parse_text(const cJSON *message, struct model_reply *r)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(message, "content");
	const cJSON *p, *t;

	if (cJSON_IsString(c))
		add_text(r->content, c->valuestring);
	else if (cJSON_IsArray(c)) {
		cJSON_ArrayForEach(p, c) {
			t = cJSON_GetObjectItemCaseSensitive(p, "text");
			if (!cJSON_IsString(t))
				return model_reply_malformed(r, "content part without text");
			add_text(r->content, t->valuestring);
		}
	} else if (c != NULL && !cJSON_IsNull(c))
		return model_reply_malformed(r, "message content is not a string");
	/* A refusal is the model's answer; the run reports it as text. */
	c = cJSON_GetObjectItemCaseSensitive(message, "refusal");
	if (cJSON_IsString(c))
		add_text(r->content, c->valuestring);
	return 0;
}

/* One tool call. arguments must be a string holding a JSON object: anything
 * else (a broken local server, a truncated reply) is malformed, because
 * guessing at a tool's input would run it with what the model did not ask.
 * An empty string is read as {}: some servers send that for tools without
 * parameters. */
static int
parse_call(const cJSON *call, struct model_reply *r)
{
	const cJSON *type, *id, *fn, *name, *args;
	cJSON *input, *b;
	const char *a;

	if (!cJSON_IsObject(call))
		return model_reply_malformed(r, "tool call is not an object");
	type = cJSON_GetObjectItemCaseSensitive(call, "type");
	if (type != NULL && (!cJSON_IsString(type) ||
	    strcmp(type->valuestring, "function") != 0))
		return model_reply_malformed(r, "tool call type is not \"function\"");
	id = cJSON_GetObjectItemCaseSensitive(call, "id");
	fn = cJSON_GetObjectItemCaseSensitive(call, "function");
	name = cJSON_GetObjectItemCaseSensitive(fn, "name");
	args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
	if (!cJSON_IsString(id) || id->valuestring[0] == '\0')
		return model_reply_malformed(r, "tool call without an id");
	if (!cJSON_IsObject(fn) || !cJSON_IsString(name) ||
	    name->valuestring[0] == '\0')
		return model_reply_malformed(r, "tool call without a function name");
	if (!cJSON_IsString(args))
		return model_reply_malformed(r, "tool call arguments are not a string");
	a = args->valuestring + strspn(args->valuestring, " \t\r\n");
	input = *a == '\0' ? cJSON_CreateObject() : model_json_parse(a, strlen(a));
	if (!cJSON_IsObject(input)) {
		cJSON_Delete(input);
		return model_reply_malformed(r, "tool call arguments are not a JSON object");
	}
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "type", "tool_use");
	cJSON_AddStringToObject(b, "id", id->valuestring);
	cJSON_AddStringToObject(b, "name", name->valuestring);
	cJSON_AddItemToObject(b, "input", input);
	cJSON_AddItemToArray(r->content, b);
	return 0;
}

static const char *
map_finish(const cJSON *f)
{
	if (!cJSON_IsString(f))
		return "other";
	if (strcmp(f->valuestring, "stop") == 0)
		return "end_turn";
	if (strcmp(f->valuestring, "tool_calls") == 0 ||
	    strcmp(f->valuestring, "function_call") == 0)
		return "tool_use";
	if (strcmp(f->valuestring, "length") == 0)
		return "max_tokens";
	return "other";	/* content_filter, and whatever comes next */
}

static int
openai_parse(const char *body, size_t len, struct model_reply *r)
{
	cJSON *root;
	const cJSON *choices, *c0, *message, *calls, *call, *f, *e;
	int rc = -1;

	if ((root = model_reply_begin(body, len, r)) == NULL)
		return -1;
	/* Some servers answer 200 with an error body. */
	e = cJSON_GetObjectItemCaseSensitive(root, "error");
	if (e != NULL && !cJSON_IsNull(e)) {
		model_reply_api_error(body, len, r);
		goto out;
	}
	choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
	if (!cJSON_IsArray(choices) || (c0 = choices->child) == NULL) {
		model_reply_malformed(r, "no choices");
		goto out;
	}
	message = cJSON_GetObjectItemCaseSensitive(c0, "message");
	if (!cJSON_IsObject(c0) || !cJSON_IsObject(message)) {
		model_reply_malformed(r, "choice without a message");
		goto out;
	}
	f = cJSON_GetObjectItemCaseSensitive(c0, "finish_reason");
	if (f != NULL && !cJSON_IsNull(f) && !cJSON_IsString(f)) {
		model_reply_malformed(r, "finish_reason is not a string");
		goto out;
	}
	snprintf(r->stop, sizeof(r->stop), "%s", map_finish(f));
	r->content = cJSON_CreateArray();
	if (parse_text(message, r) == -1)
		goto out;
	calls = cJSON_GetObjectItemCaseSensitive(message, "tool_calls");
	if (calls != NULL && !cJSON_IsNull(calls) && !cJSON_IsArray(calls)) {
		model_reply_malformed(r, "tool_calls is not a list");
		goto out;
	}
	cJSON_ArrayForEach(call, calls) {
		if (parse_call(call, r) == -1)
			goto out;
	}
	if (model_finish_reply(r, cJSON_GetObjectItemCaseSensitive(root,
	    "usage"), "prompt_tokens", "completion_tokens") == -1)
		goto out;
	rc = 0;
 out:
	cJSON_Delete(root);
	return rc;
}

const struct provider provider_openai = {
	.name = "openai",
	.request = openai_request,
	.headers = openai_headers,
	.path = "/chat/completions",
	.parse = openai_parse,
};
