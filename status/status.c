/* The status server (SPEC section 5) on its own evhttp listener. Every answer
 * is built inside the request's callback. /healthz, /status and /metrics show
 * counters and states, never an event, a prompt or a secret; /runs and
 * /audit show what the agent did (the audit trail, already redacted) and are
 * answered only to loopback clients or with status.token. */
#include "status/status.h"

#include <sys/queue.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "audit/audit.h"
#include "audit/audit_read.h"
#include "httpd.h"
#include "loop.h"
#include "run.h"
#include "state.h"
#include "status/status_auth.h"
#include "tools/mcp.h"
#include "trigger.h"
#include "util.h"

#define STATUS_ACCEPT_PAUSE_MS	1000	/* after accept() fails (EMFILE) */
#define METRICS_TYPE		"text/plain; version=0.0.4; charset=utf-8"
#define STATUS_PAGE_DEFAULT	50	/* /runs and /audit records per page */
#define STATUS_PAGE_MAX		500
#define STATUS_OFFSET_MAX	1000000
#define STATUS_FILTER_MAX	256	/* bytes of one /audit filter value */

static const struct httpd_limits limits = {
	STATUS_MAX_BODY, STATUS_MAX_HEADERS, STATUS_TIMEOUT_S, STATUS_REQUEST_S
};

static struct {
	const struct cfg		*cfg;
	struct evhttp			*http;
	struct httpd			 httpd;
	struct evhttp_bound_socket	*sock;
	struct loop_timer		*resume;
	struct strlist			 not_hermetic;
	int64_t				 started_ms;	/* monotonic */
	char				 where[300];
} st;

static void
reply(struct evhttp_request *req, int code, const char *phrase,
    const char *type, const char *body, size_t len)
{
	struct evbuffer *out = evbuffer_new();
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	if (out == NULL)
		fatalx("status: out of memory");
	evbuffer_add(out, body, len);
	evhttp_add_header(h, "Content-Type", type);
	evhttp_add_header(h, "Cache-Control", "no-store");
	evhttp_send_reply(req, code, phrase, out);
	evbuffer_free(out);
}

static void
reply_text(struct evhttp_request *req, int code, const char *phrase,
    const char *text)
{
	reply(req, code, phrase, "text/plain; charset=utf-8", text,
	    strlen(text));
}

