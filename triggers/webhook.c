/*
 * The webhook trigger (SPEC section 2): an HTTP listener on one exact path that
 * turns each authenticated POST into a run. The listening socket is bound in
 * prepare(), before the sandbox; start() lets connections in.
 *
 * With `reply: async` (the default) every request is answered from inside its
 * callback: 202 once the event is journaled. With `reply: wait` the request
 * is held until its run ends and deliver() answers it with the run's reply;
 * the run's meta carries the key that finds the held request again.
 */
#include <sys/queue.h>

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "loop.h"
#include "run.h"
#include "trigger.h"
#include "triggers/webhook.h"
#include "util.h"

#define WH_NAME			"webhook"
#define WH_CONV_MAX		64	/* conversation id: [A-Za-z0-9_-]{1,64} */
#define WH_CONV_HEADER		"X-Conversation-Id"
#define WH_CONV_PARAM		"conversation_id"
#define WH_CONV_PREFIX		"webhook:"
#define WH_WAIT_SLACK_MS	30000	/* past run_timeout, for a queued run */
#define WH_KEY_LEN		24

/* A request held until its event is committed, and with reply: wait until
 * its run's reply. */
struct held {
	LIST_ENTRY(held)	 entry;
	char			 key[WH_KEY_LEN];
	char			 run[RUN_ID_LEN];
	char			 conv[WH_CONV_MAX + 1];
	struct evhttp_request	*req;	/* evhttp's; answering frees it */
	struct loop_timer	*timeout;
	int			 gone;	/* the client closed the connection */
	int			 wait;	/* reply: wait (else 202 once committed) */
	size_t			 len;	/* body bytes, for the log */
};
LIST_HEAD(heldlist, held);

static struct {
	const struct cfg	*cfg;
	struct wh_server	 srv;
	struct heldlist		 held;
} wh = { .held = LIST_HEAD_INITIALIZER(wh.held) };

static int
wh_enabled(const struct cfg *cfg)
{
	return cfg->trig.webhook.enabled;
}

static int
conv_id_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > WH_CONV_MAX)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		    (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
			return 0;
	return 1;
}

/*
 * The conversation the caller continues: the X-Conversation-Id header or the
 * conversation_id query parameter (equal if both are given). Out: "" when
 * there is none. -1 when answered (400).
 */
static int
conversation_of(struct evhttp_request *req, char *out, size_t outlen)
{
	const char *h = evhttp_find_header(evhttp_request_get_input_headers(req),
	    WH_CONV_HEADER);
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *query = uri != NULL ? evhttp_uri_get_query(uri) : NULL;
	struct evkeyvalq params;
	const char *q = NULL;
	int rc = 0;

	TAILQ_INIT(&params);
	if (query != NULL && evhttp_parse_query_str(query, &params) == 0)
		q = evhttp_find_header(&params, WH_CONV_PARAM);
	if ((h != NULL && !conv_id_ok(h)) || (q != NULL && !conv_id_ok(q))) {
		wh_reply_error(req, 400, "Bad Request", "a conversation id is "
		    "1 to 64 of A-Z a-z 0-9 _ -");
		rc = -1;
	} else if (h != NULL && q != NULL && strcmp(h, q) != 0) {
		wh_reply_error(req, 400, "Bad Request", WH_CONV_HEADER " and "
		    "?" WH_CONV_PARAM " name different conversations");
		rc = -1;
	} else
		snprintf(out, outlen, "%s", h != NULL ? h : q != NULL ? q : "");
	evhttp_clear_headers(&params);
	return rc;
}

static struct held *
held_find(const char *key)
{
	struct held *h;

	LIST_FOREACH(h, &wh.held, entry)
		if (strcmp(h->key, key) == 0)
			return h;
	return NULL;
}

/* The client went away while its run goes on. evhttp has detached the
 * request from the connection (it is still ours to answer, which frees it);
 * the connection itself is being freed. */
static void
held_closed(struct evhttp_connection *c, void *arg)
{
	struct held *h = arg;

	h->gone = 1;
	log_info("webhook: the client waiting for run %s closed the "
	    "connection; the run goes on", h->run);
}

/* Answer a held request (obj is freed) and forget it. */
static void
held_answer(struct held *h, int code, const char *phrase, cJSON *obj)
{
	struct evhttp_connection *c = evhttp_request_get_connection(h->req);

	LIST_REMOVE(h, entry);
	loop_timer_cancel(h->timeout);
	if (c != NULL) {
		evhttp_connection_set_closecb(c, NULL, NULL);
		evhttp_connection_set_timeout(c, WH_TIMEOUT_S);
	}
	/* With the connection gone, evhttp only frees the request. */
	wh_reply_json(h->req, code, phrase, obj);
	free(h);
}

/* The run is still queued past its bound: say where it stands rather than
 * hold the client longer. The run goes on; its reply is in its record. */
