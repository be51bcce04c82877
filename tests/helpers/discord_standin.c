/*
 * A stand-in for Discord, for the integration tests: the gateway (a
 * libwebsockets server, ws on 127.0.0.1) speaking the documented opcodes,
 * payloads and close codes, and the REST endpoints the trigger uses (plain
 * HTTP with libevent's evhttp), plus control endpoints a test drives.
 *
 *   discord_standin --token T [--bot-id ID] [--heartbeat MS]
 *
 * stdout: the gateway port on the first line, the REST port on the second.
 *
 * Gateway: HELLO on connect; IDENTIFY with the right token gets READY (a
 * new session), a wrong one close 4004; RESUME of the current session
 * replays every dispatch after the client's seq, then RESUMED; any other
 * RESUME gets INVALID_SESSION false. Heartbeats are acknowledged unless a
 * test says otherwise. Every dispatch of a session is kept with its
 * sequence number, also those pushed while no client is connected.
 *
 * A heartbeat request (op 1 from the gateway) can be timed against the
 * client's own beats: lead ms before the next regular beat is due, and the
 * ACK of the beat that answers it held for hold ms (with the ACKs of any
 * beats that come meanwhile, so ACKs stay in order, as Discord's do).
 *
 * REST: POST {base}/channels/ID/messages and /typing, checked against the
 * token, with X-RateLimit-* headers; tests script the next replies (429s).
 * GET {base}/gateway/bot answers with the gateway URL and the session start
 * limit: 1000 a day, one spent by each IDENTIFY that gets READY, and
 * remaining back to total once reset_after has passed.
 *
 * Control (REST port): POST /_push, /_drop, /_reconnect, /_invalid_session,
 * /_ack, /_script, /_session_limit {remaining, reset_after ms},
 * /_heartbeat_request {lead ms, hold ms}; GET /_record (everything
 * received, as JSON), /_state.
 *
 * Two threads, as in af: lws serves the gateway on its own; evhttp runs on
 * the main thread. One mutex guards the shared state; commands for the
 * gateway are queued and the lws thread is woken with lws_cancel_service.
 */
#include <sys/socket.h>
#include <sys/queue.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <libwebsockets.h>

#include "util.h"

#define SI_MAX_BODY	(4 << 20)
#define SI_MAX_OUT	4096
#define SI_DAY_MS	86400000.0

/* Where a timed heartbeat request is. */
enum hb_req {
	HBR_NONE,
	HBR_ARMED,	/* the next beat times the request */
	HBR_TIMED,	/* op 1 goes when the timer fires */
	HBR_ASKED,	/* op 1 sent; the next beat answers it */
	HBR_HOLDING	/* ACKs held until the timer fires */
};

/* Frames waiting for a connection; "\1close N" and "\1drop" are commands. */
struct conn {
	struct lws	*wsi;
	int		 ready;		/* identified or resumed */
	long long	 sent_seq;	/* dispatches up to here went out */
	struct buf	 rx;
	char		*out[SI_MAX_OUT];
	size_t		 nout;
	enum hb_req	 hbr;
	int		 held;		/* ACKs owed while HBR_HOLDING */
};

struct event_rec {
	long long	 seq;
	char		*text;
};

struct script {
	char	*route;		/* "messages", "typing", "gateway" or "*" */
	long	 status;
	char	*body;
	cJSON	*headers;
	int	 count;
};

enum cmd_kind { CMD_FLUSH, CMD_DROP, CMD_RAW, CMD_INVALIDATE, CMD_HB_REQUEST };

struct cmd {
	TAILQ_ENTRY(cmd)	 entry;
	enum cmd_kind		 kind;
	int			 code;	/* CMD_DROP: 0 no close frame */
	char			*text;	/* CMD_RAW */
};
TAILQ_HEAD(cmdq, cmd);

