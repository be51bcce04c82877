/*
 * The pure side of the MCP client: JSON-RPC message checks, the SSE and line
 * framers, tool entry validation and the shaping of call results. Everything
 * here reads what a server sent, which is untrusted input: every size is
 * bounded and nothing aborts on a bad byte. No loop, no I/O (the fuzzer links
 * this file's functions alone).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/mcp.h"

static const cJSON *
get(const cJSON *obj, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(obj, key);
}

static const char *
get_str(const cJSON *obj, const char *key)
{
	const cJSON *v = get(obj, key);

	return cJSON_IsString(v) && v->valuestring != NULL ? v->valuestring :
	    NULL;
}

/* ---- JSON-RPC messages ---- */

void
mcp_msg_free(struct mcp_msg *m)
{
	cJSON_Delete(m->root);
	memset(m, 0, sizeof(*m));
}

static int
only_space(const char *p, const char *end)
{
	for (; p < end; p++)
		if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n')
			return 0;
	return 1;
}

/* An id is a string or an integral number (JSON-RPC allows both; null ids
 * belong to errors about unparseable requests, which name none of ours). */
static int
id_ok(const cJSON *id)
{
	if (cJSON_IsString(id))
		return id->valuestring != NULL && strlen(id->valuestring) <= 256;
	return cJSON_IsNumber(id) && isfinite(id->valuedouble) &&
	    floor(id->valuedouble) == id->valuedouble &&
	    fabs(id->valuedouble) <= 9007199254740992.0;
}

static int
parse_error(struct mcp_msg *m, char *why, size_t whylen)
{
	const cJSON *code = get(m->error, "code");
	const char *msg = get_str(m->error, "message");

	if (!cJSON_IsObject(m->error) || !cJSON_IsNumber(code)) {
		snprintf(why, whylen, "an error response without an error "
		    "object and code");
		return -1;
	}
	if (isfinite(code->valuedouble) && fabs(code->valuedouble) < 1e9)
		m->err_code = (long)code->valuedouble;
	m->err_message = msg != NULL ? msg : "(no message)";
	return 0;
}

int
mcp_msg_parse(const char *data, size_t len, struct mcp_msg *m, char *why,
    size_t whylen)
{
	const char *end = NULL;
	const cJSON *v;

	memset(m, 0, sizeof(*m));
	if (len > MCP_MAX_MESSAGE) {
		snprintf(why, whylen, "message over %d bytes", MCP_MAX_MESSAGE);
		return -1;
	}
	m->root = cJSON_ParseWithLengthOpts(data, len, &end, 0);
	if (m->root == NULL) {
		snprintf(why, whylen, "not JSON");
		goto bad;
	}
	if (end != NULL && !only_space(end, data + len)) {
		snprintf(why, whylen, "text after the JSON value");
		goto bad;
	}
	if (!cJSON_IsObject(m->root)) {
		snprintf(why, whylen, cJSON_IsArray(m->root) ? "a JSON-RPC batch "
		    "(not part of MCP)" : "not a JSON object");
		goto bad;
	}
	v = get(m->root, "jsonrpc");
	if (!cJSON_IsString(v) || strcmp(v->valuestring, "2.0") != 0) {
		snprintf(why, whylen, "jsonrpc is not \"2.0\"");
		goto bad;
	}
	m->id = get(m->root, "id");
	if (m->id != NULL && cJSON_IsNull(m->id))
		m->id = NULL;
	if (m->id != NULL && !id_ok(m->id)) {
		snprintf(why, whylen, "bad id");
		goto bad;
	}
	m->params = get(m->root, "params");
	if ((v = get(m->root, "method")) != NULL) {
		if (!cJSON_IsString(v) || v->valuestring[0] == '\0' ||
		    strlen(v->valuestring) > 256) {
			snprintf(why, whylen, "bad method");
			goto bad;
		}
		m->method = v->valuestring;
		m->kind = m->id != NULL ? MCP_REQUEST : MCP_NOTIFICATION;
		return 0;
	}
	m->kind = MCP_RESPONSE;
	m->result = get(m->root, "result");
	m->error = get(m->root, "error");
	if ((m->result == NULL) == (m->error == NULL)) {
		snprintf(why, whylen, "a response needs exactly one of result "
		    "and error");
		goto bad;
	}
	if (m->error != NULL && parse_error(m, why, whylen) == -1)
		goto bad;
	if (m->id == NULL && m->result != NULL) {
		snprintf(why, whylen, "a result without an id");
		goto bad;
	}
	return 0;
bad:
	mcp_msg_free(m);
	return -1;
}