static const char *
json_str(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Why af is not healthy, one line each; empty when it is. */
static void
problems(cJSON *triggers, struct strlist *out)
{
	const cJSON *t;
	const char *s;
	char *line;

	if (loop_stopping())
		strlist_add(out, "af is stopping");
	cJSON_ArrayForEach(t, triggers) {
		s = json_str(t, "state");
		if (s == NULL || strcmp(s, "down") != 0)
			continue;
		s = json_str(t, "last_error");
		line = xasprintf("trigger %s is down%s%s", t->string,
		    s ? ": " : "", s ? s : "");
		strlist_add(out, line);
		free(line);
	}
	if (trig_any_down() && out->n == 0)
		strlist_add(out, "a trigger is down");
	if ((s = audit_failed()) != NULL) {
		line = xasprintf("the audit trail cannot be written (%s): new "
		    "events are refused", s);
		strlist_add(out, line);
		free(line);
	}
	if ((s = state_failed()) != NULL) {
		line = xasprintf("the state database cannot be written (%s): "
		    "new events are refused", s);
		strlist_add(out, line);
		free(line);
	}
}

static int64_t
uptime_s(void)
{
	return (mono_ms() - st.started_ms) / 1000;
}

static void
serve_healthz(struct evhttp_request *req)
{
	cJSON *triggers = trig_status_json(st.cfg);
	struct strlist why = { NULL, 0 };
	struct buf b;

	problems(triggers, &why);
	cJSON_Delete(triggers);
	if (why.n == 0) {
		reply_text(req, 200, "OK", "ok\n");
		return;
	}
	buf_init(&b);
	for (size_t i = 0; i < why.n; i++)
		buf_addf(&b, "unhealthy: %s\n", why.v[i]);
	reply(req, 503, "Service Unavailable", "text/plain; charset=utf-8",
	    b.data, b.len);
	buf_free(&b);
	strlist_free(&why);
}

static void
serve_status(struct evhttp_request *req)
{
	const struct run_stats *rs = run_stats();
	cJSON *obj = cJSON_CreateObject(), *arr, *tot, *triggers;
	struct strlist why = { NULL, 0 };
	char *text;

	triggers = trig_status_json(st.cfg);
	problems(triggers, &why);
	cJSON_AddStringToObject(obj, "agent", st.cfg->name);
	cJSON_AddStringToObject(obj, "version", AF_VERSION);
	cJSON_AddNumberToObject(obj, "uptime_s", (double)uptime_s());
	cJSON_AddBoolToObject(obj, "healthy", why.n == 0);
	arr = cJSON_AddArrayToObject(obj, "problems");
	for (size_t i = 0; i < why.n; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(why.v[i]));
	strlist_free(&why);
	cJSON_AddBoolToObject(obj, "hermetic", st.not_hermetic.n == 0);
	arr = cJSON_AddArrayToObject(obj, "not_hermetic_reasons");
	for (size_t i = 0; i < st.not_hermetic.n; i++)
		cJSON_AddItemToArray(arr,
		    cJSON_CreateString(st.not_hermetic.v[i]));
	cJSON_AddItemToObject(obj, "triggers",
	    triggers != NULL ? triggers : cJSON_CreateObject());
	cJSON_AddItemToObject(obj, "mcp", mcp_status_json());
	cJSON_AddNumberToObject(obj, "runs_in_flight", (double)rs->inflight);
	cJSON_AddNumberToObject(obj, "queued", (double)rs->queued);
	tot = cJSON_AddObjectToObject(obj, "totals");
	cJSON_AddNumberToObject(tot, "runs", (double)rs->runs_total);
	cJSON_AddNumberToObject(tot, "runs_ok", (double)rs->runs_ok);
	cJSON_AddNumberToObject(tot, "runs_failed", (double)rs->runs_failed);
	cJSON_AddNumberToObject(tot, "tool_calls", (double)rs->tool_calls);
	cJSON_AddNumberToObject(tot, "denials", (double)rs->denials);
	cJSON_AddNumberToObject(tot, "tokens_in", (double)rs->tokens_in);
	cJSON_AddNumberToObject(tot, "tokens_out", (double)rs->tokens_out);
	cJSON_AddNumberToObject(tot, "refused", (double)rs->refused);
	text = cJSON_PrintUnformatted(obj);
	cJSON_Delete(obj);
	if (text == NULL)
		fatalx("status: out of memory");
	{
		struct buf b;

		buf_init(&b);
		buf_adds(&b, text);
		buf_addc(&b, '\n');
		reply(req, 200, "OK", "application/json", b.data, b.len);
		buf_free(&b);
	}
	cJSON_free(text);
}

/* A label value in the Prometheus text format: backslash, quote and newline
 * are escaped. */
static void
add_label(struct buf *b, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\')
			buf_adds(b, "\\\\");
		else if (*s == '"')
			buf_adds(b, "\\\"");
		else if (*s == '\n')
			buf_adds(b, "\\n");
		else
			buf_addc(b, *s);
	}
}

static void
metric(struct buf *b, const char *name, const char *type, const char *help,
    uint64_t v)
{
	buf_addf(b, "# HELP %s %s\n# TYPE %s %s\n%s %" PRIu64 "\n", name, help,
	    name, type, name, v);
}

