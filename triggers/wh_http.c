/* The HTTP side shared by the webhook and GitHub triggers (see webhook.h): a
 * listener bound before the sandbox with evhttp's limits set, JSON replies,
 * the audit record of a refusal and the answer to a refused event. */
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "audit/audit.h"
#include "config.h"
#include "loop.h"
#include "triggers/webhook.h"
#include "util.h"

#define WH_RETRY_QUEUE_S	5	/* Retry-After when the queue is full */
#define WH_RETRY_STOP_S		30	/* Retry-After while af stops */
#define WH_ACCEPT_PAUSE_MS	1000	/* after accept() fails (EMFILE) */
#define WH_MAX_SERVERS		4

static const struct httpd_limits limits = {
	WH_MAX_BODY, WH_MAX_HEADERS, WH_TIMEOUT_S, WH_REQUEST_S
};

/* evhttp hands the accept error callback its own pointer, not ours: the
 * servers are found again by their listener. */
static struct wh_server *servers[WH_MAX_SERVERS];

void
wh_reply_json(struct evhttp_request *req, int code, const char *phrase,
    cJSON *obj)
{
	struct evbuffer *out = evbuffer_new();
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	char *text = cJSON_PrintUnformatted(obj);

	cJSON_Delete(obj);
	if (out == NULL || text == NULL)
		fatalx("webhook: out of memory");
	evbuffer_add_printf(out, "%s\n", text);
	cJSON_free(text);
	evhttp_add_header(h, "Content-Type", "application/json");
	evhttp_add_header(h, "Cache-Control", "no-store");
	evhttp_send_reply(req, code, phrase, out);
	evbuffer_free(out);
}

void
wh_reply_error(struct evhttp_request *req, int code, const char *phrase,
    const char *msg)
{
	cJSON *obj = cJSON_CreateObject();

	cJSON_AddStringToObject(obj, "error", msg);
	wh_reply_json(req, code, phrase, obj);
}

void
wh_set_retry_after(struct evhttp_request *req, int secs)
{
	char v[16];

	snprintf(v, sizeof(v), "%d", secs);
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Retry-After", v);
}

const char *
wh_peer(struct evhttp_request *req)
{
	struct evhttp_connection *c = evhttp_request_get_connection(req);
	char *addr = NULL;
	ev_uint16_t port = 0;

	if (c == NULL)
		return "";
	evhttp_connection_get_peer(c, &addr, &port);
	return addr != NULL ? addr : "";
}

/* A refused, unauthenticated request leaves a trace in the audit trail: who,
 * and why (never the body or the header's value). */
void
wh_audit_refusal(const char *trigger, struct evhttp_request *req, int code,
    const char *reason)
{
	cJSON *rec = audit_new(NULL, "webhook_refused");

	if (rec == NULL)
		return;
	if (strcmp(trigger, "webhook") != 0)
		cJSON_AddStringToObject(rec, "trigger", trigger);
	cJSON_AddStringToObject(rec, "reason", reason);
	cJSON_AddNumberToObject(rec, "http_status", code);
	cJSON_AddStringToObject(rec, "remote", wh_peer(req));
	if (audit_emit(rec) == -1)
		log_warnx("%s: the refusal could not be audited", trigger);
}

void
wh_reply_refused(struct evhttp_request *req, int err)
{
	switch (err) {
	case EAGAIN:
		wh_set_retry_after(req, WH_RETRY_QUEUE_S);
		wh_reply_error(req, 429, "Too Many Requests",
		    "the event queue is full; retry later");
		break;
	case ESHUTDOWN:
		wh_set_retry_after(req, WH_RETRY_STOP_S);
		wh_reply_error(req, 503, "Service Unavailable",
		    "af is stopping; retry later");
		break;
	case EIO:
		wh_reply_error(req, 503, "Service Unavailable",
		    "the event journal or the audit trail cannot be written; "
		    "events are refused until an operator intervenes");
		break;
	default:
		wh_reply_error(req, 500, "Internal Server Error",
		    "the event could not be accepted");
		break;
	}
}

/*
 * The checks every request passes first. The path must match exactly, byte
 * for byte (no decoding, no trailing-slash folding); the query string is not
 * part of it. 0: go on; -1: answered already.
 */
int
wh_precheck(struct wh_server *s, struct evhttp_request *req, const char *want)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;

	if (path == NULL || strcmp(path, want) != 0) {
		wh_reply_error(req, 404, "Not Found", "no such path");
		return -1;
	}
	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Allow", "POST");
		wh_reply_error(req, 405, "Method Not Allowed", "use POST");
		return -1;
	}
	if (s->stopping || loop_stopping()) {
		wh_set_retry_after(req, WH_RETRY_STOP_S);
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Connection", "close");
		wh_reply_error(req, 503, "Service Unavailable",
		    "af is stopping; retry later");
		return -1;
	}
	return 0;
}