int
mcp_msg_id_is(const struct mcp_msg *m, long id)
{
	return m->id != NULL && cJSON_IsNumber(m->id) &&
	    m->id->valuedouble == (double)id;
}

char *
mcp_msg_build(long id, const char *method, const cJSON *params)
{
	cJSON *o = cJSON_CreateObject();
	char *s, *out;

	cJSON_AddStringToObject(o, "jsonrpc", "2.0");
	if (id >= 0)
		cJSON_AddNumberToObject(o, "id", (double)id);
	cJSON_AddStringToObject(o, "method", method);
	if (params != NULL)
		cJSON_AddItemReferenceToObject(o, "params", (cJSON *)params);
	s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (s == NULL)
		fatalx("mcp: out of memory");
	out = xstrdup(s);
	cJSON_free(s);
	return out;
}

/* ---- SSE ---- */

void
mcp_sse_init(struct mcp_sse *s, size_t max)
{
	memset(s, 0, sizeof(*s));
	buf_init(&s->line);
	buf_init(&s->data);
	s->max = max;
}

void
mcp_sse_free(struct mcp_sse *s)
{
	buf_free(&s->line);
	buf_free(&s->data);
}

/* One complete line: a field, a comment, or the empty line that dispatches.
 * The id and retry fields are not used: af does not resume streams. */
static int
sse_line(struct mcp_sse *s, const char *l, size_t n,
    int (*fn)(const char *, const char *, size_t, void *), void *arg)
{
	const char *colon = memchr(l, ':', n), *val = "";
	size_t flen = n, vlen = 0;
	int rc = 0;

	if (n == 0) {
		if (s->has_data)
			rc = fn(s->event[0] ? s->event : "message", s->data.data,
			    s->data.len, arg);
		buf_reset(&s->data);
		s->has_data = 0;
		s->event[0] = '\0';
		return rc;
	}
	if (colon == l)
		return 0;		/* comment */
	if (colon != NULL) {
		flen = (size_t)(colon - l);
		val = colon + 1;
		vlen = n - flen - 1;
		if (vlen > 0 && *val == ' ') {
			val++;
			vlen--;
		}
	}
	if (flen == 4 && memcmp(l, "data", 4) == 0) {
		if (s->data.len + vlen + 1 > s->max)
			return -1;
		if (s->has_data)
			buf_addc(&s->data, '\n');
		buf_add(&s->data, val, vlen);
		s->has_data = 1;
	} else if (flen == 5 && memcmp(l, "event", 5) == 0) {
		if (vlen >= sizeof(s->event))
			vlen = sizeof(s->event) - 1;
		memcpy(s->event, val, vlen);
		s->event[vlen] = '\0';
	}
	return 0;
}

int
mcp_sse_feed(struct mcp_sse *s, const char *p, size_t n,
    int (*fn)(const char *, const char *, size_t, void *), void *arg)
{
	for (size_t i = 0; i < n; i++) {
		char c = p[i];

		if (s->after_cr) {
			s->after_cr = 0;
			if (c == '\n')
				continue;
		}
		if (c == '\r' || c == '\n') {
			s->after_cr = c == '\r';
			if (sse_line(s, s->line.data, s->line.len, fn, arg) == -1)
				return -1;
			buf_reset(&s->line);
			continue;
		}
		if (s->line.len >= s->max)
			return -1;
		buf_addc(&s->line, c);
	}
	return 0;
}

/* ---- lines ---- */

void
mcp_lines_init(struct mcp_lines *l, size_t max, int cut)
{
	memset(l, 0, sizeof(*l));
	buf_init(&l->cur);
	l->max = max;
	l->cut = cut;
}

void
mcp_lines_free(struct mcp_lines *l)
{
	buf_free(&l->cur);
}