static struct {
	pthread_mutex_t		 mu;
	struct lws_context	*ctx;
	const char		*token;
	const char		*bot_id;
	long			 hb;
	int			 ack;
	long			 hbr_lead;	/* ms before the beat is due */
	long			 hbr_hold;	/* ms the answer's ACK waits */
	struct conn		*cur;
	/* The session. */
	char			 session[40];
	int			 session_ok;
	long long		 seq;
	struct event_rec	*events;
	size_t			 nevents;
	long long		 next_id;
	/* What the stand-in was sent. */
	cJSON			*rec;
	struct script		*scripts;
	size_t			 nscripts;
	struct cmdq		 cmds;
	struct timespec		 t0;
	int			 gw_port;
	/* The session start limit; starts_reset is in now_rel ms. */
	long			 starts_total;
	long			 starts_left;
	double			 starts_reset;
} si = { .mu = PTHREAD_MUTEX_INITIALIZER, .hb = 500, .ack = 1,
    .bot_id = "900000000000000001", .next_id = 1400000000000000000LL,
    .starts_total = 1000, .starts_left = 1000, .starts_reset = SI_DAY_MS };

static double
now_rel(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - si.t0.tv_sec) * 1000.0 +
	    (double)(t.tv_nsec - si.t0.tv_nsec) / 1e6;
}

static void
rec_add(const char *what, cJSON *item)
{
	cJSON *a = cJSON_GetObjectItemCaseSensitive(si.rec, what);

	cJSON_AddItemToArray(a, item);
}

static char *
print_free(cJSON *o)
{
	char *s = cJSON_PrintUnformatted(o);

	cJSON_Delete(o);
	return s;
}

/* ---- the gateway (lws thread; si.mu held in every callback) ---- */

static void
conn_queue(struct conn *c, const char *text)
{
	if (c == NULL || c->nout >= SI_MAX_OUT)
		return;
	c->out[c->nout++] = xstrdup(text);
	lws_callback_on_writable(c->wsi);
}

/* A dispatch joins the session's log with the next sequence number. */
static void
dispatch_add(const char *t, cJSON *d)
{
	cJSON *o = cJSON_CreateObject();
	struct event_rec *e;

	si.seq++;
	cJSON_AddNumberToObject(o, "op", 0);
	cJSON_AddNumberToObject(o, "s", (double)si.seq);
	cJSON_AddStringToObject(o, "t", t);
	cJSON_AddItemToObject(o, "d", d);
	si.events = xreallocarray(si.events, si.nevents + 1,
	    sizeof(*si.events));
	e = &si.events[si.nevents++];
	e->seq = si.seq;
	e->text = print_free(o);
}

/* Send the dispatches the client has not had yet. */
static void
flush(struct conn *c)
{
	if (c == NULL || !c->ready)
		return;
	for (size_t i = 0; i < si.nevents; i++)
		if (si.events[i].seq > c->sent_seq) {
			conn_queue(c, si.events[i].text);
			c->sent_seq = si.events[i].seq;
		}
}

static void
session_new(void)
{
	for (size_t i = 0; i < si.nevents; i++)
		free(si.events[i].text);
	free(si.events);
	si.events = NULL;
	si.nevents = 0;
	si.seq = 0;
	snprintf(si.session, sizeof(si.session), "sess-%08lx%04x",
	    (unsigned long)time(NULL), (unsigned)rand() & 0xffff);
	si.session_ok = 1;
}

static void
on_identify(struct conn *c, cJSON *d)
{
	const cJSON *tok = cJSON_GetObjectItemCaseSensitive(d, "token");
	cJSON *r, *u;

	rec_add("identify", cJSON_Duplicate(d, 1));
	if (!cJSON_IsString(tok) || strcmp(tok->valuestring, si.token) != 0) {
		conn_queue(c, "\1close 4004");
		return;
	}
	session_new();
	if (si.starts_left > 0)
		si.starts_left--;
	r = cJSON_CreateObject();
	cJSON_AddNumberToObject(r, "v", 10);
	u = cJSON_AddObjectToObject(r, "user");
	cJSON_AddStringToObject(u, "id", si.bot_id);
	cJSON_AddStringToObject(u, "username", "afbot");
	cJSON_AddTrueToObject(u, "bot");
	cJSON_AddItemToObject(r, "guilds", cJSON_CreateArray());
	cJSON_AddStringToObject(r, "session_id", si.session);
	{
		char url[64];

		snprintf(url, sizeof(url), "ws://127.0.0.1:%d",
		    lws_get_vhost_listen_port(lws_get_vhost(c->wsi)));
		cJSON_AddStringToObject(r, "resume_gateway_url", url);
	}
	dispatch_add("READY", r);
	c->ready = 1;
	c->sent_seq = si.seq - 1;
	flush(c);
}

