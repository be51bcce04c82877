/* The MCP client's pure parts: JSON-RPC message checks, the SSE and line
 * framers (split at every byte, CR/LF/CRLF, bounds), tool entry validation
 * and the shaping of tools/call results; and the install of listed tools,
 * against MCP servers over HTTP on 127.0.0.1 (evhttp, on the real loop). */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "http.h"
#include "loop.h"
#include "tool.h"
#include "tools/mcp.h"
#include "tt.h"
#include "util.h"

static const struct {
	const char	*text;
	int		 ok;
	int		 kind;
} msgs[] = {
	{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", 1, MCP_RESPONSE },
	{ "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"ping\"}", 1,
	  MCP_REQUEST },
	{ "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}", 1,
	  MCP_NOTIFICATION },
	{ "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,"
	  "\"message\":\"parse\"}}", 1, MCP_RESPONSE },
	{ "  {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":null}\r\n", 1,
	  MCP_RESPONSE },
	{ "{\"jsonrpc\":\"1.0\",\"id\":1,\"result\":{}}", 0, 0 },
	{ "{\"id\":1,\"result\":{}}", 0, 0 },
	{ "[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}]", 0, 0 },
	{ "{\"jsonrpc\":\"2.0\",\"id\":1}", 0, 0 },
	{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{\"code\":1}}",
	  0, 0 },
	{ "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"result\":{}}", 0, 0 },
	{ "{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{}}", 0, 0 },
	{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"message\":\"x\"}}", 0, 0 },
	{ "{\"jsonrpc\":\"2.0\",\"result\":{}}", 0, 0 },
	{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}} x", 0, 0 },
	{ "{\"jsonrpc\":\"2.0\",\"method\":5}", 0, 0 },
	{ "{\"jsonrpc\":\"2.0\",\"method\":\"\"}", 0, 0 },
	{ "", 0, 0 },
	{ "nul", 0, 0 },
};

static void
test_msg_parse(void)
{
	struct mcp_msg m;
	char why[128];

	memset(&m, 0, sizeof(m));
	for (size_t i = 0; i < nitems(msgs); i++) {
		int rc = mcp_msg_parse(msgs[i].text, strlen(msgs[i].text), &m,
		    why, sizeof(why));

		if (rc != (msgs[i].ok ? 0 : -1))
			tt_fail_msg("case %zu (%s): rc %d", i, msgs[i].text, rc);
		if (rc == 0 && (int)m.kind != msgs[i].kind)
			tt_fail_msg("case %zu: kind %d", i, (int)m.kind);
		if (rc == -1 && (m.root != NULL || why[0] == '\0'))
			tt_fail_msg("case %zu: failure without a reason", i);
		mcp_msg_free(&m);
	}
end:
	mcp_msg_free(&m);
}

static void
test_msg_fields(void)
{
	const char *t = "{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":"
	    "-32601,\"message\":\"no such method\"}}";
	struct mcp_msg m;
	char why[128], *built = NULL;
	cJSON *p = NULL;

	tt_int_op(mcp_msg_parse(t, strlen(t), &m, why, sizeof(why)), ==, 0);
	tt_assert(mcp_msg_id_is(&m, 7));
	tt_assert(!mcp_msg_id_is(&m, 8));
	tt_int_op(m.err_code, ==, -32601);
	tt_str_op(m.err_message, ==, "no such method");
	mcp_msg_free(&m);

	p = cJSON_CreateObject();
	cJSON_AddStringToObject(p, "a", "line\nbreak");
	built = mcp_msg_build(3, "tools/call", p);
	tt_assert(strchr(built, '\n') == NULL);
	tt_str_op(built, ==, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":"
	    "\"tools/call\",\"params\":{\"a\":\"line\\nbreak\"}}");
	free(built);
	built = mcp_msg_build(-1, "notifications/initialized", NULL);
	tt_str_op(built, ==, "{\"jsonrpc\":\"2.0\",\"method\":"
	    "\"notifications/initialized\"}");
end:
	free(built);
	cJSON_Delete(p);
	mcp_msg_free(&m);
}