int
mcp_lines_feed(struct mcp_lines *l, const char *p, size_t n,
    int (*fn)(const char *, size_t, void *), void *arg)
{
	while (n > 0) {
		const char *nl = memchr(p, '\n', n);
		size_t take = nl != NULL ? (size_t)(nl - p) : n;

		if (!l->skipping) {
			if (l->cur.len + take > l->max) {
				if (!l->cut)
					return -1;
				buf_add(&l->cur, p, l->max - l->cur.len);
				if (fn(l->cur.data, l->cur.len, arg) == -1)
					return -1;
				buf_reset(&l->cur);
				l->skipping = 1;
			} else
				buf_add(&l->cur, p, take);
		}
		if (nl == NULL)
			return 0;
		p += take + 1;
		n -= take + 1;
		if (l->skipping) {
			l->skipping = 0;
			continue;
		}
		if (l->cur.len > 0 && l->cur.data[l->cur.len - 1] == '\r')
			l->cur.data[--l->cur.len] = '\0';
		if (l->cur.len > 0 && fn(l->cur.data, l->cur.len, arg) == -1)
			return -1;
		buf_reset(&l->cur);
	}
	return 0;
}

/* ---- tools ---- */

void
mcp_tool_info_free(struct mcp_tool_info *t)
{
	free(t->name);
	free(t->remote);
	free(t->description);
	free(t->schema);
	memset(t, 0, sizeof(*t));
}

/* Cut s to at most max bytes on a UTF-8 boundary, saying it was cut. */
static char *
bounded_text(const char *s, size_t max)
{
	size_t len = strlen(s), keep = max;

	if (len <= max)
		return xstrdup(s);
	while (keep > 0 && ((unsigned char)s[keep] & 0xc0) == 0x80)
		keep--;
	return xasprintf("%.*s [description cut]", (int)keep, s);
}

static int
name_char_ok(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/*
 * What both model APIs take as a tool name: ^[a-zA-Z0-9_-]{1,64}$. OpenAI's
 * function names allow 64 characters, Anthropic's tool names 128: the
 * shorter bound is the one a name must meet to work with either provider.
 * A name they refuse would fail every request the agent makes, so such a
 * tool is not offered.
 */
static int
api_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > MCP_MAX_TOOL_NAME)
		return 0;
	for (; *name != '\0'; name++)
		if (!name_char_ok(*name))
			return 0;
	return 1;
}

int
mcp_tool_parse(const char *server, const cJSON *tool,
    struct mcp_tool_info *t, char *why, size_t whylen)
{
	const char *name = get_str(tool, "name");
	const char *desc = get_str(tool, "description");
	const cJSON *schema = get(tool, "inputSchema");
	const cJSON *ann = get(tool, "annotations"), *type;
	char *text;

	memset(t, 0, sizeof(*t));
	if (!cJSON_IsObject(tool) || name == NULL) {
		snprintf(why, whylen, "a tool without a name");
		return -1;
	}
	if (name[0] == '\0' || strlen(server) + 2 + strlen(name) >
	    MCP_MAX_TOOL_NAME) {
		snprintf(why, whylen, "tool \"%.80s\": the name is empty or "
		    "%s__%.80s is over %d characters", name, server, name,
		    MCP_MAX_TOOL_NAME);
		return -1;
	}
	for (const char *p = name; *p != '\0'; p++)
		if (!name_char_ok(*p)) {
			snprintf(why, whylen, "tool \"%.80s\": the name has "
			    "characters other than letters, digits, _ and -",
			    name);
			return -1;
		}
	/* The server's name is part of the tool's, and config takes any. */
	t->name = xasprintf("%s__%s", server, name);
	if (!api_name_ok(t->name)) {
		snprintf(why, whylen, "tool %s: %.80s, with the server's name, "
		    "is not a name the model APIs accept (^[a-zA-Z0-9_-]"
		    "{1,%d}$)", name, t->name, MCP_MAX_TOOL_NAME);
		goto fail;
	}
	if (!cJSON_IsObject(schema)) {
		snprintf(why, whylen, "tool %s: inputSchema is not an object",
		    name);
		goto fail;
	}
	type = get(schema, "type");
	if (!cJSON_IsString(type) || strcmp(type->valuestring, "object") != 0) {
		snprintf(why, whylen, "tool %s: inputSchema is not of type "
		    "object", name);
		goto fail;
	}
	if ((text = cJSON_PrintUnformatted(schema)) == NULL)
		fatalx("mcp: out of memory");
	if (strlen(text) > MCP_MAX_SCHEMA) {
		snprintf(why, whylen, "tool %s: inputSchema is over %d bytes",
		    name, MCP_MAX_SCHEMA);
		cJSON_free(text);
		goto fail;
	}
	t->schema = xstrdup(text);
	cJSON_free(text);
	t->remote = xstrdup(name);
	t->description = bounded_text(desc != NULL ? desc : "",
	    MCP_MAX_DESCRIPTION);
	t->readonly = cJSON_IsTrue(get(ann, "readOnlyHint"));
	return 0;
fail:
	mcp_tool_info_free(t);
	return -1;
}