static void
on_resume(struct conn *c, cJSON *d)
{
	const cJSON *sid = cJSON_GetObjectItemCaseSensitive(d, "session_id");
	const cJSON *seq = cJSON_GetObjectItemCaseSensitive(d, "seq");
	const cJSON *tok = cJSON_GetObjectItemCaseSensitive(d, "token");

	rec_add("resume", cJSON_Duplicate(d, 1));
	if (!cJSON_IsString(tok) || strcmp(tok->valuestring, si.token) != 0) {
		conn_queue(c, "\1close 4004");
		return;
	}
	if (!si.session_ok || !cJSON_IsString(sid) ||
	    strcmp(sid->valuestring, si.session) != 0 ||
	    !cJSON_IsNumber(seq) || seq->valuedouble > (double)si.seq) {
		conn_queue(c, "{\"op\":9,\"d\":false}");
		return;
	}
	/* Replay what was dispatched after the client's seq, then RESUMED. */
	c->ready = 1;
	c->sent_seq = (long long)seq->valuedouble;
	dispatch_add("RESUMED", cJSON_CreateObject());
	flush(c);
}

/* A beat from the client, acknowledged now or, around a timed heartbeat
 * request, later. */
static void
on_heartbeat(struct conn *c)
{
	switch (c->hbr) {
	case HBR_ARMED:
		/* A regular beat: the next is due one interval from now. */
		c->hbr = HBR_TIMED;
		lws_set_timer_usecs(c->wsi, si.hb > si.hbr_lead ?
		    (si.hb - si.hbr_lead) * 1000 : 1);
		break;
	case HBR_ASKED:
		if (si.hbr_hold > 0) {
			c->hbr = HBR_HOLDING;
			c->held = 1;
			lws_set_timer_usecs(c->wsi, si.hbr_hold * 1000);
			return;
		}
		c->hbr = HBR_NONE;
		break;
	case HBR_HOLDING:
		c->held++;
		return;
	default:
		break;
	}
	if (si.ack)
		conn_queue(c, "{\"op\":11}");
}

static void
on_timer(struct conn *c)
{
	cJSON *r;

	if (c->hbr == HBR_TIMED) {
		r = cJSON_CreateObject();
		cJSON_AddNumberToObject(r, "t", now_rel());
		rec_add("heartbeat_requests", r);
		conn_queue(c, "{\"op\":1,\"d\":null}");
		c->hbr = HBR_ASKED;
	} else if (c->hbr == HBR_HOLDING) {
		for (; c->held > 0; c->held--)
			if (si.ack)
				conn_queue(c, "{\"op\":11}");
		c->hbr = HBR_NONE;
	}
}

static void
on_gateway_message(struct conn *c, const char *text, size_t len)
{
	cJSON *o = cJSON_ParseWithLength(text, len), *h;
	const cJSON *op, *d;

	if (o == NULL) {
		conn_queue(c, "\1close 4002");
		return;
	}
	op = cJSON_GetObjectItemCaseSensitive(o, "op");
	d = cJSON_GetObjectItemCaseSensitive(o, "d");
	switch (cJSON_IsNumber(op) ? op->valueint : -1) {
	case 1:
		h = cJSON_CreateObject();
		cJSON_AddNumberToObject(h, "t", now_rel());
		cJSON_AddItemToObject(h, "d", cJSON_Duplicate(d, 1));
		cJSON_AddBoolToObject(h, "acked", si.ack);
		if (c->hbr == HBR_ASKED)
			cJSON_AddTrueToObject(h, "requested");
		if (c->hbr == HBR_HOLDING)
			cJSON_AddTrueToObject(h, "held");
		rec_add("heartbeats", h);
		on_heartbeat(c);
		break;
	case 2:
		if (c->ready)
			conn_queue(c, "\1close 4005");
		else
			on_identify(c, (cJSON *)d);
		break;
	case 6:
		on_resume(c, (cJSON *)d);
		break;
	default:
		conn_queue(c, "\1close 4001");
	}
	cJSON_Delete(o);
}