static void
held_timeout(void *arg)
{
	struct held *h = arg;
	cJSON *obj = cJSON_CreateObject();

	h->timeout = NULL;
	cJSON_AddStringToObject(obj, "run", h->run);
	cJSON_AddStringToObject(obj, "status", "accepted");
	cJSON_AddStringToObject(obj, "conversation_id", h->conv);
	cJSON_AddStringToObject(obj, "note", "the run did not end in time; "
	    "it goes on without this request");
	held_answer(h, 202, "Accepted", obj);
}

/* Hold req for the run: the connection's idle timeout is lifted to the
 * wait's bound, and a close is noticed. */
static struct held *
held_new(struct evhttp_request *req, const char *conv)
{
	struct held *h = xcalloc(1, sizeof(*h));
	struct evhttp_connection *c = evhttp_request_get_connection(req);
	long bound = wh.cfg->limits.run_timeout_ms + WH_WAIT_SLACK_MS;

	make_id("w-", h->key, sizeof(h->key));
	snprintf(h->conv, sizeof(h->conv), "%s", conv);
	h->req = req;
	if (c != NULL) {
		evhttp_connection_set_closecb(c, held_closed, h);
		evhttp_connection_set_timeout(c, (int)(bound / 1000) + 5);
	}
	LIST_INSERT_HEAD(&wh.held, h, entry);
	return h;
}

static void
held_drop(struct held *h)
{
	struct evhttp_connection *c = evhttp_request_get_connection(h->req);

	LIST_REMOVE(h, entry);
	loop_timer_cancel(h->timeout);
	if (c != NULL)
		evhttp_connection_set_closecb(c, NULL, NULL);
	free(h);
}

/* The event is committed (err 0) or could not be (EIO): answer now, or,
 * with reply: wait, hold on until the run ends. */
static void
accepted(void *arg, const char *id, int err)
{
	struct held *h = arg;
	cJSON *obj;

	if (err != 0) {
		struct evhttp_request *req = h->req;
		int gone = h->gone;

		held_drop(h);
		if (gone)
			evhttp_request_free(req);
		else
			wh_reply_refused(req, err);
		return;
	}
	log_info("webhook: accepted %zu bytes as run %s", h->len, id);
	snprintf(h->run, sizeof(h->run), "%s", id);
	if (h->wait) {
		h->timeout = loop_timer_add(wh.cfg->limits.run_timeout_ms +
		    WH_WAIT_SLACK_MS, held_timeout, h);
		return;
	}
	obj = cJSON_CreateObject();
	cJSON_AddStringToObject(obj, "run", id);
	cJSON_AddStringToObject(obj, "status", "accepted");
	if (h->conv[0] != '\0')
		cJSON_AddStringToObject(obj, "conversation_id", h->conv);
	held_answer(h, 202, "Accepted", obj);
}

static void
submit(struct evhttp_request *req, const unsigned char *body, size_t len,
    const char *given_conv)
{
	const struct cfg_webhook *c = &wh.cfg->trig.webhook;
	char conv[WH_CONV_MAX + 1], *prompt, *meta = NULL;
	char *convkey = NULL;
	struct held *h;
	struct run_request rr;

	if ((prompt = wh_render(c->prompt, body, len)) == NULL) {
		wh_reply_error(req, 413, "Payload Too Large",
		    "the rendered prompt would be too large");
		return;
	}
	snprintf(conv, sizeof(conv), "%s", given_conv);
	/* A waiting caller gets a conversation it can continue. */
	if (conv[0] == '\0' && c->reply == REPLY_WAIT)
		make_id("c-", conv, sizeof(conv));
	memset(&rr, 0, sizeof(rr));
	rr.trigger = WH_NAME;
	rr.prompt = prompt;
	if (conv[0] != '\0')
		rr.conversation = convkey = xasprintf("%s%s", WH_CONV_PREFIX,
		    conv);
	/* Every request is held until its event is committed: events of one
	 * loop turn share one sync (group commit), and the 202 follows it. */
	h = held_new(req, conv);
	h->wait = c->reply == REPLY_WAIT;
	h->len = len;
	if (h->wait) {
		meta = xasprintf("{\"wait\":\"%s\"}", h->key);
		rr.meta = meta;
	}
	if (run_submit_async(&rr, accepted, h) == -1) {
		int e = errno;

		held_drop(h);
		if (e != EAGAIN && e != ESHUTDOWN && e != EIO)
			log_warn("webhook: run_submit");
		wh_reply_refused(req, e);
	}
	free(prompt);
	free(meta);
	free(convkey);
}

/* A bearer token and an HMAC signature are each checked when configured;
 * with both, both are required. 0: authenticated; -1: answered 401. */