/* ---- results ---- */

/* Decoded size of base64 text, without decoding it. */
static size_t
b64_size(const char *s)
{
	size_t n = 0;

	for (; *s != '\0'; s++)
		if (*s != '=' && *s != '\n' && *s != '\r' && *s != ' ')
			n++;
	return n / 4 * 3 + (n % 4 == 3 ? 2 : n % 4 == 2 ? 1 : 0);
}

static void
sep(struct buf *out)
{
	if (out->len > 0 && out->data[out->len - 1] != '\n')
		buf_addc(out, '\n');
}

static void
add_bounded(struct buf *out, const char *s)
{
	size_t len = strlen(s);

	if (out->len >= MCP_MAX_RESULT_TEXT)
		return;
	if (len > MCP_MAX_RESULT_TEXT - out->len)
		len = MCP_MAX_RESULT_TEXT - out->len;
	buf_add(out, s, len);
}

/* One content item; returns 1 when it was text. */
static int
add_item(struct buf *out, const cJSON *it)
{
	const char *type = get_str(it, "type"), *s, *mime;
	const cJSON *res;
	char line[512];

	if (type == NULL)
		return 0;
	if (strcmp(type, "text") == 0) {
		if ((s = get_str(it, "text")) == NULL)
			return 0;
		sep(out);
		add_bounded(out, s);
		return 1;
	}
	sep(out);
	if (strcmp(type, "image") == 0 || strcmp(type, "audio") == 0) {
		mime = get_str(it, "mimeType");
		s = get_str(it, "data");
		snprintf(line, sizeof(line), "[%s: %.100s, %zu bytes]", type,
		    mime != NULL ? mime : "unknown type", s ? b64_size(s) : 0);
	} else if (strcmp(type, "resource_link") == 0) {
		s = get_str(it, "uri");
		mime = get_str(it, "name");
		snprintf(line, sizeof(line), "[resource link: %.300s%s%.100s]",
		    s != NULL ? s : "(no uri)", mime ? " " : "", mime ? mime : "");
	} else if (strcmp(type, "resource") == 0) {
		res = get(it, "resource");
		s = get_str(res, "uri");
		mime = get_str(res, "mimeType");
		if (get_str(res, "blob") != NULL)
			snprintf(line, sizeof(line), "[resource: %.300s, %.100s, "
			    "%zu bytes]", s ? s : "(no uri)",
			    mime ? mime : "unknown type",
			    b64_size(get_str(res, "blob")));
		else
			snprintf(line, sizeof(line), "[resource: %.300s]",
			    s ? s : "(no uri)");
		add_bounded(out, line);
		if ((s = get_str(res, "text")) != NULL) {
			buf_addc(out, '\n');
			add_bounded(out, s);
		}
		return 0;
	} else
		snprintf(line, sizeof(line), "[%.64s content]", type);
	add_bounded(out, line);
	return 0;
}

void
mcp_result_text(const cJSON *result, struct buf *out, int *is_error)
{
	const cJSON *content = get(result, "content"), *it;
	const cJSON *sc = get(result, "structuredContent");
	int texts = 0;

	*is_error = cJSON_IsTrue(get(result, "isError"));
	if (cJSON_IsArray(content))
		cJSON_ArrayForEach(it, content)
			texts += add_item(out, it);
	if (texts == 0 && sc != NULL) {
		char *s = cJSON_PrintUnformatted(sc);

		if (s != NULL) {
			sep(out);
			add_bounded(out, s);
			cJSON_free(s);
		}
	}
	if (out->len == 0)
		buf_adds(out, *is_error ? "(the tool failed without a message)" :
		    "(no content)");
}