static int
on_writeable(struct conn *c)
{
	char *f;
	size_t n;
	unsigned char *p;
	int code;

	if (c->nout == 0)
		return 0;
	f = c->out[0];
	memmove(c->out, c->out + 1, (c->nout - 1) * sizeof(*c->out));
	c->nout--;
	if (strncmp(f, "\1close ", 7) == 0) {
		code = atoi(f + 7);
		free(f);
		lws_close_reason(c->wsi, (enum lws_close_status)code, NULL, 0);
		return -1;
	}
	if (strcmp(f, "\1drop") == 0) {
		/* No close frame: the socket just goes away. */
		free(f);
		shutdown(lws_get_socket_fd(c->wsi), SHUT_RDWR);
		return -1;
	}
	n = strlen(f);
	p = xmalloc(LWS_PRE + n);
	memcpy(p + LWS_PRE, f, n);
	free(f);
	if (lws_write(c->wsi, p + LWS_PRE, n, LWS_WRITE_TEXT) < (int)n) {
		free(p);
		return -1;
	}
	free(p);
	if (c->nout > 0)
		lws_callback_on_writable(c->wsi);
	return 0;
}

static void
run_commands(void)
{
	struct cmd *k;

	while ((k = TAILQ_FIRST(&si.cmds)) != NULL) {
		TAILQ_REMOVE(&si.cmds, k, entry);
		if (si.cur != NULL) {
			if (k->kind == CMD_FLUSH)
				flush(si.cur);
			else if (k->kind == CMD_RAW)
				conn_queue(si.cur, k->text);
			else if (k->kind == CMD_HB_REQUEST)
				si.cur->hbr = HBR_ARMED;
			else if (k->kind == CMD_INVALIDATE) {
				/* The session is gone: the client may
				 * IDENTIFY again on this connection. */
				si.cur->ready = 0;
				conn_queue(si.cur, k->text);
			}
			else if (k->code == 0)
				conn_queue(si.cur, "\1drop");
			else {
				char t[32];

				snprintf(t, sizeof(t), "\1close %d", k->code);
				conn_queue(si.cur, t);
			}
		}
		free(k->text);
		free(k);
	}
}

static int
gw_cb(struct lws *wsi, enum lws_callback_reasons reason, void *user,
    void *in, size_t len)
{
	struct conn *c = user;
	cJSON *r;
	char hello[96];
	int rc = 0;

	pthread_mutex_lock(&si.mu);
	switch (reason) {
	case LWS_CALLBACK_ESTABLISHED:
		memset(c, 0, sizeof(*c));
		c->wsi = wsi;
		buf_init(&c->rx);
		si.cur = c;
		r = cJSON_CreateObject();
		cJSON_AddNumberToObject(r, "t", now_rel());
		rec_add("connections", r);
		snprintf(hello, sizeof(hello), "{\"op\":10,\"d\":{"
		    "\"heartbeat_interval\":%ld},\"s\":null,\"t\":null}",
		    si.hb);
		conn_queue(c, hello);
		break;
	case LWS_CALLBACK_RECEIVE:
		buf_add(&c->rx, in, len);
		if (lws_is_final_fragment(wsi) &&
		    lws_remaining_packet_payload(wsi) == 0) {
			on_gateway_message(c, c->rx.data, c->rx.len);
			buf_reset(&c->rx);
		}
		break;
	case LWS_CALLBACK_SERVER_WRITEABLE:
		rc = on_writeable(c);
		break;
	case LWS_CALLBACK_TIMER:
		on_timer(c);
		break;
	case LWS_CALLBACK_CLOSED:
		r = cJSON_CreateObject();
		cJSON_AddNumberToObject(r, "t", now_rel());
		rec_add("disconnections", r);
		if (si.cur == c)
			si.cur = NULL;
		for (size_t i = 0; i < c->nout; i++)
			free(c->out[i]);
		c->nout = 0;
		buf_free(&c->rx);
		break;
	case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
		run_commands();
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&si.mu);
	if (reason == LWS_CALLBACK_HTTP)
		return lws_callback_http_dummy(wsi, reason, user, in, len);
	return rc;
}