static int
authenticate(struct evhttp_request *req, const unsigned char *body,
    size_t len)
{
	const struct cfg_webhook *c = &wh.cfg->trig.webhook;
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	struct evkeyvalq *out = evhttp_request_get_output_headers(req);
	int r;

	if (c->token != NULL) {
		r = wh_check_bearer(c->token, evhttp_find_header(in,
		    "Authorization"));
		if (r != WH_AUTH_OK) {
			wh_audit_refusal(WH_NAME, req, 401, wh_auth_reason(r));
			evhttp_add_header(out, "WWW-Authenticate", "Bearer");
			wh_reply_error(req, 401, "Unauthorized",
			    wh_auth_reason(r));
			return -1;
		}
	}
	if (c->secret != NULL) {
		r = wh_verify_signature(c->secret, body, len,
		    evhttp_find_header(in, WH_SIG_HEADER));
		if (r != WH_SIG_OK) {
			wh_audit_refusal(WH_NAME, req, 401, wh_sig_reason(r));
			evhttp_add_header(out, "WWW-Authenticate", WH_SIG_HEADER);
			wh_reply_error(req, 401, "Unauthorized", wh_sig_reason(r));
			return -1;
		}
	}
	return 0;
}

/* One request. Size limits were enforced by evhttp before this runs (413
 * for the body, 400 for headers). */
static void
wh_request(struct evhttp_request *req, void *arg)
{
	char conv[WH_CONV_MAX + 1];
	struct evbuffer *in;
	const unsigned char *body;
	size_t len;

	if (wh_precheck(&wh.srv, req, wh.cfg->trig.webhook.path) == -1)
		return;
	in = evhttp_request_get_input_buffer(req);
	len = evbuffer_get_length(in);
	body = len > 0 ? evbuffer_pullup(in, -1) : (const unsigned char *)"";
	if (body == NULL)
		fatalx("webhook: out of memory");
	if (authenticate(req, body, len) == -1)
		return;
	if (conversation_of(req, conv, sizeof(conv)) == -1)
		return;
	submit(req, body, len, conv);
}

/*
 * The run of a held request ended: answer 200 whatever its status. The
 * request was carried out, and the status field says how the run ended; a
 * 5xx would invite clients and proxies to retry, and a retry runs the agent
 * (and its side effects) again.
 */
static void
wh_deliver(const struct run_outcome *o)
{
	const cJSON *key;
	cJSON *meta, *obj;
	struct held *h;

	if (o->meta == NULL || (meta = cJSON_Parse(o->meta)) == NULL)
		return;
	key = cJSON_GetObjectItemCaseSensitive(meta, "wait");
	h = cJSON_IsString(key) ? held_find(key->valuestring) : NULL;
	cJSON_Delete(meta);
	if (h == NULL)
		return;		/* replayed after a restart: nobody waits */
	obj = cJSON_CreateObject();
	cJSON_AddStringToObject(obj, "status", o->status);
	cJSON_AddStringToObject(obj, "reply", o->reply ? o->reply : "");
	if (o->error != NULL)
		cJSON_AddStringToObject(obj, "error", o->error);
	cJSON_AddNumberToObject(obj, "steps", o->steps);
	cJSON_AddNumberToObject(obj, "cost_usd", o->cost_usd);
	cJSON_AddStringToObject(obj, "run", o->run_id);
	cJSON_AddStringToObject(obj, "conversation_id", h->conv);
	if (h->gone)
		log_info("webhook: run %s ended; its client had left", o->run_id);
	held_answer(h, 200, "OK", obj);
}

static int
wh_prepare(const struct cfg *cfg, char *err, size_t errlen)
{
	const struct cfg_webhook *c = &cfg->trig.webhook;

	if (c->secret != NULL && c->secret[0] == '\0') {
		snprintf(err, errlen, "triggers.webhook.secret is empty");
		return -1;
	}
	if (c->token != NULL && c->token[0] == '\0') {
		snprintf(err, errlen, "triggers.webhook.token is empty");
		return -1;
	}
	wh.cfg = cfg;
	if (wh_server_bind(&wh.srv, WH_NAME, &c->listen, wh_request, err,
	    errlen) == -1)
		return -1;
	if (c->secret == NULL && c->token == NULL &&
	    !cfg_host_is_loopback(c->listen.host))
		log_warnx("webhook: no secret is set: anyone who can reach %s "
		    "can start runs", wh.srv.where);
	return 0;
}

static int
wh_start(const struct cfg *cfg, char *err, size_t errlen)
{
	if (wh_server_start(&wh.srv, err, errlen) == -1)
		return -1;
	trig_set_state(WH_NAME, TRIG_UP, NULL);
	return 0;
}

static void
wh_stop(void)
{
	wh_server_stop(&wh.srv);
}

/*
 * After the loop: held requests whose clients left are ours to free; the
 * others belong to their connections, which evhttp_free frees (their close
 * callbacks are taken off first, since their held entries go now).
 */
static void
wh_free(void)
{
	struct held *h;

	while ((h = LIST_FIRST(&wh.held)) != NULL) {
		struct evhttp_request *req = h->req;
		int gone = h->gone;

		held_drop(h);
		if (gone)
			evhttp_request_free(req);
	}
	wh_server_free(&wh.srv);
	wh.cfg = NULL;
}

const struct trigger_def trigger_webhook = {
	.name = WH_NAME,
	.enabled = wh_enabled,
	.prepare = wh_prepare,
	.start = wh_start,
	.stop = wh_stop,
	.deliver = wh_deliver,
	.status = NULL,
	.free = wh_free,
};
