/* libFuzzer target for what an MCP server sends af: JSON-RPC messages, SSE
 * streams and newline-delimited stdout, tools/list entries and tools/call
 * results. The first byte picks the framing and the chunk size; the checks
 * are the promises the client relies on: a parsed response has exactly one
 * of result and error and a message for errors, the framers give the same
 * events however the bytes are split and never exceed their bounds, a tool
 * that passes has a name of SERVER__TOOL in [A-Za-z0-9_-] within 64
 * characters, and a result's text is bounded and never empty. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools/mcp.h"

#define FUZZ_MAX_INPUT	(256 << 10)
#define FUZZ_SSE_MAX	4096
#define FUZZ_LINE_MAX	512

static void
check(int cond)
{
	if (!cond)
		abort();
}

static void
check_tool(const cJSON *tool)
{
	struct mcp_tool_info t;
	char why[256];

	if (mcp_tool_parse("srv", tool, &t, why, sizeof(why)) == -1) {
		check(why[0] != '\0');
		return;
	}
	check(strlen(t.name) <= MCP_MAX_TOOL_NAME);
	check(strncmp(t.name, "srv__", 5) == 0);
	check(strcmp(t.name + 5, t.remote) == 0);
	for (const char *p = t.name; *p != '\0'; p++)
		check((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '_' || *p == '-');
	check(strlen(t.schema) <= MCP_MAX_SCHEMA);
	check(strlen(t.description) <= MCP_MAX_DESCRIPTION + 32);
	mcp_tool_info_free(&t);
}

static void
check_result(const cJSON *result)
{
	struct buf out;
	int is_error = -1;

	buf_init(&out);
	mcp_result_text(result, &out, &is_error);
	check(is_error == 0 || is_error == 1);
	check(out.len > 0 && out.len <= MCP_MAX_RESULT_TEXT + 1024);
	buf_free(&out);
}

static void
message(const char *p, size_t n)
{
	struct mcp_msg m;
	const cJSON *tools, *it;
	char why[128];

	why[0] = '\0';
	if (mcp_msg_parse(p, n, &m, why, sizeof(why)) == -1) {
		check(m.root == NULL && why[0] != '\0');
		return;
	}
	if (m.kind == MCP_RESPONSE) {
		check((m.result == NULL) != (m.error == NULL));
		check(m.error == NULL || m.err_message != NULL);
		check(m.result == NULL || m.id != NULL);
		(void)mcp_msg_id_is(&m, 1);
		if (m.result != NULL) {
			check_result(m.result);
			tools = cJSON_GetObjectItemCaseSensitive(m.result,
			    "tools");
			cJSON_ArrayForEach(it, tools)
				check_tool(it);
		}
	} else
		check(m.method != NULL && m.method[0] != '\0');
	mcp_msg_free(&m);
}

struct seen {
	struct buf	log;
	int		max;
};

static int
on_event(const char *event, const char *data, size_t len, void *arg)
{
	struct seen *s = arg;

	check(strlen(event) < 64 && len <= FUZZ_SSE_MAX);
	check(data[len] == '\0');
	buf_addf(&s->log, "%s|%zu|", event, len);
	buf_add(&s->log, data, len);
	message(data, len);
	return 0;
}

static int
on_line(const char *line, size_t len, void *arg)
{
	struct seen *s = arg;

	check(len > 0 && len <= FUZZ_LINE_MAX);
	check(memchr(line, '\n', len) == NULL);
	buf_addf(&s->log, "%zu|", len);
	buf_add(&s->log, line, len);
	message(line, len);
	return 0;
}

/* Feed whole, then in chunks of `step` bytes: the same events, the same
 * verdict. */
static void
framers(int sse, const char *p, size_t n, size_t step)
{
	struct seen a, b;
	struct mcp_sse s1, s2;
	struct mcp_lines l1, l2;
	int r1, r2 = 0;

	buf_init(&a.log);
	buf_init(&b.log);
	if (sse) {
		mcp_sse_init(&s1, FUZZ_SSE_MAX);
		mcp_sse_init(&s2, FUZZ_SSE_MAX);
		r1 = mcp_sse_feed(&s1, p, n, on_event, &a);
		for (size_t i = 0; i < n && r2 == 0; i += step)
			r2 = mcp_sse_feed(&s2, p + i, n - i < step ? n - i :
			    step, on_event, &b);
		mcp_sse_free(&s1);
		mcp_sse_free(&s2);
	} else {
		mcp_lines_init(&l1, FUZZ_LINE_MAX, step & 1);
		mcp_lines_init(&l2, FUZZ_LINE_MAX, step & 1);
		r1 = mcp_lines_feed(&l1, p, n, on_line, &a);
		for (size_t i = 0; i < n && r2 == 0; i += step)
			r2 = mcp_lines_feed(&l2, p + i, n - i < step ? n - i :
			    step, on_line, &b);
		mcp_lines_free(&l1);
		mcp_lines_free(&l2);
	}
	check(r1 == r2);
	if (r1 == 0)
		check(a.log.len == b.log.len &&
		    memcmp(a.log.data, b.log.data, a.log.len) == 0);
	buf_free(&a.log);
	buf_free(&b.log);
}

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data + 1;
	size_t n = size - 1;
	cJSON *j;

	if (size < 1 || size > FUZZ_MAX_INPUT)
		return 0;
	switch (data[0] % 3) {
	case 0:
		message(p, n);
		if ((j = cJSON_ParseWithLength(p, n)) != NULL) {
			check_tool(j);
			check_result(j);
			cJSON_Delete(j);
		}
		break;
	case 1:
		framers(1, p, n, (size_t)(data[0] / 3 % 17) + 1);
		break;
	default:
		framers(0, p, n, (size_t)(data[0] / 3 % 17) + 1);
		break;
	}
	return 0;
}