static const struct lws_protocols protocols[] = {
	{ "gateway", gw_cb, sizeof(struct conn), 1 << 16, 0, NULL, 0 },
	{ NULL, NULL, 0, 0, 0, NULL, 0 }
};

static void *
gw_thread(void *arg)
{
	for (;;)
		lws_service(si.ctx, 0);
	return NULL;
}

static void
command(enum cmd_kind kind, int code, const char *text)
{
	struct cmd *k = xcalloc(1, sizeof(*k));

	k->kind = kind;
	k->code = code;
	k->text = text != NULL ? xstrdup(text) : NULL;
	TAILQ_INSERT_TAIL(&si.cmds, k, entry);
}

/* ---- HTTP: REST and control (main thread) ---- */

static void
reply(struct evhttp_request *req, int code, const char *body)
{
	struct evbuffer *b = evbuffer_new();

	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "application/json");
	if (body != NULL)
		evbuffer_add(b, body, strlen(body));
	evhttp_send_reply(req, code, code < 300 ? "OK" : "Error", b);
	evbuffer_free(b);
}

static char *
req_body(struct evhttp_request *req)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t n = evbuffer_get_length(in);
	char *s = xmalloc(n + 1);

	evbuffer_remove(in, s, n);
	s[n] = '\0';
	return s;
}

static const char *
hdr(struct evhttp_request *req, const char *name)
{
	return evhttp_find_header(evhttp_request_get_input_headers(req), name);
}

static int
take_script(const char *route, struct script *out)
{
	for (size_t i = 0; i < si.nscripts; i++) {
		struct script *s = &si.scripts[i];

		if (s->count > 0 && (strcmp(s->route, "*") == 0 ||
		    strcmp(s->route, route) == 0)) {
			s->count--;
			*out = *s;
			return 1;
		}
	}
	return 0;
}

/* GET /gateway/bot: Discord's shape. The limit resets once its time has
 * come, as Discord's does. */
static char *
gateway_bot(void)
{
	cJSON *o = cJSON_CreateObject(), *l;
	double now = now_rel();
	char url[64];

	if (now >= si.starts_reset) {
		si.starts_left = si.starts_total;
		si.starts_reset = now + SI_DAY_MS;
	}
	snprintf(url, sizeof(url), "ws://127.0.0.1:%d", si.gw_port);
	cJSON_AddStringToObject(o, "url", url);
	cJSON_AddNumberToObject(o, "shards", 1);
	l = cJSON_AddObjectToObject(o, "session_start_limit");
	cJSON_AddNumberToObject(l, "total", (double)si.starts_total);
	cJSON_AddNumberToObject(l, "remaining", (double)si.starts_left);
	cJSON_AddNumberToObject(l, "reset_after",
	    (double)(long long)(si.starts_reset - now + 0.999));
	cJSON_AddNumberToObject(l, "max_concurrency", 1);
	return print_free(o);
}