static void
serve_metrics(struct evhttp_request *req)
{
	const struct run_stats *rs = run_stats();
	cJSON *triggers = trig_status_json(st.cfg);
	struct strlist why = { NULL, 0 };
	const cJSON *t;
	const char *s;
	struct buf b;

	problems(triggers, &why);
	buf_init(&b);
	buf_adds(&b, "# HELP af_info The agent and the af version; always 1.\n"
	    "# TYPE af_info gauge\naf_info{agent=\"");
	add_label(&b, st.cfg->name);
	buf_adds(&b, "\",version=\"" AF_VERSION "\"} 1\n");
	metric(&b, "af_uptime_seconds", "gauge",
	    "Seconds since the status server started.", (uint64_t)uptime_s());
	metric(&b, "af_healthy", "gauge",
	    "1 when /healthz answers 200, 0 when it answers 503.",
	    why.n == 0);
	metric(&b, "af_hermetic", "gauge",
	    "1 when the agent is hermetic (see af validate).",
	    st.not_hermetic.n == 0);
	metric(&b, "af_runs_total", "counter", "Runs started.",
	    rs->runs_total);
	metric(&b, "af_runs_ok_total", "counter", "Runs that ended ok.",
	    rs->runs_ok);
	metric(&b, "af_runs_failed_total", "counter",
	    "Runs that ended with an error status.", rs->runs_failed);
	metric(&b, "af_events_refused_total", "counter",
	    "Trigger events refused (queue full, stopping, journal failure).",
	    rs->refused);
	metric(&b, "af_tool_calls_total", "counter",
	    "Tool calls the model made, allowed or denied.", rs->tool_calls);
	metric(&b, "af_denials_total", "counter",
	    "Tool calls the permission engine denied.", rs->denials);
	buf_addf(&b, "# HELP af_model_tokens_total Model tokens, by direction."
	    "\n# TYPE af_model_tokens_total counter\n"
	    "af_model_tokens_total{direction=\"in\"} %" PRIu64 "\n"
	    "af_model_tokens_total{direction=\"out\"} %" PRIu64 "\n",
	    rs->tokens_in, rs->tokens_out);
	metric(&b, "af_runs_in_flight", "gauge", "Runs running now.",
	    rs->inflight > 0 ? (uint64_t)rs->inflight : 0);
	metric(&b, "af_queue_depth", "gauge",
	    "Accepted events waiting for a run slot.",
	    rs->queued > 0 ? (uint64_t)rs->queued : 0);
	buf_adds(&b, "# HELP af_trigger_up 1 when the trigger is up, 0 when "
	    "connecting, in backoff or down.\n# TYPE af_trigger_up gauge\n");
	cJSON_ArrayForEach(t, triggers) {
		s = json_str(t, "state");
		buf_adds(&b, "af_trigger_up{trigger=\"");
		add_label(&b, t->string != NULL ? t->string : "");
		buf_addf(&b, "\"} %d\n", s != NULL && strcmp(s, "up") == 0);
	}
	cJSON_Delete(triggers);
	strlist_free(&why);
	reply(req, 200, "OK", METRICS_TYPE, b.data, b.len);
	buf_free(&b);
}

static void
reply_json(struct evhttp_request *req, cJSON *obj)
{
	char *text = cJSON_PrintUnformatted(obj);
	struct buf b;

	cJSON_Delete(obj);
	if (text == NULL)
		fatalx("status: out of memory");
	buf_init(&b);
	buf_adds(&b, text);
	buf_addc(&b, '\n');
	cJSON_free(text);
	reply(req, 200, "OK", "application/json", b.data, b.len);
	buf_free(&b);
}

/* The query string's parameters; every name must be one of known, and a
 * name given twice is refused (which one would count?). -1 after a 400. */
static int
parse_query(struct evhttp_request *req, struct evkeyvalq *q,
    const char *const *known, size_t nknown)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *query = uri != NULL ? evhttp_uri_get_query(uri) : NULL;
	struct evkeyval *kv, *other;
	char msg[160];

	TAILQ_INIT(q);
	if (query != NULL && evhttp_parse_query_str(query, q) == -1) {
		reply_text(req, 400, "Bad Request", "malformed query string\n");
		return -1;
	}
	TAILQ_FOREACH(kv, q, next) {
		size_t i;

		for (i = 0; i < nknown; i++)
			if (strcmp(kv->key, known[i]) == 0)
				break;
		for (other = TAILQ_NEXT(kv, next); i < nknown && other != NULL;
		    other = TAILQ_NEXT(other, next))
			if (strcmp(other->key, kv->key) == 0)
				i = nknown;
		if (i == nknown) {
			snprintf(msg, sizeof(msg), "unknown or repeated "
			    "parameter \"%.64s\"\n", kv->key);
			reply_text(req, 400, "Bad Request", msg);
			evhttp_clear_headers(q);
			return -1;
		}
	}
	return 0;
}

/* A paging number: absent gives def; more than max is cut to max; anything
 * but digits, or below min, is -1. */
static long
page_arg(struct evkeyvalq *q, const char *name, long def, long min, long max)
{
	const char *s = evhttp_find_header(q, name);
	long v = 0;

	if (s == NULL)
		return def;
	if (*s == '\0' || strlen(s) > 9)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (*s - '0');
	}
	if (v < min)
		return -1;
	return v > max ? max : v;
}