struct events {
	struct buf	log;
	int		n;
};

static int
on_event(const char *event, const char *data, size_t len, void *arg)
{
	struct events *e = arg;

	buf_addf(&e->log, "[%s|", event);
	buf_add(&e->log, data, len);
	buf_adds(&e->log, "]");
	e->n++;
	return 0;
}

/* The same stream fed whole and one byte at a time gives the same events. */
static void
test_sse(void)
{
	const char *stream = "id: 1\ndata: \n\n"
	    ": a comment\r\n"
	    "event: message\r\ndata: {\"a\":1}\r\n\r\n"
	    "data: first\rdata:second\r\rdata\n\n"
	    "event: other\ndata: x\n\n"
	    "data: cut at the end";
	const char *want = "[message|][message|{\"a\":1}]"
	    "[message|first\nsecond][message|][other|x]";
	struct mcp_sse s;
	struct events e;

	buf_init(&e.log);
	for (int step = 0; step < 2; step++) {
		mcp_sse_init(&s, 1024);
		buf_reset(&e.log);
		if (step == 0)
			tt_int_op(mcp_sse_feed(&s, stream, strlen(stream),
			    on_event, &e), ==, 0);
		else
			for (size_t i = 0; stream[i] != '\0'; i++)
				tt_int_op(mcp_sse_feed(&s, stream + i, 1,
				    on_event, &e), ==, 0);
		tt_str_op(e.log.data, ==, want);
		mcp_sse_free(&s);
	}
	/* Bounds: a line, and an event made of many lines. */
	mcp_sse_init(&s, 16);
	tt_int_op(mcp_sse_feed(&s, "data: 0123456789abcdef\n", 23, on_event,
	    &e), ==, -1);
	mcp_sse_free(&s);
	mcp_sse_init(&s, 16);
	tt_int_op(mcp_sse_feed(&s, "data: 0123456\ndata: 789abcd\n", 28,
	    on_event, &e), ==, 0);
	tt_int_op(mcp_sse_feed(&s, "data: 0123\n", 11, on_event, &e), ==, -1);
end:
	mcp_sse_free(&s);
	buf_free(&e.log);
}

static int
on_line(const char *line, size_t len, void *arg)
{
	struct events *e = arg;

	buf_adds(&e->log, "[");
	buf_add(&e->log, line, len);
	buf_adds(&e->log, "]");
	return 0;
}

static void
test_lines(void)
{
	struct mcp_lines l;
	struct events e;
	const char *in = "one\r\n\ntwo\nthree-is-long\nfour\npart";

	buf_init(&e.log);
	mcp_lines_init(&l, 8, 0);
	for (size_t i = 0; i < 14; i++)
		tt_int_op(mcp_lines_feed(&l, in + i, 1, on_line, &e), ==, 0);
	tt_str_op(e.log.data, ==, "[one][two]");
	tt_int_op(mcp_lines_feed(&l, in + 14, strlen(in + 14), on_line, &e),
	    ==, -1);
	mcp_lines_free(&l);

	buf_reset(&e.log);
	mcp_lines_init(&l, 8, 1);
	tt_int_op(mcp_lines_feed(&l, in, strlen(in), on_line, &e), ==, 0);
	tt_str_op(e.log.data, ==, "[one][two][three-is][four]");
	tt_int_op(mcp_lines_feed(&l, "\n", 1, on_line, &e), ==, 0);
	tt_str_op(e.log.data, ==, "[one][two][three-is][four][part]");
end:
	mcp_lines_free(&l);
	buf_free(&e.log);
}