static void
rest(struct evhttp_request *req, const char *path)
{
	struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
	char chan[64], what[16], *body = req_body(req), want[512], idbuf[32];
	const char *auth = hdr(req, "Authorization"), *p;
	struct script sc;
	cJSON *r, *h, *b, *o;
	long status = 200;
	char *out = NULL;

	p = strstr(path, "/channels/");
	if (evhttp_request_get_command(req) == EVHTTP_REQ_GET &&
	    strlen(path) >= 12 && strcmp(path + strlen(path) - 12,
	    "/gateway/bot") == 0) {
		snprintf(what, sizeof(what), "gateway");
		chan[0] = '\0';
	} else if (evhttp_request_get_command(req) != EVHTTP_REQ_POST ||
	    p == NULL ||
	    sscanf(p, "/channels/%63[0-9]/%15[a-z]", chan, what) != 2 ||
	    (strcmp(what, "messages") != 0 && strcmp(what, "typing") != 0)) {
		reply(req, 404, "{\"message\":\"404: Not Found\",\"code\":0}");
		free(body);
		return;
	}
	snprintf(want, sizeof(want), "Bot %s", si.token);
	r = cJSON_CreateObject();
	cJSON_AddNumberToObject(r, "t", now_rel());
	cJSON_AddStringToObject(r, "path", path);
	cJSON_AddStringToObject(r, "route", what);
	cJSON_AddStringToObject(r, "channel_id", chan);
	h = cJSON_AddObjectToObject(r, "headers");
	cJSON_AddStringToObject(h, "authorization", auth ? auth : "");
	cJSON_AddStringToObject(h, "content-type", hdr(req, "Content-Type") ?
	    hdr(req, "Content-Type") : "");
	cJSON_AddStringToObject(h, "user-agent", hdr(req, "User-Agent") ?
	    hdr(req, "User-Agent") : "");
	b = cJSON_Parse(body);
	if (b != NULL)
		cJSON_AddItemToObject(r, "body", b);
	else
		cJSON_AddStringToObject(r, "raw", body);
	if (take_script(what, &sc)) {
		const cJSON *kv;

		status = sc.status;
		cJSON_ArrayForEach(kv, sc.headers)
			if (cJSON_IsString(kv))
				evhttp_add_header(oh, kv->string,
				    kv->valuestring);
		out = xstrdup(sc.body ? sc.body : "");
	} else if (auth == NULL || strcmp(auth, want) != 0) {
		status = 401;
		out = xstrdup("{\"message\":\"401: Unauthorized\",\"code\":0}");
	} else if (strcmp(what, "typing") == 0) {
		status = 204;
	} else if (strcmp(what, "gateway") == 0) {
		out = gateway_bot();
	} else {
		o = cJSON_CreateObject();
		snprintf(idbuf, sizeof(idbuf), "%lld", si.next_id++);
		cJSON_AddStringToObject(o, "id", idbuf);
		cJSON_AddStringToObject(o, "channel_id", chan);
		cJSON_AddItemToObject(o, "content", cJSON_Duplicate(
		    cJSON_GetObjectItemCaseSensitive(b, "content"), 1));
		out = print_free(o);
		evhttp_add_header(oh, "X-RateLimit-Limit", "5");
		evhttp_add_header(oh, "X-RateLimit-Remaining", "4");
		evhttp_add_header(oh, "X-RateLimit-Reset-After", "0.250");
		evhttp_add_header(oh, "X-RateLimit-Bucket", "standin-bucket");
	}
	cJSON_AddNumberToObject(r, "status", (double)status);
	rec_add("rest", r);
	if (status == 204)
		evhttp_send_reply(req, 204, "No Content", NULL);
	else
		reply(req, (int)status, out);
	free(out);
	free(body);
}

static cJSON *
push_message(cJSON *spec)
{
	const cJSON *v, *m;
	cJSON *d = cJSON_CreateObject(), *a, *ms, *res = cJSON_CreateObject();
	char id[32];

	snprintf(id, sizeof(id), "%lld", si.next_id++);
	cJSON_AddStringToObject(d, "id", id);
	v = cJSON_GetObjectItemCaseSensitive(spec, "channel_id");
	cJSON_AddStringToObject(d, "channel_id", cJSON_IsString(v) ?
	    v->valuestring : "100");
	v = cJSON_GetObjectItemCaseSensitive(spec, "guild_id");
	if (v == NULL)
		cJSON_AddStringToObject(d, "guild_id", "200");
	else if (cJSON_IsString(v))
		cJSON_AddStringToObject(d, "guild_id", v->valuestring);
	v = cJSON_GetObjectItemCaseSensitive(spec, "type");
	cJSON_AddNumberToObject(d, "type", cJSON_IsNumber(v) ? v->valueint : 0);
	v = cJSON_GetObjectItemCaseSensitive(spec, "content");
	cJSON_AddStringToObject(d, "content", cJSON_IsString(v) ?
	    v->valuestring : "");
	a = cJSON_AddObjectToObject(d, "author");
	v = cJSON_GetObjectItemCaseSensitive(spec, "author_id");
	cJSON_AddStringToObject(a, "id", cJSON_IsString(v) ? v->valuestring :
	    "300");
	cJSON_AddStringToObject(a, "username", "someone");
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(spec, "bot")))
		cJSON_AddTrueToObject(a, "bot");
	ms = cJSON_AddArrayToObject(d, "mentions");
	cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(spec,
	    "mentions")) {
		cJSON *u = cJSON_CreateObject();

		if (cJSON_IsString(m))
			cJSON_AddStringToObject(u, "id", m->valuestring);
		cJSON_AddItemToArray(ms, u);
	}
	dispatch_add("MESSAGE_CREATE", d);
	command(CMD_FLUSH, 0, NULL);
	cJSON_AddStringToObject(res, "id", id);
	cJSON_AddNumberToObject(res, "seq", (double)si.seq);
	return res;
}