static int
paging(struct evhttp_request *req, struct evkeyvalq *q, long *limit,
    long *offset)
{
	*limit = page_arg(q, "limit", STATUS_PAGE_DEFAULT, 1, STATUS_PAGE_MAX);
	*offset = page_arg(q, "offset", 0, 0, STATUS_OFFSET_MAX);
	if (*limit == -1 || *offset == -1) {
		reply_text(req, 400, "Bad Request", "limit must be 1 to 500 "
		    "and offset a number from 0\n");
		return -1;
	}
	return 0;
}

/* Recent runs from the state database, newest first. */
static void
serve_runs(struct evhttp_request *req)
{
	static const char *const known[] = { "limit", "offset" };
	struct evkeyvalq q;
	long limit, offset;
	cJSON *obj;

	if (parse_query(req, &q, known, nitems(known)) == -1)
		return;
	if (paging(req, &q, &limit, &offset) == -1) {
		evhttp_clear_headers(&q);
		return;
	}
	evhttp_clear_headers(&q);
	obj = cJSON_CreateObject();
	cJSON_AddItemToObject(obj, "runs", state_runs_list((int)limit,
	    (int)offset));
	cJSON_AddNumberToObject(obj, "limit", (double)limit);
	cJSON_AddNumberToObject(obj, "offset", (double)offset);
	reply_json(req, obj);
}

/* The audit trail, newest first, filtered by exact field values. */
static void
serve_audit(struct evhttp_request *req)
{
	static const char *const known[] = { "limit", "offset", "run",
	    "decision", "tool", "event" };
	struct audit_filter f;
	struct audit_page page;
	struct evkeyvalq q;
	long limit, offset;
	cJSON *obj;

	if (parse_query(req, &q, known, nitems(known)) == -1)
		return;
	if (paging(req, &q, &limit, &offset) == -1)
		goto out;
	f.run = evhttp_find_header(&q, "run");
	f.decision = evhttp_find_header(&q, "decision");
	f.tool = evhttp_find_header(&q, "tool");
	f.event = evhttp_find_header(&q, "event");
	if ((f.run && strlen(f.run) > STATUS_FILTER_MAX) ||
	    (f.tool && strlen(f.tool) > STATUS_FILTER_MAX) ||
	    (f.event && strlen(f.event) > STATUS_FILTER_MAX) ||
	    (f.decision && strlen(f.decision) > STATUS_FILTER_MAX)) {
		reply_text(req, 400, "Bad Request", "filter value too long\n");
		goto out;
	}
	if (audit_read(st.cfg->audit_path, &f, offset, limit, &page) == -1) {
		log_warn("status: reading the audit trail");
		cJSON_Delete(page.records);
		reply_text(req, 500, "Internal Server Error", "the audit trail "
		    "cannot be read\n");
		goto out;
	}
	obj = cJSON_CreateObject();
	cJSON_AddItemToObject(obj, "records", page.records);
	cJSON_AddNumberToObject(obj, "limit", (double)limit);
	cJSON_AddNumberToObject(obj, "offset", (double)offset);
	/* The scan stops after a bound; the page may then miss older
	 * matches, and says so. */
	cJSON_AddBoolToObject(obj, "partial", page.partial);
	reply_json(req, obj);
out:
	evhttp_clear_headers(&q);
}

/* /runs and /audit show what the agent did: loopback clients only, or any
 * client with status.token. 0 when the request may be served. */
static int
authorized(struct evhttp_request *req)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	const struct sockaddr *peer = conn != NULL ?
	    evhttp_connection_get_addr(conn) : NULL;
	const char *authz = evhttp_find_header(
	    evhttp_request_get_input_headers(req), "Authorization");

	switch (status_authorize(peer, authz, st.cfg->status_token)) {
	case STATUS_AUTH_OK:
		return 0;
	case STATUS_AUTH_NEED_TOKEN:
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "WWW-Authenticate", "Bearer realm=\"af\"");
		reply_text(req, 401, "Unauthorized", "a valid Authorization: "
		    "Bearer token is required\n");
		return -1;
	default:
		reply_text(req, 403, "Forbidden", "this path answers loopback "
		    "clients only unless status.token is set\n");
		return -1;
	}
}

