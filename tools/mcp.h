/*
 * MCP servers (tools.mcp): a JSON-RPC 2.0 client over stdio (a subprocess
 * speaking newline-delimited JSON) or Streamable HTTP (a POST per message,
 * answered with JSON or an SSE stream). Each server's tools become dynamic
 * tools named SERVER__TOOL; the engine authorizes and audits their calls like
 * any other.
 *
 * mcp.c is the client on the loop; mcp_proto.c holds the pure parsing and
 * shaping below, which links without the loop (unit tests, the fuzzer).
 */
#ifndef AF_MCP_H
#define AF_MCP_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "util.h"

#define MCP_PROTOCOL_VERSION	"2025-11-25"	/* what we ask for */
#define MCP_MAX_MESSAGE		(4 << 20)	/* one JSON-RPC message */
#define MCP_MAX_TOOL_NAME	64	/* SERVER__TOOL: the model APIs' bound */
#define MCP_MAX_DESCRIPTION	(4 << 10)	/* bytes kept of a description */
#define MCP_MAX_SCHEMA		(32 << 10)	/* an input schema, as JSON text */
#define MCP_MAX_RESULT_TEXT	(1 << 20)	/* a call's text before the cap */
#define MCP_SSE_MAX_EVENT	MCP_MAX_MESSAGE	/* data of one SSE event */

/* ---- lifecycle (engine/daemon.c) ---- */

/*
 * Start every configured server, after the sandbox. Waits, turning the loop,
 * until each server has finished its first tools/list or failed, or
 * MCP_READY_MS passed, so runs that start next see the tools. A server that
 * fails is retried with backoff and never fails the daemon. Returns 0.
 */
int mcp_start(const struct cfg *);
/* Shutdown begins: no more restarts. Servers keep serving runs that drain. */
void mcp_stop(void);
/* After the loop ended (and before http_shutdown): cancel what is pending,
 * stop every server process (stdin closed, SIGTERM, then SIGKILL) and free. */
void mcp_free(void);
/* {"fs":{"state":"up","transport":"stdio","tools":12,"restarts":0,
 * "last_error":null,"pid":123},...}; caller owns it. */
cJSON *mcp_status_json(void);

/* ---- pure protocol pieces (mcp_proto.c) ---- */

enum mcp_kind {
	MCP_RESPONSE,		/* id with result or error */
	MCP_REQUEST,		/* method with id: the server asks us */
	MCP_NOTIFICATION	/* method without id */
};

/* One parsed JSON-RPC message; borrowed pointers point into root. */
struct mcp_msg {
	cJSON		*root;
	enum mcp_kind	 kind;
	const cJSON	*id;		/* number or string; NULL: notification */
	const char	*method;	/* requests and notifications */
	const cJSON	*params;
	const cJSON	*result;	/* responses: exactly one of these */
	const cJSON	*error;
	long		 err_code;
	const char	*err_message;	/* never NULL for an error response */
};

/* Parse and check one message (a single object; JSON-RPC batches are not part
 * of the protocol since 2025-06-18). 0, or -1 with why filled. */
int mcp_msg_parse(const char *data, size_t len, struct mcp_msg *,
    char *why, size_t whylen);
void mcp_msg_free(struct mcp_msg *);
/* Does a response's id equal our integer id? */
int mcp_msg_id_is(const struct mcp_msg *, long id);

/* Incremental SSE parser (the WHATWG event stream format): lines end with
 * CRLF, LF or CR, "data:" lines join with "\n", an empty line dispatches.
 * Lines and event data are bounded by max. */
struct mcp_sse {
	struct buf	 line;
	struct buf	 data;
	char		 event[64];
	int		 has_data;
	int		 after_cr;	/* a CR ended the last line: skip one LF */
	size_t		 max;
};
void mcp_sse_init(struct mcp_sse *, size_t max);
void mcp_sse_free(struct mcp_sse *);
/* Feed bytes; fn gets each dispatched event (type "message" when the stream
 * named none). Returns 0, or -1 when a line or event is over max or fn
 * returned -1 (the stream must then be dropped). */
int mcp_sse_feed(struct mcp_sse *, const char *, size_t,
    int (*fn)(const char *event, const char *data, size_t len, void *arg),
    void *arg);

/* Newline-delimited lines with a bound. Over-long lines are an error (-1),
 * or, with cut set, delivered cut to max and the rest skipped (logs). */
struct mcp_lines {
	struct buf	 cur;
	size_t		 max;
	int		 cut;
	int		 skipping;
};
void mcp_lines_init(struct mcp_lines *, size_t max, int cut);
void mcp_lines_free(struct mcp_lines *);
int mcp_lines_feed(struct mcp_lines *, const char *, size_t,
    int (*fn)(const char *line, size_t len, void *arg), void *arg);

/* A tool as the agent sees it, from one entry of a tools/list result. */
struct mcp_tool_info {
	char	*name;		/* SERVER__TOOL */
	char	*remote;	/* TOOL, as the server calls it */
	char	*description;	/* bounded */
	char	*schema;	/* JSON text, an object schema */
	int	 readonly;	/* annotations.readOnlyHint is true */
};
/* Validate one tool entry: name characters [A-Za-z0-9_-] and length (with
 * the server prefix, at most MCP_MAX_TOOL_NAME), description and schema
 * bounds. 0, or -1 with why filled (the caller skips and logs it). */
int mcp_tool_parse(const char *server, const cJSON *tool,
    struct mcp_tool_info *, char *why, size_t whylen);
void mcp_tool_info_free(struct mcp_tool_info *);

/* A tools/call result as text for the model: text items as they are, images
 * and audio as one line each, resources by uri (and text), structuredContent
 * as JSON when nothing else was text. *is_error is set from isError. */
void mcp_result_text(const cJSON *result, struct buf *out, int *is_error);

/* A request or notification as one line of JSON (no newline inside). id < 0:
 * a notification. params may be NULL. Caller frees. */
char *mcp_msg_build(long id, const char *method, const cJSON *params);

#endif