static const struct {
	const char	*server;
	const char	*tool;
	int		 ok;
	int		 readonly;
} tools[] = {
	{ "fs", "{\"name\":\"read_file\",\"description\":\"d\",\"inputSchema\":"
	  "{\"type\":\"object\"},\"annotations\":{\"readOnlyHint\":true}}", 1, 1 },
	{ "fs", "{\"name\":\"get-env\",\"inputSchema\":{\"type\":\"object\"}}",
	  1, 0 },
	{ "fs", "{\"name\":\"w\",\"inputSchema\":{\"type\":\"object\"},"
	  "\"annotations\":{\"readOnlyHint\":\"true\"}}", 1, 0 },
	{ "fs", "{\"name\":\"a.b\",\"inputSchema\":{\"type\":\"object\"}}", 0, 0 },
	{ "fs", "{\"name\":\"a b\",\"inputSchema\":{\"type\":\"object\"}}", 0, 0 },
	{ "fs", "{\"name\":\"\",\"inputSchema\":{\"type\":\"object\"}}", 0, 0 },
	{ "fs", "{\"inputSchema\":{\"type\":\"object\"}}", 0, 0 },
	{ "fs", "{\"name\":\"x\"}", 0, 0 },
	{ "fs", "{\"name\":\"x\",\"inputSchema\":{\"type\":\"string\"}}", 0, 0 },
	{ "fs", "{\"name\":\"x\",\"inputSchema\":[]}", 0, 0 },
	{ "fs", "{\"name\":\"x\\u00e9\",\"inputSchema\":{\"type\":\"object\"}}",
	  0, 0 },
	/* The server's name is part of the name the model sees. */
	{ "b.c", "{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\"}}",
	  0, 0 },
	{ "my fs", "{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\"}}",
	  0, 0 },
	{ "f\xc3\xa9", "{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\"}}",
	  0, 0 },
	{ "a-1_", "{\"name\":\"_t\",\"inputSchema\":{\"type\":\"object\"}}",
	  1, 0 },
	/* 2 + 2 + 60 = 64 characters: the bound itself. */
	{ "fs", "{\"name\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	  "\",\"inputSchema\":{\"type\":\"object\"}}", 1, 0 },
	{ "fs", "{\"name\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	  "\",\"inputSchema\":{\"type\":\"object\"}}", 0, 0 },
};

static void
test_tool_parse(void)
{
	struct mcp_tool_info t;
	cJSON *j = NULL;
	char why[256];
	struct buf big;

	memset(&t, 0, sizeof(t));
	buf_init(&big);
	for (size_t i = 0; i < nitems(tools); i++) {
		int rc;

		j = cJSON_Parse(tools[i].tool);
		tt_assert(j != NULL);
		rc = mcp_tool_parse(tools[i].server, j, &t, why, sizeof(why));
		if (rc != (tools[i].ok ? 0 : -1))
			tt_fail_msg("case %zu: rc %d (%s)", i, rc, why);
		if (rc == 0 && t.readonly != tools[i].readonly)
			tt_fail_msg("case %zu: readonly %d", i, t.readonly);
		if (rc == 0 && strlen(t.name) > MCP_MAX_TOOL_NAME)
			tt_fail_msg("case %zu: name too long", i);
		mcp_tool_info_free(&t);
		cJSON_Delete(j);
		j = NULL;
	}
	j = cJSON_Parse(tools[0].tool);
	tt_int_op(mcp_tool_parse("fs", j, &t, why, sizeof(why)), ==, 0);
	tt_str_op(t.name, ==, "fs__read_file");
	tt_str_op(t.remote, ==, "read_file");
	tt_str_op(t.schema, ==, "{\"type\":\"object\"}");
	mcp_tool_info_free(&t);
	cJSON_Delete(j);

	/* Untrusted sizes: a long description is cut, a huge schema refused. */
	buf_adds(&big, "{\"name\":\"x\",\"description\":\"");
	for (int i = 0; i < MCP_MAX_DESCRIPTION + 100; i++)
		buf_addc(&big, 'd');
	buf_adds(&big, "\",\"inputSchema\":{\"type\":\"object\",\"description\":\"");
	buf_adds(&big, "s\"}}");
	j = cJSON_Parse(big.data);
	tt_int_op(mcp_tool_parse("fs", j, &t, why, sizeof(why)), ==, 0);
	tt_assert(strlen(t.description) < MCP_MAX_DESCRIPTION + 64);
	tt_assert(strstr(t.description, "[description cut]") != NULL);
	mcp_tool_info_free(&t);
	cJSON_Delete(j);
	buf_reset(&big);
	buf_adds(&big, "{\"name\":\"x\",\"inputSchema\":{\"type\":\"object\","
	    "\"description\":\"");
	for (int i = 0; i < MCP_MAX_SCHEMA; i++)
		buf_addc(&big, 's');
	buf_adds(&big, "\"}}");
	j = cJSON_Parse(big.data);
	tt_int_op(mcp_tool_parse("fs", j, &t, why, sizeof(why)), ==, -1);
	tt_assert(strstr(why, "over") != NULL);
end:
	mcp_tool_info_free(&t);
	cJSON_Delete(j);
	buf_free(&big);
}