/* GET (and HEAD) on exact paths. /healthz, /status and /metrics ignore the
 * query string and answer anyone who can connect; /runs and /audit read it
 * and are authorized first. */
static void
status_request(struct evhttp_request *req, void *arg)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	void (*serve)(struct evhttp_request *) = NULL;
	int guarded = 0;

	if (path == NULL)
		serve = NULL;
	else if (strcmp(path, "/healthz") == 0)
		serve = serve_healthz;
	else if (strcmp(path, "/status") == 0)
		serve = serve_status;
	else if (strcmp(path, "/metrics") == 0)
		serve = serve_metrics;
	else if (strcmp(path, "/runs") == 0)
		serve = serve_runs, guarded = 1;
	else if (strcmp(path, "/audit") == 0)
		serve = serve_audit, guarded = 1;
	if (serve == NULL) {
		reply_text(req, 404, "Not Found", "not found\n");
		return;
	}
	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Allow", "GET, HEAD");
		reply_text(req, 405, "Method Not Allowed", "use GET\n");
		return;
	}
	if (guarded && authorized(req) == -1)
		return;
	serve(req);
}

static void
resume_accept(void *arg)
{
	st.resume = NULL;
	if (st.sock != NULL)
		evconnlistener_enable(evhttp_bound_socket_get_listener(st.sock));
}

/* accept() failed, most likely out of descriptors: pause the listener for a
 * moment rather than spin on a socket that stays readable. */
static void
accept_error(struct evconnlistener *l, void *arg)
{
	log_warn("status: accept on %s", st.where);
	evconnlistener_disable(l);
	if (st.resume == NULL)
		st.resume = loop_timer_add(STATUS_ACCEPT_PAUSE_MS, resume_accept,
		    NULL);
}

int
status_prepare(const struct cfg *cfg, char *err, size_t errlen)
{
	const struct cfg_listen *ls = &cfg->status_listen;
	struct event_base *base = loop_base();
	struct evconnlistener *l;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int port = ls->port, v6 = ls->host && strchr(ls->host, ':') != NULL;

	if (base == NULL) {
		snprintf(err, errlen, "status: the event loop is not set up");
		return -1;
	}
	if (ls->host == NULL) {
		snprintf(err, errlen, "status: no listen address");
		return -1;
	}
	st.cfg = cfg;
	st.started_ms = mono_ms();
	strlist_free(&st.not_hermetic);
	cfg_hermetic_reasons(cfg, &st.not_hermetic);
	if ((st.http = evhttp_new(base)) == NULL)
		fatalx("status: out of memory");
	httpd_setup(&st.httpd, st.http, "status", &limits, status_request,
	    NULL);
	st.sock = evhttp_bind_socket_with_handle(st.http, ls->host,
	    (ev_uint16_t)ls->port);
	if (st.sock == NULL) {
		int e = errno;

		snprintf(err, errlen, "status: cannot listen on %s%s%s:%d: %s",
		    v6 ? "[" : "", ls->host, v6 ? "]" : "", ls->port,
		    e ? strerror(e) : "bind failed");
		evhttp_free(st.http);
		st.http = NULL;
		return -1;
	}
	l = evhttp_bound_socket_get_listener(st.sock);
	evconnlistener_disable(l);
	evconnlistener_set_error_cb(l, accept_error);
	if (getsockname(evhttp_bound_socket_get_fd(st.sock),
	    (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET)
			port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		else if (ss.ss_family == AF_INET6)
			port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	snprintf(st.where, sizeof(st.where), "%s%s%s:%d", v6 ? "[" : "",
	    ls->host, v6 ? "]" : "", port);
	log_info("status listening on %s", st.where);
	return 0;
}

int
status_start(void)
{
	if (st.sock == NULL)
		return -1;
	return evconnlistener_enable(evhttp_bound_socket_get_listener(st.sock));
}

void
status_stop(void)
{
	loop_timer_cancel(st.resume);
	st.resume = NULL;
	if (st.http != NULL && st.sock != NULL) {
		evhttp_del_accept_socket(st.http, st.sock);
		st.sock = NULL;
	}
}

void
status_free(void)
{
	status_stop();
	if (st.http != NULL)
		evhttp_free(st.http);
	st.http = NULL;
	strlist_free(&st.not_hermetic);
	st.cfg = NULL;
}