static void
add_script(cJSON *spec)
{
	const cJSON *v;
	struct script *s;

	si.scripts = xreallocarray(si.scripts, si.nscripts + 1,
	    sizeof(*si.scripts));
	s = &si.scripts[si.nscripts++];
	memset(s, 0, sizeof(*s));
	v = cJSON_GetObjectItemCaseSensitive(spec, "route");
	s->route = xstrdup(cJSON_IsString(v) ? v->valuestring : "messages");
	v = cJSON_GetObjectItemCaseSensitive(spec, "status");
	s->status = cJSON_IsNumber(v) ? v->valueint : 500;
	v = cJSON_GetObjectItemCaseSensitive(spec, "body");
	s->body = v == NULL ? NULL : cJSON_IsString(v) ?
	    xstrdup(v->valuestring) : cJSON_PrintUnformatted(v);
	s->headers = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(spec,
	    "headers"), 1);
	v = cJSON_GetObjectItemCaseSensitive(spec, "count");
	s->count = cJSON_IsNumber(v) ? v->valueint : 1;
}

/* A test sets what GET /gateway/bot says: remaining starts, and how long
 * until they reset to the total. Returns the stand-in's time. */
static char *
session_limit(cJSON *spec)
{
	const cJSON *v;
	cJSON *o = cJSON_CreateObject();
	double now = now_rel();

	v = cJSON_GetObjectItemCaseSensitive(spec, "remaining");
	if (cJSON_IsNumber(v))
		si.starts_left = v->valueint;
	v = cJSON_GetObjectItemCaseSensitive(spec, "reset_after");
	if (cJSON_IsNumber(v))
		si.starts_reset = now + v->valuedouble;
	cJSON_AddNumberToObject(o, "t", now);
	return print_free(o);
}

static void
control(struct evhttp_request *req, const char *path)
{
	char *body = req_body(req), *out = NULL;
	cJSON *spec = cJSON_Parse(body), *o;
	const cJSON *v;

	if (strcmp(path, "/_record") == 0)
		out = cJSON_PrintUnformatted(si.rec);
	else if (strcmp(path, "/_state") == 0) {
		o = cJSON_CreateObject();
		cJSON_AddBoolToObject(o, "connected", si.cur != NULL);
		cJSON_AddBoolToObject(o, "ready", si.cur != NULL &&
		    si.cur->ready);
		cJSON_AddNumberToObject(o, "seq", (double)si.seq);
		cJSON_AddStringToObject(o, "session", si.session);
		cJSON_AddNumberToObject(o, "starts_left",
		    (double)si.starts_left);
		out = print_free(o);
	} else if (strcmp(path, "/_push") == 0)
		out = print_free(push_message(spec));
	else if (strcmp(path, "/_drop") == 0) {
		v = cJSON_GetObjectItemCaseSensitive(spec, "code");
		command(CMD_DROP, cJSON_IsNumber(v) ? v->valueint : 0, NULL);
	} else if (strcmp(path, "/_reconnect") == 0)
		command(CMD_RAW, 0, "{\"op\":7,\"d\":null}");
	else if (strcmp(path, "/_invalid_session") == 0) {
		int res = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(spec,
		    "resumable"));

		if (!res)
			si.session_ok = 0;
		command(res ? CMD_RAW : CMD_INVALIDATE, 0, res ?
		    "{\"op\":9,\"d\":true}" : "{\"op\":9,\"d\":false}");
	} else if (strcmp(path, "/_ack") == 0)
		si.ack = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(spec,
		    "on"));
	else if (strcmp(path, "/_heartbeat_request") == 0) {
		v = cJSON_GetObjectItemCaseSensitive(spec, "lead");
		si.hbr_lead = cJSON_IsNumber(v) ? v->valueint : 0;
		v = cJSON_GetObjectItemCaseSensitive(spec, "hold");
		si.hbr_hold = cJSON_IsNumber(v) ? v->valueint : 0;
		command(CMD_HB_REQUEST, 0, NULL);
	} else if (strcmp(path, "/_script") == 0)
		add_script(spec);
	else if (strcmp(path, "/_session_limit") == 0)
		out = session_limit(spec);
	else {
		reply(req, 404, "{}");
		goto done;
	}
	lws_cancel_service(si.ctx);
	reply(req, 200, out != NULL ? out : "{}");