static const struct {
	const char	*result;
	const char	*text;
	int		 is_error;
} results[] = {
	{ "{\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\","
	  "\"text\":\"b\"}]}", "a\nb", 0 },
	{ "{\"content\":[{\"type\":\"image\",\"mimeType\":\"image/png\","
	  "\"data\":\"iVBORw0KGgo=\"}]}", "[image: image/png, 8 bytes]", 0 },
	{ "{\"content\":[{\"type\":\"audio\",\"mimeType\":\"audio/wav\","
	  "\"data\":\"AAAA\"}]}", "[audio: audio/wav, 3 bytes]", 0 },
	{ "{\"content\":[{\"type\":\"resource_link\",\"uri\":\"file:///a\","
	  "\"name\":\"a\"}]}", "[resource link: file:///a a]", 0 },
	{ "{\"content\":[{\"type\":\"resource\",\"resource\":{\"uri\":"
	  "\"test://r\",\"text\":\"body\"}}]}", "[resource: test://r]\nbody", 0 },
	{ "{\"content\":[{\"type\":\"resource\",\"resource\":{\"uri\":"
	  "\"test://b\",\"mimeType\":\"application/gzip\",\"blob\":\"AAAAAA==\"}}]}",
	  "[resource: test://b, application/gzip, 4 bytes]", 0 },
	{ "{\"content\":[{\"type\":\"text\",\"text\":\"boom\"}],\"isError\":true}",
	  "boom", 1 },
	{ "{\"content\":[],\"structuredContent\":{\"t\":21}}", "{\"t\":21}", 0 },
	{ "{\"content\":[{\"type\":\"text\",\"text\":\"x\"}],"
	  "\"structuredContent\":{\"t\":21}}", "x", 0 },
	{ "{\"content\":[{\"type\":\"video\"},{\"nope\":1},5]}",
	  "[video content]", 0 },
	{ "{}", "(no content)", 0 },
	{ "{\"isError\":true}", "(the tool failed without a message)", 1 },
	{ "[]", "(no content)", 0 },
};

static void
test_result_text(void)
{
	struct buf out;
	cJSON *j = NULL;
	int is_error;

	buf_init(&out);
	for (size_t i = 0; i < nitems(results); i++) {
		j = cJSON_Parse(results[i].result);
		tt_assert(j != NULL);
		buf_reset(&out);
		mcp_result_text(j, &out, &is_error);
		if (strcmp(out.data, results[i].text) != 0 ||
		    is_error != results[i].is_error)
			tt_fail_msg("case %zu: \"%s\" %d", i, out.data, is_error);
		cJSON_Delete(j);
		j = NULL;
	}
end:
	cJSON_Delete(j);
	buf_free(&out);
}

/* ---- install: names taken, names refused ---- */

