/* The Anthropic Messages API (POST /v1/messages). af's conversation is already
 * in this shape, so the request is close to a copy; the reply is rebuilt block
 * by block rather than kept, so nothing the API adds reaches the run unchecked.
 * The checks of neutral content and the error-body reader live here too: the
 * OpenAI parser produces the same blocks and reads the same error shape. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

cJSON *
model_json_parse(const char *s, size_t len)
{
	const char *end = NULL;
	cJSON *v;

	if ((v = cJSON_ParseWithLengthOpts(s, len, &end, 0)) == NULL)
		return NULL;
	while (end < s + len && (*end == ' ' || *end == '\t' ||
	    *end == '\r' || *end == '\n'))
		end++;
	if (end != s + len) {
		cJSON_Delete(v);
		return NULL;
	}
	return v;
}

/* Both parsers end a bad reply here: the error says so, the content goes. */
int
model_reply_malformed(struct model_reply *r, const char *msg)
{
	snprintf(r->error, sizeof(r->error), "malformed model reply: %s", msg);
	cJSON_Delete(r->content);
	r->content = NULL;
	return -1;
}

cJSON *
model_reply_begin(const char *body, size_t len, struct model_reply *r)
{
	cJSON *root;

	r->content = NULL;
	r->in_tokens = r->out_tokens = 0;
	snprintf(r->stop, sizeof(r->stop), "other");
	if ((root = model_json_parse(body, len)) == NULL) {
		model_reply_malformed(r, "not JSON");
		return NULL;
	}
	if (!cJSON_IsObject(root)) {
		model_reply_malformed(r, "not a JSON object");
		cJSON_Delete(root);
		return NULL;
	}
	return root;
}

int
model_reply_api_error(const char *body, size_t len, struct model_reply *r)
{
	char msg[256];

	model_error_text(body, len, msg, sizeof(msg));
	snprintf(r->error, sizeof(r->error), "model error: %s", msg);
	return -1;
}

/* A non-empty string no longer than MODEL_MAX_ID: the id comes back to the
 * API in the tool result, and an empty one cannot be matched. */
static int
valid_id(const cJSON *id)
{
	size_t n;

	if (!cJSON_IsString(id) || id->valuestring == NULL)
		return 0;
	n = strlen(id->valuestring);
	return n > 0 && n <= MODEL_MAX_ID;
}

int
model_check_content(const cJSON *content, char *err, size_t errlen)
{
	const cJSON *b, *o;

	if (!cJSON_IsArray(content)) {
		snprintf(err, errlen, "content is not an array");
		return -1;
	}
	if (cJSON_GetArraySize(content) > MODEL_MAX_BLOCKS) {
		snprintf(err, errlen, "more than %d content blocks",
		    MODEL_MAX_BLOCKS);
		return -1;
	}
	cJSON_ArrayForEach(b, content) {
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type");

		if (!cJSON_IsObject(b) || !cJSON_IsString(type)) {
			snprintf(err, errlen, "content block without a type");
			return -1;
		}
		if (strcmp(type->valuestring, "text") == 0) {
			if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(b,
			    "text"))) {
				snprintf(err, errlen, "text block without text");
				return -1;
			}
			continue;
		}
		if (strcmp(type->valuestring, "tool_use") != 0) {
			snprintf(err, errlen, "unexpected block type");
			return -1;
		}
		if (!valid_id(cJSON_GetObjectItemCaseSensitive(b, "id"))) {
			snprintf(err, errlen, "tool_use without a valid id");
			return -1;
		}
		o = cJSON_GetObjectItemCaseSensitive(b, "name");
		if (!cJSON_IsString(o) || o->valuestring[0] == '\0') {
			snprintf(err, errlen, "tool_use without a name");
			return -1;
		}
		if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(b,
		    "input"))) {
			snprintf(err, errlen, "tool_use input is not an object");
			return -1;
		}
		/* Two calls with one id would make their results ambiguous. */
		for (o = content->child; o != b; o = o->next) {
			const cJSON *t = cJSON_GetObjectItemCaseSensitive(o,
			    "type"), *id = cJSON_GetObjectItemCaseSensitive(o,
			    "id");

			if (strcmp(t->valuestring, "tool_use") == 0 &&
			    strcmp(id->valuestring, cJSON_GetObjectItemCaseSensitive(
			    b, "id")->valuestring) == 0) {
				snprintf(err, errlen, "duplicate tool_use id");
				return -1;
			}
		}
	}
	return 0;
}

/* Token counts: absent or null counts 0 (local servers omit usage), but a
 * present value must be a non-negative number. */