static struct wh_server *
server_of(struct evconnlistener *l)
{
	for (size_t i = 0; i < nitems(servers); i++)
		if (servers[i] != NULL && servers[i]->sock != NULL &&
		    evhttp_bound_socket_get_listener(servers[i]->sock) == l)
			return servers[i];
	return NULL;
}

static void
resume_accept(void *arg)
{
	struct wh_server *s = arg;

	s->resume = NULL;
	if (s->sock != NULL && !s->stopping)
		evconnlistener_enable(evhttp_bound_socket_get_listener(s->sock));
}

/* accept() failed, most likely out of descriptors: pause the listener for a
 * moment rather than spin on a socket that stays readable. */
static void
accept_error(struct evconnlistener *l, void *arg)
{
	struct wh_server *s = server_of(l);

	evconnlistener_disable(l);
	if (s == NULL)
		return;
	log_warn("%s: accept on %s", s->name, s->where);
	if (s->resume == NULL)
		s->resume = loop_timer_add(WH_ACCEPT_PAUSE_MS, resume_accept, s);
}

/* "HOST:PORT" with IPv6 hosts in brackets, and the port actually bound. */
static void
format_where(const char *host, evutil_socket_t fd, int cfgport, char *out,
    size_t outlen)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int port = cfgport;

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET)
			port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		else if (ss.ss_family == AF_INET6)
			port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	if (strchr(host, ':') != NULL)
		snprintf(out, outlen, "[%s]:%d", host, port);
	else
		snprintf(out, outlen, "%s:%d", host, port);
}

int
wh_server_bind(struct wh_server *s, const char *name,
    const struct cfg_listen *listen,
    void (*cb)(struct evhttp_request *, void *), char *err, size_t errlen)
{
	struct event_base *base = loop_base();
	struct evconnlistener *l;
	size_t slot;

	if (base == NULL) {
		snprintf(err, errlen, "%s: the event loop is not set up", name);
		return -1;
	}
	for (slot = 0; slot < nitems(servers); slot++)
		if (servers[slot] == NULL || servers[slot] == s)
			break;
	if (slot == nitems(servers)) {
		snprintf(err, errlen, "%s: too many HTTP listeners", name);
		return -1;
	}
	memset(s, 0, sizeof(*s));
	s->name = name;
	if ((s->http = evhttp_new(base)) == NULL)
		fatalx("%s: out of memory", name);
	httpd_setup(&s->httpd, s->http, name, &limits, cb, s);
	s->sock = evhttp_bind_socket_with_handle(s->http, listen->host,
	    (ev_uint16_t)listen->port);
	if (s->sock == NULL) {
		int e = errno;

		snprintf(err, errlen, "%s: cannot listen on %s%s%s:%d: %s", name,
		    strchr(listen->host, ':') ? "[" : "", listen->host,
		    strchr(listen->host, ':') ? "]" : "", listen->port,
		    e ? strerror(e) : "bind failed");
		evhttp_free(s->http);
		s->http = NULL;
		return -1;
	}
	servers[slot] = s;
	/* Bound now, before the sandbox; connections wait in the backlog until
	 * wh_server_start(). */
	l = evhttp_bound_socket_get_listener(s->sock);
	evconnlistener_disable(l);
	evconnlistener_set_error_cb(l, accept_error);
	format_where(listen->host, evhttp_bound_socket_get_fd(s->sock),
	    listen->port, s->where, sizeof(s->where));
	log_info("%s listening on %s", name, s->where);
	return 0;
}

int
wh_server_start(struct wh_server *s, char *err, size_t errlen)
{
	if (s->sock == NULL) {
		snprintf(err, errlen, "%s: not prepared", s->name);
		return -1;
	}
	if (evconnlistener_enable(evhttp_bound_socket_get_listener(s->sock))
	    == -1) {
		snprintf(err, errlen, "%s: cannot accept on %s", s->name,
		    s->where);
		return -1;
	}
	return 0;
}

/* Close the listening socket: new connections are refused by the kernel.
 * Requests still arriving on open connections get 503; the connections
 * themselves are freed with the server in wh_server_free(). */
void
wh_server_stop(struct wh_server *s)
{
	s->stopping = 1;
	loop_timer_cancel(s->resume);
	s->resume = NULL;
	if (s->http != NULL && s->sock != NULL) {
		evhttp_del_accept_socket(s->http, s->sock);
		s->sock = NULL;
		log_info("%s: stopped listening on %s", s->name, s->where);
	}
}

void
wh_server_free(struct wh_server *s)
{
	wh_server_stop(s);
	for (size_t i = 0; i < nitems(servers); i++)
		if (servers[i] == s)
			servers[i] = NULL;
	if (s->http != NULL)
		evhttp_free(s->http);
	s->http = NULL;
}