/* What each test server lists, by path; /late answers tools/list only
 * after a while, so that the other servers' tools are in first. */
static const struct {
	const char	*path;
	const char	*tools;
} listings[] = {
	{ "/a", "[{\"name\":\"_x\",\"description\":\"from a\","
	  "\"inputSchema\":{\"type\":\"object\"}},"
	  "{\"name\":\"y\",\"inputSchema\":{\"type\":\"object\"}},"
	  "{\"name\":\"y\",\"inputSchema\":{\"type\":\"object\"}}]" },
	{ "/late", "[{\"name\":\"x\",\"description\":\"from a_\","
	  "\"inputSchema\":{\"type\":\"object\"}},"
	  "{\"name\":\"z\",\"inputSchema\":{\"type\":\"object\"}}]" },
	{ "/bad", "[{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\"}}]" },
};

static void
mcp_reply(struct evhttp_request *req, const char *json)
{
	struct evbuffer *b = evbuffer_new();

	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "application/json");
	evbuffer_add(b, json, strlen(json));
	evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

struct late_reply {
	struct evhttp_request	*req;
	char			*json;
};

static void
late_fire(evutil_socket_t fd, short what, void *arg)
{
	struct late_reply *l = arg;

	mcp_reply(l->req, l->json);
	free(l->json);
	free(l);
}

/* A Streamable HTTP server in its plainest form: one JSON answer per
 * request, 202 for notifications, no session. */
static void
mcp_serve(struct evhttp_request *req, void *arg)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t n = evbuffer_get_length(in);
	char *body = xmalloc(n + 1), *out;
	const char *uri = evhttp_request_get_uri(req), *listed = "[]";
	cJSON *m, *id, *method;
	struct late_reply *l;
	struct timeval tv = { 0, 300000 };

	evbuffer_remove(in, body, n);
	body[n] = '\0';
	m = cJSON_Parse(body);
	free(body);
	id = cJSON_GetObjectItemCaseSensitive(m, "id");
	method = cJSON_GetObjectItemCaseSensitive(m, "method");
	if (id == NULL || !cJSON_IsString(method)) {
		evhttp_send_reply(req, 202, "Accepted", NULL);
		cJSON_Delete(m);
		return;
	}
	for (size_t i = 0; i < nitems(listings); i++)
		if (strcmp(uri, listings[i].path) == 0)
			listed = listings[i].tools;
	if (strcmp(method->valuestring, "initialize") == 0)
		out = xasprintf("{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":"
		    "{\"protocolVersion\":\"%s\",\"capabilities\":{\"tools\":"
		    "{}},\"serverInfo\":{\"name\":\"t\",\"version\":\"1\"}}}",
		    id->valueint, MCP_PROTOCOL_VERSION);
	else
		out = xasprintf("{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":"
		    "{\"tools\":%s}}", id->valueint, listed);
	cJSON_Delete(m);
	if (strcmp(uri, "/late") == 0 && strstr(out, "\"tools\":[") != NULL) {
		l = xcalloc(1, sizeof(*l));
		l->req = req;
		l->json = out;
		event_base_once(loop_base(), -1, EV_TIMEOUT, late_fire, l, &tv);
		return;
	}
	mcp_reply(req, out);
	free(out);
}

static void
add_server(struct cfg *c, const char *name, int port, const char *path)
{
	struct cfg_mcp *m = &c->mcp[c->nmcp++];

	m->name = xstrdup(name);
	m->url = xasprintf("http://127.0.0.1:%d%s", port, path);
	m->timeout_ms = 5000;
}

static int
count_named(const cJSON *schemas, const char *name)
{
	const cJSON *t;
	int n = 0;

	cJSON_ArrayForEach(t, schemas) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(t, "name");

		n += cJSON_IsString(v) && strcmp(v->valuestring, name) == 0;
	}
	return n;
}

static int
tools_of(const cJSON *st, const char *server)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(st, server), "tools");

	return cJSON_IsNumber(v) ? v->valueint : -1;
}