static int
get_tokens(const cJSON *usage, const char *key, long *out)
{
	const cJSON *v;

	*out = 0;
	if (usage == NULL || cJSON_IsNull(usage))
		return 0;
	if (!cJSON_IsObject(usage))
		return -1;
	v = cJSON_GetObjectItemCaseSensitive(usage, key);
	if (v == NULL || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) ||
	    v->valuedouble < 0 || v->valuedouble > 9007199254740992.0)
		return -1;
	*out = (long)v->valuedouble;
	return 0;
}

int
model_finish_reply(struct model_reply *r, const cJSON *usage,
    const char *in_key, const char *out_key)
{
	char err[128];
	const cJSON *b;
	int tool_use = 0;

	if (get_tokens(usage, in_key, &r->in_tokens) == -1 ||
	    get_tokens(usage, out_key, &r->out_tokens) == -1)
		return model_reply_malformed(r, "usage is not a set of token counts");
	if (model_check_content(r->content, err, sizeof(err)) == -1)
		return model_reply_malformed(r, err);
	cJSON_ArrayForEach(b, r->content) {
		if (strcmp(cJSON_GetObjectItemCaseSensitive(b, "type")->valuestring,
		    "tool_use") == 0)
			tool_use = 1;
	}
	if (tool_use)
		snprintf(r->stop, sizeof(r->stop), "tool_use");
	else if (strcmp(r->stop, "tool_use") == 0)
		return model_reply_malformed(r, "stop reason tool_use without a tool_use block");
	return 0;
}

static const char *
map_stop(const char *s)
{
	if (strcmp(s, "end_turn") == 0 || strcmp(s, "stop_sequence") == 0)
		return "end_turn";
	if (strcmp(s, "tool_use") == 0)
		return "tool_use";
	if (strcmp(s, "max_tokens") == 0)
		return "max_tokens";
	return "other";	/* refusal, pause_turn, and whatever comes next */
}

/* One wire block to a neutral one. Block types af never asks for (thinking,
 * server tools) are skipped rather than rejected: they carry nothing the run
 * can act on, and a newer API may add more. Known types are checked strictly. */
static int
add_block(cJSON *out, const cJSON *b, struct model_reply *r)
{
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type");
	const cJSON *v, *id, *name, *input;
	cJSON *nb;

	if (!cJSON_IsObject(b) || !cJSON_IsString(type))
		return model_reply_malformed(r, "content block without a type");
	if (strcmp(type->valuestring, "text") == 0) {
		v = cJSON_GetObjectItemCaseSensitive(b, "text");
		if (!cJSON_IsString(v))
			return model_reply_malformed(r, "text block without text");
		/* The API refuses empty text blocks when they are sent back. */
		if (v->valuestring[0] == '\0')
			return 0;
		nb = cJSON_CreateObject();
		cJSON_AddStringToObject(nb, "type", "text");
		cJSON_AddStringToObject(nb, "text", v->valuestring);
		cJSON_AddItemToArray(out, nb);
		return 0;
	}
	if (strcmp(type->valuestring, "tool_use") != 0)
		return 0;
	id = cJSON_GetObjectItemCaseSensitive(b, "id");
	name = cJSON_GetObjectItemCaseSensitive(b, "name");
	input = cJSON_GetObjectItemCaseSensitive(b, "input");
	if (!valid_id(id))
		return model_reply_malformed(r, "tool_use without a valid id");
	if (!cJSON_IsString(name) || name->valuestring[0] == '\0')
		return model_reply_malformed(r, "tool_use without a name");
	if (!cJSON_IsObject(input))
		return model_reply_malformed(r, "tool_use input is not an object");
	nb = cJSON_CreateObject();
	cJSON_AddStringToObject(nb, "type", "tool_use");
	cJSON_AddStringToObject(nb, "id", id->valuestring);
	cJSON_AddStringToObject(nb, "name", name->valuestring);
	cJSON_AddItemToObject(nb, "input", cJSON_Duplicate(input, 1));
	cJSON_AddItemToArray(out, nb);
	return 0;
}