done:
	cJSON_free(out);
	cJSON_Delete(spec);
	free(body);
}

static void
on_http(struct evhttp_request *req, void *arg)
{
	const char *uri = evhttp_request_get_uri(req);
	char path[512];

	snprintf(path, sizeof(path), "%.*s", (int)strcspn(uri, "?"), uri);
	pthread_mutex_lock(&si.mu);
	if (strncmp(path, "/_", 2) == 0)
		control(req, path);
	else
		rest(req, path);
	pthread_mutex_unlock(&si.mu);
}

static void
usage(void)
{
	fprintf(stderr, "usage: discord_standin --token T [--bot-id ID] "
	    "[--heartbeat MS]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	struct lws_context_creation_info info;
	struct event_base *base;
	struct evhttp *http;
	struct evhttp_bound_socket *bs;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	pthread_t t;

	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			usage();
		if (strcmp(argv[i], "--token") == 0)
			si.token = argv[++i];
		else if (strcmp(argv[i], "--bot-id") == 0)
			si.bot_id = argv[++i];
		else if (strcmp(argv[i], "--heartbeat") == 0)
			si.hb = atol(argv[++i]);
		else
			usage();
	}
	if (si.token == NULL)
		usage();
	clock_gettime(CLOCK_MONOTONIC, &si.t0);
	srand((unsigned)getpid());
	TAILQ_INIT(&si.cmds);
	si.rec = cJSON_CreateObject();
	cJSON_AddItemToObject(si.rec, "identify", cJSON_CreateArray());
	cJSON_AddItemToObject(si.rec, "resume", cJSON_CreateArray());
	cJSON_AddItemToObject(si.rec, "heartbeats", cJSON_CreateArray());
	cJSON_AddItemToObject(si.rec, "heartbeat_requests",
	    cJSON_CreateArray());
	cJSON_AddItemToObject(si.rec, "connections", cJSON_CreateArray());
	cJSON_AddItemToObject(si.rec, "disconnections", cJSON_CreateArray());
	cJSON_AddItemToObject(si.rec, "rest", cJSON_CreateArray());

	lws_set_log_level(LLL_ERR, NULL);
	memset(&info, 0, sizeof(info));
	info.port = 0;
	info.iface = "127.0.0.1";
	info.protocols = protocols;
	info.gid = -1;
	info.uid = -1;
	if ((si.ctx = lws_create_context(&info)) == NULL) {
		fprintf(stderr, "discord_standin: lws context failed\n");
		return 1;
	}
	base = event_base_new();
	http = evhttp_new(base);
	evhttp_set_max_body_size(http, SI_MAX_BODY);
	evhttp_set_timeout(http, 30);
	evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST);
	evhttp_set_gencb(http, on_http, NULL);
	if ((bs = evhttp_bind_socket_with_handle(http, "127.0.0.1", 0)) ==
	    NULL) {
		fprintf(stderr, "discord_standin: cannot listen\n");
		return 1;
	}
	getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss,
	    &sl);
	si.gw_port = lws_get_vhost_listen_port(lws_get_vhost_by_name(si.ctx,
	    "default"));
	printf("%d\n%d\n", si.gw_port,
	    ntohs(((struct sockaddr_in *)&ss)->sin_port));
	fflush(stdout);
	pthread_create(&t, NULL, gw_thread, NULL);
	event_base_dispatch(base);
	return 0;
}