/*
 * Servers a (tool _x) and a_ (tool x) both offer a___x: the engine finds
 * tools by name, so only the first may have it, and the second is told
 * about. (The config loader refuses the name a_ for this reason; the
 * config here is built by hand to test the check behind it.) A server
 * whose name the model APIs refuse offers nothing.
 */
static void
test_install_names(void)
{
	char logpath[] = "/tmp/af-test-mcp-XXXXXX", *log = NULL;
	struct evhttp *h = NULL;
	struct evhttp_bound_socket *bs;
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	struct cfg *c = xcalloc(1, sizeof(*c));
	const struct tool_def *d;
	cJSON *schemas = NULL, *st = NULL;
	struct buf b;
	int lfd, saved = -1, port;

	buf_init(&b);
	tt_int_op(loop_init(), ==, 0);
	tt_int_op(http_init(), ==, 0);
	h = evhttp_new(loop_base());
	evhttp_set_gencb(h, mcp_serve, NULL);
	bs = evhttp_bind_socket_with_handle(h, "127.0.0.1", 0);
	tt_assert(bs != NULL);
	getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&sin,
	    &sl);
	port = ntohs(sin.sin_port);
	c->mcp = xcalloc(3, sizeof(*c->mcp));
	add_server(c, "a", port, "/a");
	add_server(c, "a_", port, "/late");
	add_server(c, "b.c", port, "/bad");

	/* What af logs goes to a file, to be read back. */
	tt_assert((lfd = mkstemp(logpath)) != -1);
	saved = dup(STDERR_FILENO);
	dup2(lfd, STDERR_FILENO);
	close(lfd);
	mcp_start(c);
	dup2(saved, STDERR_FILENO);
	close(saved);
	saved = -1;
	tt_int_op(read_file_max(logpath, 1 << 20, &b), ==, 0);
	log = b.data != NULL ? buf_steal(&b) : xstrdup("");

	d = tool_find(c, "a___x");
	tt_assert(d != NULL);
	tt_str_op(d->description, ==, "from a");
	schemas = tool_schemas(c);
	tt_int_op(count_named(schemas, "a___x"), ==, 1);
	tt_int_op(count_named(schemas, "a__y"), ==, 1);
	tt_int_op(count_named(schemas, "a___z"), ==, 1);
	tt_int_op(count_named(schemas, "b.c__t"), ==, 0);
	st = mcp_status_json();
	tt_int_op(tools_of(st, "a"), ==, 2);
	tt_int_op(tools_of(st, "a_"), ==, 1);
	tt_int_op(tools_of(st, "b.c"), ==, 0);
	tt_assert(strstr(log, "mcp a_: tool x would be a___x, which server a's "
	    "tool _x already is; skipped") != NULL);
	tt_assert(strstr(log, "mcp a: tool y is listed twice") != NULL);
	tt_assert(strstr(log, "mcp b.c: tool t: b.c__t") != NULL);
end:
	if (saved != -1) {
		dup2(saved, STDERR_FILENO);
		close(saved);
	}
	if (log != NULL)
		fputs(tt_failed_now ? log : "", stderr);
	unlink(logpath);
	free(log);
	buf_free(&b);
	cJSON_Delete(schemas);
	cJSON_Delete(st);
	mcp_free();
	http_shutdown();
	if (h != NULL)
		evhttp_free(h);
	loop_free();
	cfg_free(c);
}

static const struct tt_case cases[] = {
	{ "msg_parse", test_msg_parse },
	{ "msg_fields", test_msg_fields },
	{ "sse", test_sse },
	{ "lines", test_lines },
	{ "tool_parse", test_tool_parse },
	{ "result_text", test_result_text },
	{ "install_names", test_install_names },
	{ NULL, NULL },
};

int
main(int argc, char **argv)
{
	return tt_main(argc, argv, cases);
}