static int
anthropic_parse(const char *body, size_t len, struct model_reply *r)
{
	cJSON *root;
	const cJSON *type, *content, *stop, *b;
	int rc = -1;

	if ((root = model_reply_begin(body, len, r)) == NULL)
		return -1;
	type = cJSON_GetObjectItemCaseSensitive(root, "type");
	if (cJSON_IsString(type) && strcmp(type->valuestring, "error") == 0) {
		model_reply_api_error(body, len, r);
		goto out;
	}
	if (type != NULL && (!cJSON_IsString(type) ||
	    strcmp(type->valuestring, "message") != 0)) {
		model_reply_malformed(r, "type is not \"message\"");
		goto out;
	}
	content = cJSON_GetObjectItemCaseSensitive(root, "content");
	if (!cJSON_IsArray(content)) {
		model_reply_malformed(r, "content is missing or not an array");
		goto out;
	}
	stop = cJSON_GetObjectItemCaseSensitive(root, "stop_reason");
	if (stop != NULL && !cJSON_IsNull(stop) && !cJSON_IsString(stop)) {
		model_reply_malformed(r, "stop_reason is not a string");
		goto out;
	}
	if (cJSON_IsString(stop))
		snprintf(r->stop, sizeof(r->stop), "%s",
		    map_stop(stop->valuestring));
	r->content = cJSON_CreateArray();
	cJSON_ArrayForEach(b, content) {
		if (add_block(r->content, b, r) == -1)
			goto out;
	}
	if (model_finish_reply(r, cJSON_GetObjectItemCaseSensitive(root,
	    "usage"), "input_tokens", "output_tokens") == -1)
		goto out;
	rc = 0;
 out:
	cJSON_Delete(root);
	return rc;
}

/* The conversation is already Anthropic-shaped: copy it. Tools go out only
 * when there are some, since an empty list is pointless on the wire. */
static char *
anthropic_request(const struct cfg_model *m, const char *system,
    const cJSON *messages, const cJSON *tools, char *err, size_t errlen)
{
	cJSON *root;
	char *s;

	if (!cJSON_IsArray(messages) || cJSON_GetArraySize(messages) == 0) {
		snprintf(err, errlen, "no messages to send");
		return NULL;
	}
	root = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "model", m->name ? m->name : "");
	cJSON_AddNumberToObject(root, "max_tokens", (double)m->max_tokens);
	if (system != NULL && *system != '\0')
		cJSON_AddStringToObject(root, "system", system);
	cJSON_AddItemToObject(root, "messages", cJSON_Duplicate(messages, 1));
	if (cJSON_IsArray(tools) && cJSON_GetArraySize(tools) > 0)
		cJSON_AddItemToObject(root, "tools", cJSON_Duplicate(tools, 1));
	s = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (s == NULL)
		snprintf(err, errlen, "cannot serialize the request");
	return s;
}

static void
anthropic_headers(const struct cfg_model *m, struct strlist *out)
{
	char *h;

	strlist_add(out, "content-type: application/json");
	strlist_add(out, "accept: application/json");
	strlist_add(out, "anthropic-version: " MODEL_ANTHROPIC_VERSION);
	if (m->api_key != NULL && *m->api_key != '\0') {
		h = xasprintf("x-api-key: %s", m->api_key);
		strlist_add(out, h);
		explicit_bzero(h, strlen(h));
		free(h);
	}
}

const struct provider provider_anthropic = {
	.name = "anthropic",
	.request = anthropic_request,
	.headers = anthropic_headers,
	.path = "/v1/messages",
	.parse = anthropic_parse,
};

/* Keep what a person can read: a proxy's HTML error page or binary junk must
 * not put control characters into a log line. */
static void
printable(const char *s, size_t len, char *out, size_t outlen)
{
	size_t i, o = 0;

	if (outlen == 0)
		return;
	for (i = 0; i < len && o + 1 < outlen; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '\n' || c == '\r' || c == '\t')
			c = ' ';
		if (c < 0x20 || c == 0x7f)
			continue;
		out[o++] = (char)c;
	}
	while (o > 0 && out[o - 1] == ' ')
		o--;
	out[o] = '\0';
}

void
model_error_text(const char *body, size_t len, char *out, size_t outlen)
{
	cJSON *root;
	const cJSON *e, *type, *msg;

	if (outlen == 0)
		return;
	out[0] = '\0';
	if (body == NULL || len == 0)
		return;
	root = model_json_parse(body, len);
	e = cJSON_GetObjectItemCaseSensitive(root, "error");
	if (cJSON_IsString(e)) {
		printable(e->valuestring, strlen(e->valuestring), out, outlen);
	} else if (cJSON_IsObject(e)) {
		char tmp[512];

		type = cJSON_GetObjectItemCaseSensitive(e, "type");
		msg = cJSON_GetObjectItemCaseSensitive(e, "message");
		if (cJSON_IsString(type) && cJSON_IsString(msg))
			snprintf(tmp, sizeof(tmp), "%s: %s", type->valuestring,
			    msg->valuestring);
		else if (cJSON_IsString(msg))
			snprintf(tmp, sizeof(tmp), "%s", msg->valuestring);
		else if (cJSON_IsString(type))
			snprintf(tmp, sizeof(tmp), "%s", type->valuestring);
		else
			snprintf(tmp, sizeof(tmp), "unexplained error");
		printable(tmp, strlen(tmp), out, outlen);
	} else
		printable(body, len > 200 ? 200 : len, out, outlen);
	cJSON_Delete(root);
}
