/*
 * The Discord trigger (SPEC section 2): a gateway connection for events and
 * the REST API for replies and, before each new session, for the session
 * start limit (GET /gateway/bot).
 *
 * Debian's libwebsockets has no libevent backend, so the gateway socket runs
 * on a thread of its own with lws's own loop. That thread only moves bytes:
 * it reassembles each incoming message and hands it to the loop thread
 * (loop_post), and it writes what the loop queued for it (under a mutex,
 * woken with lws_cancel_service, the one lws call safe from another thread).
 * The gateway protocol itself (HELLO, IDENTIFY, heartbeats, RESUME, close
 * codes), the runs, the replies and the audit trail all stay on the loop.
 *
 * The thread is created in start, after the sandbox: the sandbox refuses to
 * apply once a second thread exists. The lws context is created in prepare,
 * before the sandbox, so the TLS setup can read what it needs.
 *
 * The bot token goes into IDENTIFY, RESUME and the Authorization header,
 * never into a URL, a log line or an audit record.
 */
#include <sys/queue.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <libwebsockets.h>

#include "audit/audit.h"
#include "command.h"
#include "config.h"
#include "http.h"
#include "loop.h"
#include "run.h"
#include "trigger.h"
#include "triggers/chatq.h"
#include "triggers/discord.h"
#include "util.h"

#define DC_HELLO_TIMEOUT_MS	30000	/* connect to HELLO */
#define DC_AUTH_TIMEOUT_MS	30000	/* IDENTIFY or RESUME to READY/RESUMED */
#define DC_BACKOFF_MIN_MS	1000
#define DC_BACKOFF_MAX_MS	60000
#define DC_IDENTIFY_EVERY_MS	5000	/* Discord: one IDENTIFY per 5 s */
#define DC_REIDENTIFY_MIN_MS	1000	/* INVALID_SESSION false: wait 1-5 s */
#define DC_REIDENTIFY_MAX_MS	5000
#define DC_CLOSE_RESUMABLE	4000	/* af's own close: 1000 and 1001 would
					   end the session */
#define DC_INBOX_MAX		(16 << 20)	/* bytes waiting for the loop */
#define DC_OUTBOX_MAX		64	/* gateway frames waiting to be sent */
#define DC_SEEN_MAX		256	/* message ids remembered (no twice) */
#define DC_HTTP_TIMEOUT_MS	30000
#define DC_HTTP_CONNECT_MS	10000
#define DC_RESPONSE_MAX		(1 << 20)
#define DC_SEND_ATTEMPTS	5	/* per message */
#define DC_RETRY_DEFAULT_MS	1000	/* a 429 that says nothing usable */
#define DC_TYPING_EVERY_MS	8000	/* Discord shows it for 10 s */
#define DC_CHANNEL_QUEUE_MAX	(4 * DC_MAX_PARTS)
#define DC_LIMITS_MAX		256	/* route rate-limit entries kept */
#define DC_TOKEN_MAX		256
#define DC_START_WAIT_MIN_MS	1000	/* a spent limit that says it reset */
#define DC_START_WAIT_SLACK_MS	250	/* reset_after is whole ms, and the
					   loop's clock lags a little */
#define DC_ROUTE_GATEWAY	"gateway/bot"	/* its rate-limit entry */
#define DC_USER_AGENT		"User-Agent: DiscordBot (af, " AF_VERSION ")"

/* ---- the bridge between the lws thread and the loop ---- */

enum ev_kind { DC_EV_OPEN, DC_EV_FRAME, DC_EV_CLOSED };

/* Something the lws thread saw, for the loop. gen names the connection. */
struct dc_ev {
	TAILQ_ENTRY(dc_ev)	 entry;
	enum ev_kind		 kind;
	uint64_t		 gen;
	int			 code;		/* DC_EV_CLOSED: close code, 0 none,
						   -1 never connected */
	char			*text;		/* frame, or why it closed */
	size_t			 len;
};
TAILQ_HEAD(dc_evq, dc_ev);

/* A frame for the gateway, for connection gen only. */
struct dc_frame_out {
	TAILQ_ENTRY(dc_frame_out) entry;
	uint64_t		 gen;
	char			*text;
};
TAILQ_HEAD(dc_outq, dc_frame_out);

static struct {
	pthread_mutex_t		 mu;
	struct lws_context	*ctx;
	pthread_t		 thread;
	int			 running;	/* the thread was started */
	/* Under mu: the loop's requests. */
	int			 stop;
	int			 want_connect;
	uint64_t		 connect_gen;
	struct dc_url		 connect_url;
	uint64_t		 close_gen;
	int			 close_code;
	struct dc_outq		 out;
	size_t			 nout;
	/* Under mu: what the thread saw. */
	struct dc_evq		 in;
	size_t			 in_bytes;
	int			 posted;
	/* The lws thread's own. */
	struct lws		*wsi;		/* the current connection */
	uint64_t		 wsi_gen;
	uint64_t		 reported_gen;	/* its DC_EV_CLOSED went out */
	int			 peer_code;
	const char		*local_why;	/* af closed it: why */
	struct buf		 rx;		/* a message being reassembled */
} br = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* ---- the loop's side ---- */

enum gw_phase {
	GW_IDLE,	/* no connection; maybe a retry timer */
	GW_CHECKING,	/* GET /gateway/bot before a new session */
	GW_CONNECTING,	/* asked the thread to connect */
	GW_HELLO,	/* open, waiting for HELLO */
	GW_AUTH,	/* IDENTIFY or RESUME sent */
	GW_READY,	/* events flow */
	GW_DEAD		/* a fatal close: the operator must act */
};

_Static_assert(DC_ID_MAX <= CHATQ_ID_MAX, "a snowflake fits a chatq id");

/* What Discord said about one route's rate limit. */
struct dc_limit {
	LIST_ENTRY(dc_limit)	 entry;
	char			 route[48];	/* "messages:ID", "typing:ID" */
	char			 bucket[64];	/* X-RateLimit-Bucket, or "" */
	long			 remaining;	/* -1: unknown */
	int64_t			 reset_at;	/* mono ms */
};
LIST_HEAD(dc_limits, dc_limit);

static struct {
	const struct cfg	*cfg;
	const char		*token;		/* the config's; never logged */
	char			*auth_header;	/* holds the token */
	const char		*headers[4];
	char			*api;		/* api_base without a slash */
	struct dc_url		 gateway;	/* the configured one */
	struct dc_url		 target;	/* where a new session goes */
	uint64_t		 gen;
	enum gw_phase		 phase;
	int			 stopped;
	/* The session, kept across connections for RESUME. */
	char			 session_id[DC_SESSION_MAX];
	char			 resume_url[DC_URL_MAX];
	int64_t			 seq;
	char			 bot_id[DC_ID_MAX];
	/* Heartbeats. */
	long			 hb_interval;
	int			 acked;		/* an ACK came since the last
						   regular beat */
	struct loop_timer	*hb_timer;
	struct loop_timer	*phase_timer;	/* HELLO, auth deadlines */
	struct loop_timer	*retry_timer;
	struct loop_timer	*identify_timer;
	int64_t			 last_identify;	/* mono ms; 0 never */
	/* The session start limit (GET /gateway/bot). */
	struct http_call	*check;		/* the call in flight */
	int			 start_ok;	/* Discord allows one more
						   IDENTIFY; spent by it */
	long			 starts_total;	/* -1: not asked yet */
	long			 starts_remaining;
	int64_t			 starts_wait_until;	/* wall ms; 0 none */
	long			 backoff;
	char			 why[256];	/* the last drop */
	/* Messages already taken, so a replay never runs one twice. */
	char			 seen[DC_SEEN_MAX][DC_ID_MAX];
	size_t			 seen_next;
	/* Replies. */
	struct chatq_table	 chans;		/* message JSON bodies */
	struct dc_limits	 limits;
	size_t			 nlimits;
	int64_t			 global_until;	/* mono ms: a global 429 */
	/* Counters for the status port. */
	uint64_t		 received;
	uint64_t		 ignored;
	uint64_t		 refused;
	uint64_t		 identifies;
	uint64_t		 resumes;
	uint64_t		 reconnects;
	uint64_t		 sent;
	uint64_t		 send_failed;
	uint64_t		 rate_limited;
} dc;

static void bridge_drain(void *);
static void gw_connect(void *);
static void gw_send(const char *);
static void check_start(void);
static long limit_wait(const char *);
static void limit_update(const char *, const struct http_response *);
static void limit_hit(const char *, const struct http_response *);
static const struct chatq_def dc_chatq;

static int
dc_enabled(const struct cfg *cfg)
{
	return cfg->trig.discord.enabled;
}

static long
random_between(long lo, long hi)
{
	uint32_t r;

	random_bytes(&r, sizeof(r));
	return lo + (long)(r % (uint32_t)(hi - lo + 1));
}

/* ==== the lws thread ==== */

/* Hand an event to the loop; one loop_post per batch. Takes ownership of
 * text. Runs on the lws thread. */
static void
bridge_post(enum ev_kind kind, uint64_t gen, int code, char *text,
    size_t len)
{
	struct dc_ev *ev = xcalloc(1, sizeof(*ev));
	int post = 0;

	ev->kind = kind;
	ev->gen = gen;
	ev->code = code;
	ev->text = text;
	ev->len = len;
	pthread_mutex_lock(&br.mu);
	if (br.stop) {
		/* Shutting down: the loop will not look again. */
		pthread_mutex_unlock(&br.mu);
		free(ev->text);
		free(ev);
		return;
	}
	TAILQ_INSERT_TAIL(&br.in, ev, entry);
	br.in_bytes += len;
	if (!br.posted)
		post = br.posted = 1;
	pthread_mutex_unlock(&br.mu);
	if (post)
		loop_post(bridge_drain, NULL);
}

static void
report_closed(uint64_t gen, int code, const char *why)
{
	if (gen == 0 || br.reported_gen == gen)
		return;
	br.reported_gen = gen;
	bridge_post(DC_EV_CLOSED, gen, code, xstrdup(why != NULL ? why : ""), 0);
}

static size_t
inbox_bytes(void)
{
	size_t n;

	pthread_mutex_lock(&br.mu);
	n = br.in_bytes;
	pthread_mutex_unlock(&br.mu);
	return n;
}

/* A complete message arrived; an oversized one (or a loop that fell far
 * behind) closes the connection, and the session resumes on a new one. */
static int
on_receive(struct lws *wsi, const void *in, size_t len)
{
	if (wsi != br.wsi)
		return 0;
	if (br.rx.len + len > DC_FRAME_MAX) {
		br.local_why = "a gateway message passed 1 MiB";
		lws_close_reason(wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE, NULL,
		    0);
		buf_reset(&br.rx);
		return -1;
	}
	buf_add(&br.rx, in, len);
	if (!lws_is_final_fragment(wsi) || lws_remaining_packet_payload(wsi) >
	    0)
		return 0;
	if (inbox_bytes() + br.rx.len > DC_INBOX_MAX) {
		br.local_why = "the loop fell behind the gateway";
		lws_close_reason(wsi, DC_CLOSE_RESUMABLE, NULL, 0);
		buf_reset(&br.rx);
		return -1;
	}
	{
		size_t n = br.rx.len;
		char *text = buf_steal(&br.rx);

		bridge_post(DC_EV_FRAME, br.wsi_gen, 0, text, n);
	}
	return 0;
}

/* Write one queued frame, or the close af asked for. A connection that is
 * no longer the current one is closed (resumably) when it gets here. */
static int
on_writeable(struct lws *wsi)
{
	struct dc_frame_out *f;
	unsigned char *p;
	size_t n;
	int code = 0, more;

	if (wsi != br.wsi) {
		lws_close_reason(wsi, DC_CLOSE_RESUMABLE, NULL, 0);
		return -1;
	}
	pthread_mutex_lock(&br.mu);
	if (br.close_gen == br.wsi_gen && br.close_code != 0) {
		code = br.close_code;
		br.close_code = 0;
	}
	while ((f = TAILQ_FIRST(&br.out)) != NULL && f->gen != br.wsi_gen) {
		TAILQ_REMOVE(&br.out, f, entry);
		br.nout--;
		free(f->text);
		free(f);
	}
	if (code == 0 && f != NULL) {
		TAILQ_REMOVE(&br.out, f, entry);
		br.nout--;
	} else
		f = NULL;
	more = !TAILQ_EMPTY(&br.out);
	pthread_mutex_unlock(&br.mu);
	if (code != 0) {
		br.local_why = "closed by af";
		lws_close_reason(wsi, (enum lws_close_status)code, NULL, 0);
		return -1;
	}
	if (f == NULL)
		return 0;
	n = strlen(f->text);
	p = xmalloc(LWS_PRE + n);
	memcpy(p + LWS_PRE, f->text, n);
	/* The frame may hold the token: wipe it once written. */
	explicit_bzero(f->text, n);
	free(f->text);
	free(f);
	if (lws_write(wsi, p + LWS_PRE, n, LWS_WRITE_TEXT) < (int)n) {
		explicit_bzero(p, LWS_PRE + n);
		free(p);
		br.local_why = "writing to the gateway failed";
		return -1;
	}
	explicit_bzero(p, LWS_PRE + n);
	free(p);
	if (more)
		lws_callback_on_writable(wsi);
	return 0;
}

static void
thread_connect(uint64_t gen, const struct dc_url *u)
{
	struct lws_client_connect_info ci;
	struct lws *old = br.wsi;
	char host[300];

	/* The old connection, if any, closes on its own once writable (or
	 * is cut after a few seconds); its events no longer count. */
	if (old != NULL) {
		lws_callback_on_writable(old);
		lws_set_timeout(old, PENDING_TIMEOUT_USER_OK, 3);
	}
	br.wsi = NULL;
	br.wsi_gen = gen;
	br.peer_code = 0;
	br.local_why = NULL;
	buf_reset(&br.rx);
	if ((u->tls && u->port == 443) || (!u->tls && u->port == 80))
		snprintf(host, sizeof(host), "%s", u->host);
	else
		snprintf(host, sizeof(host), strchr(u->host, ':') != NULL ?
		    "[%s]:%d" : "%s:%d", u->host, u->port);
	memset(&ci, 0, sizeof(ci));
	ci.context = br.ctx;
	ci.address = u->host;
	ci.port = u->port;
	ci.path = u->path;
	ci.host = host;
	ci.origin = host;
	ci.ssl_connection = u->tls ? LCCSCF_USE_SSL : 0;
	ci.ietf_version_or_minus_one = -1;
	/* Set before any callback of the new connection can run. */
	ci.pwsi = &br.wsi;
	if (lws_client_connect_via_info(&ci) == NULL)
		report_closed(gen, -1, "the connection could not be started");
}

/* The loop asked for something: take its requests under the lock, act on
 * them outside it. */
static void
on_cancelled(void)
{
	struct dc_url u;
	uint64_t gen = 0;
	int connect, close_now, pending;

	pthread_mutex_lock(&br.mu);
	connect = br.want_connect;
	br.want_connect = 0;
	if (connect) {
		gen = br.connect_gen;
		u = br.connect_url;
	}
	close_now = br.close_code != 0 && br.close_gen == br.wsi_gen;
	pending = !TAILQ_EMPTY(&br.out);
	pthread_mutex_unlock(&br.mu);
	if (br.wsi != NULL && (close_now || pending))
		lws_callback_on_writable(br.wsi);
	if (connect)
		thread_connect(gen, &u);
}

static int
dc_lws_cb(struct lws *wsi, enum lws_callback_reasons reason, void *user,
    void *in, size_t len)
{
	const unsigned char *c = in;

	switch (reason) {
	case LWS_CALLBACK_CLIENT_ESTABLISHED:
		if (wsi == br.wsi)
			bridge_post(DC_EV_OPEN, br.wsi_gen, 0, NULL, 0);
		break;
	case LWS_CALLBACK_CLIENT_RECEIVE:
		return on_receive(wsi, in, len);
	case LWS_CALLBACK_CLIENT_WRITEABLE:
		return on_writeable(wsi);
	case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
		if (wsi == br.wsi && len >= 2)
			br.peer_code = c[0] << 8 | c[1];
		break;
	case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
		if (wsi == br.wsi || br.wsi == NULL) {
			report_closed(br.wsi_gen, -1, in != NULL && len > 0 ?
			    (const char *)in : "the connection failed");
			br.wsi = NULL;
		}
		break;
	case LWS_CALLBACK_CLIENT_CLOSED:
		if (wsi == br.wsi) {
			report_closed(br.wsi_gen, br.peer_code, br.local_why);
			br.wsi = NULL;
		}
		break;
	case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
		on_cancelled();
		break;
	default:
		break;
	}
	return 0;
}

static const struct lws_protocols dc_protocols[] = {
	{ "af-discord", dc_lws_cb, 0, 0, 0, NULL, 0 },
	{ NULL, NULL, 0, 0, 0, NULL, 0 }
};

static void *
thread_main(void *arg)
{
	int stop = 0;

	while (!stop) {
		lws_service(br.ctx, 0);
		pthread_mutex_lock(&br.mu);
		stop = br.stop;
		pthread_mutex_unlock(&br.mu);
	}
	return NULL;
}

/* lws's own complaints go to af's debug log, one line each. */
static void
lws_log(int level, const char *line)
{
	size_t n = strlen(line);

	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		n--;
	log_debug("discord: lws: %.*s", (int)n, line);
}

/* ---- the loop's requests to the thread ---- */

static void
bridge_wake(void)
{
	if (br.ctx != NULL)
		lws_cancel_service(br.ctx);
}

static void
bridge_connect(uint64_t gen, const struct dc_url *u)
{
	pthread_mutex_lock(&br.mu);
	br.want_connect = 1;
	br.connect_gen = gen;
	br.connect_url = *u;
	pthread_mutex_unlock(&br.mu);
	bridge_wake();
}

static void
bridge_close(uint64_t gen, int code)
{
	pthread_mutex_lock(&br.mu);
	br.close_gen = gen;
	br.close_code = code;
	pthread_mutex_unlock(&br.mu);
	bridge_wake();
}

static int
bridge_send(uint64_t gen, const char *text)
{
	struct dc_frame_out *f;

	pthread_mutex_lock(&br.mu);
	if (br.nout >= DC_OUTBOX_MAX) {
		pthread_mutex_unlock(&br.mu);
		return -1;
	}
	f = xcalloc(1, sizeof(*f));
	f->gen = gen;
	f->text = xstrdup(text);
	TAILQ_INSERT_TAIL(&br.out, f, entry);
	br.nout++;
	pthread_mutex_unlock(&br.mu);
	bridge_wake();
	return 0;
}

/* ==== the gateway, on the loop ==== */

static void
session_forget(void)
{
	dc.session_id[0] = '\0';
	dc.resume_url[0] = '\0';
	dc.seq = -1;
}

static void
gw_stop_timers(void)
{
	loop_timer_cancel(dc.hb_timer);
	loop_timer_cancel(dc.phase_timer);
	loop_timer_cancel(dc.identify_timer);
	dc.hb_timer = dc.phase_timer = dc.identify_timer = NULL;
}

/* Forget the current connection and its events, closing it when it is
 * still open (resumably, with a code other than 1000), and a
 * GET /gateway/bot in flight for it. */
static void
gw_drop(int close_it)
{
	gw_stop_timers();
	http_cancel(dc.check);
	dc.check = NULL;
	if (close_it && dc.phase != GW_IDLE && dc.phase != GW_CHECKING &&
	    dc.phase != GW_DEAD)
		bridge_close(dc.gen, DC_CLOSE_RESUMABLE);
	dc.gen++;
	dc.phase = GW_IDLE;
}

/* The operator must act (a wrong token, say): no retry until a restart. */
static void
gw_down(const char *why, int close_it)
{
	gw_drop(close_it);
	dc.phase = GW_DEAD;
	session_forget();
	trig_set_state(DC_NAME, TRIG_DOWN, why);
}

/*
 * This connection is over: drop it and connect again after delay ms (-1:
 * the next backoff step).
 */
static void
gw_retry(const char *why, int close_it, long delay)
{
	gw_drop(close_it);
	if (dc.stopped)
		return;
	snprintf(dc.why, sizeof(dc.why), "%s", why);
	if (delay < 0)
		delay = backoff_next(&dc.backoff, DC_BACKOFF_MIN_MS,
		    DC_BACKOFF_MAX_MS);
	log_info("discord: %s; reconnecting in %ld ms%s", why, delay,
	    dc.session_id[0] ? " to resume the session" : "");
	trig_set_state(DC_NAME, delay > 0 ? TRIG_BACKOFF : TRIG_CONNECTING,
	    why);
	dc.reconnects++;
	loop_timer_cancel(dc.retry_timer);
	dc.retry_timer = loop_timer_add(delay, gw_connect, NULL);
}

static void
phase_expired(void *arg)
{
	dc.phase_timer = NULL;
	gw_retry(arg, 1, -1);
}

static void
phase_deadline(long ms, const char *why)
{
	loop_timer_cancel(dc.phase_timer);
	dc.phase_timer = loop_timer_add(ms, phase_expired, (void *)why);
}

static void
gw_send(const char *text)
{
	if (bridge_send(dc.gen, text) == -1)
		gw_retry("the gateway connection is not taking frames", 1, -1);
}

/* The resume URL Discord gave, with the configured query (v=10, JSON);
 * -1 when it is unusable, and af resumes at the configured URL. */
static int
resume_target(struct dc_url *u)
{
	const char *q = strchr(dc.gateway.path, '?');
	char url[DC_URL_MAX + 64];
	size_t n = strlen(dc.resume_url);

	while (n > 0 && dc.resume_url[n - 1] == '/')
		n--;
	snprintf(url, sizeof(url), "%.*s/%s", (int)n, dc.resume_url,
	    q != NULL ? q : "");
	if (dc_url_split(url, u) == -1)
		return -1;
	/* The same rule as the config's: plain ws only on loopback. */
	return u->tls || cfg_host_is_loopback(u->host) ? 0 : -1;
}

/* Open a connection: to the session's resume URL when there is a session
 * to resume, else where a new session goes. */
static void
gw_open(void)
{
	struct dc_url u;

	if (!(dc.session_id[0] && dc.resume_url[0] && resume_target(&u) == 0))
		u = dc.target;
	dc.gen++;
	dc.phase = GW_CONNECTING;
	trig_set_state(DC_NAME, TRIG_CONNECTING, NULL);
	phase_deadline(DC_HELLO_TIMEOUT_MS, "no HELLO from the gateway");
	bridge_connect(dc.gen, &u);
}

/* A RESUME starts no session and goes straight to the gateway; a new
 * session asks Discord first whether one may start (check_done). */
static void
gw_connect(void *arg)
{
	dc.retry_timer = NULL;
	if (dc.stopped || dc.phase == GW_DEAD)
		return;
	if (dc.session_id[0] != '\0' || dc.start_ok) {
		gw_open();
		return;
	}
	dc.gen++;
	dc.phase = GW_CHECKING;
	trig_set_state(DC_NAME, TRIG_CONNECTING, NULL);
	check_start();
}

/*
 * Discord allows no new session before its limit resets: wait for that
 * without a connection, say so on the status port, and log it once. The
 * wait is at least a second, so a reply that says 0 left and 0 ms cannot
 * make af spin, and at most a day (the parser's clamp).
 */
static void
starts_wait(long ms)
{
	char until[32], why[256];

	/* Asking again a moment early would find the limit still spent and
	 * wait a second round. */
	ms += DC_START_WAIT_SLACK_MS;
	if (ms < DC_START_WAIT_MIN_MS)
		ms = DC_START_WAIT_MIN_MS;
	gw_drop(1);
	if (dc.stopped)
		return;
	dc.start_ok = 0;
	dc.starts_wait_until = now_ms() + ms;
	fmt_time_iso(dc.starts_wait_until, until, sizeof(until));
	snprintf(why, sizeof(why), "waiting for Discord's session start limit "
	    "(0 of %ld left) until %s", dc.starts_total, until);
	snprintf(dc.why, sizeof(dc.why), "%s", why);
	log_warnx("discord: no session starts left (of %ld); the gateway "
	    "waits %ld ms, until %s", dc.starts_total, ms, until);
	trig_set_state(DC_NAME, TRIG_BACKOFF, why);
	loop_timer_cancel(dc.retry_timer);
	dc.retry_timer = loop_timer_add(ms, gw_connect, NULL);
}

static void identify_now(void *);

/*
 * GET /gateway/bot answered. A 401 is a wrong or reset token, as 4004 is:
 * down, not retried. A 429 waits as Discord says; other failures back off.
 * With starts left, af connects (or, on a connection whose session was
 * invalidated, identifies); with none, it waits for the reset.
 */
static void
check_done(struct http_response *resp, void *arg)
{
	struct dc_gateway_bot g;
	char why[300];

	dc.check = NULL;
	if (dc.stopped || dc.phase == GW_DEAD)
		return;
	limit_update(DC_ROUTE_GATEWAY, resp);
	if (resp->status == 401) {
		gw_down("GET /gateway/bot refused the bot token (HTTP 401): "
		    "it is wrong or was reset", 1);
		return;
	}
	if (resp->status == 429) {
		limit_hit(DC_ROUTE_GATEWAY, resp);
		gw_retry("GET /gateway/bot was rate limited (HTTP 429)", 1,
		    limit_wait(DC_ROUTE_GATEWAY));
		return;
	}
	if (resp->status / 100 != 2 || resp->body.data == NULL ||
	    dc_parse_gateway_bot(resp->body.data, resp->body.len, &g) == -1) {
		if (resp->status == 0)
			snprintf(why, sizeof(why), "GET /gateway/bot failed: %s",
			    resp->error);
		else if (resp->status / 100 == 2)
			snprintf(why, sizeof(why), "GET /gateway/bot: a reply "
			    "without a usable session_start_limit");
		else
			snprintf(why, sizeof(why), "GET /gateway/bot: HTTP %ld",
			    resp->status);
		gw_retry(why, 1, -1);
		return;
	}
	dc.starts_total = g.total;
	dc.starts_remaining = g.remaining;
	if (g.remaining == 0) {
		starts_wait(g.reset_after);
		return;
	}
	dc.starts_wait_until = 0;
	dc.start_ok = 1;
	if (dc_gateway_pick(dc.cfg->trig.discord.gateway, g.url, &dc.target) ==
	    -1)
		dc.target = dc.gateway;
	log_debug("discord: %ld of %ld session starts left; new sessions go "
	    "to %s:%d", g.remaining, g.total, dc.target.host, dc.target.port);
	if (dc.phase == GW_CHECKING)
		gw_open();
	else
		identify_now(NULL);
}

/* Ask Discord how many sessions may still start before each new one: a
 * bot that restarts in a loop would otherwise spend its daily IDENTIFYs,
 * and Discord resets the token of a bot that goes past them. */
static void
check_start(void)
{
	struct http_request req;
	char *url;

	if (dc.check != NULL)
		return;
	url = xasprintf("%s/gateway/bot", dc.api);
	memset(&req, 0, sizeof(req));
	req.method = "GET";
	req.url = url;
	req.headers = dc.headers;
	req.timeout_ms = DC_HTTP_TIMEOUT_MS;
	req.connect_timeout_ms = DC_HTTP_CONNECT_MS;
	req.max_response = DC_RESPONSE_MAX;
	dc.check = http_start(&req, check_done, NULL);
	free(url);
}

static void
hb_send(void)
{
	char *text = dc_heartbeat_json(dc.seq);

	gw_send(text);
	free(text);
}

/*
 * A regular beat that went a whole interval without an ACK means a zombie
 * connection: the socket looks open but nothing answers. Drop it and resume
 * on a new one. Only the regular beat starts the wait: the beat a gateway's
 * op 1 asks for may go out just before the next tick, and its ACK may not
 * be back by then, which says nothing about the connection.
 */
static void
hb_tick(void *arg)
{
	dc.hb_timer = NULL;
	if (!dc.acked) {
		gw_retry("no heartbeat ACK from the gateway (zombie "
		    "connection)", 1, -1);
		return;
	}
	dc.acked = 0;
	hb_send();
	if (dc.phase != GW_IDLE)
		dc.hb_timer = loop_timer_add(dc.hb_interval, hb_tick, NULL);
}

static void
identify_now(void *arg)
{
	int64_t wait;
	char *text;

	dc.identify_timer = NULL;
	if (dc.phase != GW_HELLO && dc.phase != GW_AUTH)
		return;
	wait = dc.last_identify + DC_IDENTIFY_EVERY_MS - mono_ms();
	if (dc.last_identify != 0 && wait > 0) {
		dc.identify_timer = loop_timer_add(wait, identify_now, NULL);
		return;
	}
	/* Each IDENTIFY spends a session start: ask first (a session
	 * invalidated on an open connection gets here without one). */
	if (!dc.start_ok) {
		check_start();
		return;
	}
	dc.start_ok = 0;
	text = dc_identify_json(dc.token, DC_INTENTS);
	gw_send(text);
	explicit_bzero(text, strlen(text));
	free(text);
	dc.last_identify = mono_ms();
	dc.identifies++;
	dc.phase = GW_AUTH;
	phase_deadline(DC_AUTH_TIMEOUT_MS, "no READY after IDENTIFY");
}

static void
resume_now(void)
{
	char *text = dc_resume_json(dc.token, dc.session_id, dc.seq);

	gw_send(text);
	explicit_bzero(text, strlen(text));
	free(text);
	dc.phase = GW_AUTH;
	phase_deadline(DC_AUTH_TIMEOUT_MS, "no RESUMED after RESUME");
}

/* HELLO: heartbeats start (the first after a random part of the interval,
 * so many clients do not beat together), then RESUME or IDENTIFY. */
static void
on_hello(const struct dc_frame *f)
{
	if (dc.phase != GW_HELLO)
		return;
	loop_timer_cancel(dc.phase_timer);
	dc.phase_timer = NULL;
	dc.hb_interval = f->heartbeat_interval;
	dc.acked = 1;
	loop_timer_cancel(dc.hb_timer);
	dc.hb_timer = loop_timer_add(random_between(0, dc.hb_interval),
	    hb_tick, NULL);
	if (dc.session_id[0] != '\0')
		resume_now();
	else
		identify_now(NULL);
}

static void
on_up(const char *how)
{
	loop_timer_cancel(dc.phase_timer);
	dc.phase_timer = NULL;
	dc.phase = GW_READY;
	dc.backoff = 0;
	trig_set_state(DC_NAME, TRIG_UP, NULL);
	log_info("discord: %s (bot user %s)", how, dc.bot_id);
}

static void on_message(const struct dc_message *);

static void
on_dispatch(const struct dc_frame *f)
{
	if (strcmp(f->t, "READY") == 0) {
		snprintf(dc.session_id, sizeof(dc.session_id), "%s",
		    f->session_id);
		snprintf(dc.resume_url, sizeof(dc.resume_url), "%s",
		    f->resume_url);
		snprintf(dc.bot_id, sizeof(dc.bot_id), "%s", f->user_id);
		on_up("session ready");
	} else if (strcmp(f->t, "RESUMED") == 0) {
		dc.resumes++;
		on_up("session resumed");
	} else if (f->has_message)
		on_message(&f->msg);
}

/* INVALID_SESSION: d true, the session may be resumed on a new connection;
 * false, it is gone and a fresh IDENTIFY follows after 1 to 5 s. */
static void
on_invalid_session(const struct dc_frame *f)
{
	if (f->resumable) {
		gw_retry("the gateway invalidated the session (resumable)", 1,
		    0);
		return;
	}
	session_forget();
	dc.phase = GW_HELLO;
	trig_set_state(DC_NAME, TRIG_CONNECTING, "the gateway invalidated the "
	    "session");
	phase_deadline(DC_REIDENTIFY_MAX_MS + DC_AUTH_TIMEOUT_MS,
	    "no READY after a new IDENTIFY");
	loop_timer_cancel(dc.identify_timer);
	dc.identify_timer = loop_timer_add(random_between(DC_REIDENTIFY_MIN_MS,
	    DC_REIDENTIFY_MAX_MS), identify_now, NULL);
	log_info("discord: the gateway invalidated the session; identifying "
	    "again");
}

static void
on_frame(const char *text, size_t len)
{
	struct dc_frame f;
	int rc = dc_parse_frame(text, len, &f);

	/* The sequence counts every dispatch, even one af cannot use. */
	if (f.op == DC_OP_DISPATCH && f.seq >= 0)
		dc.seq = f.seq;
	if (rc == -1) {
		log_debug("discord: a gateway payload af cannot use (op %d%s%s)",
		    f.op, f.t[0] ? ", " : "", f.t);
		goto out;
	}
	switch (f.op) {
	case DC_OP_HELLO:
		on_hello(&f);
		break;
	case DC_OP_HEARTBEAT:
		hb_send();
		break;
	case DC_OP_HEARTBEAT_ACK:
		dc.acked = 1;
		break;
	case DC_OP_RECONNECT:
		gw_retry("the gateway asked for a reconnect", 1, 0);
		break;
	case DC_OP_INVALID_SESSION:
		on_invalid_session(&f);
		break;
	case DC_OP_DISPATCH:
		on_dispatch(&f);
		break;
	default:
		break;
	}
out:
	dc_frame_free(&f);
}

static void
on_closed(int code, const char *why)
{
	char text[300];

	if (code > 0)
		snprintf(text, sizeof(text), "gateway closed the connection: "
		    "%s", dc_close_text(code));
	else
		snprintf(text, sizeof(text), "gateway connection lost: %s",
		    why[0] ? why : dc_close_text(0));
	if (code > 0 && dc_close_action(code) == DC_CLOSE_FATAL) {
		gw_down(text, 0);
		return;
	}
	if (code > 0 && dc_close_action(code) == DC_CLOSE_REIDENTIFY)
		session_forget();
	gw_retry(text, 0, -1);
}

/* The loop's side of the bridge: take every event the thread queued. */
static void
bridge_drain(void *arg)
{
	struct dc_evq q = TAILQ_HEAD_INITIALIZER(q);
	struct dc_ev *ev;

	pthread_mutex_lock(&br.mu);
	TAILQ_CONCAT(&q, &br.in, entry);
	br.in_bytes = 0;
	br.posted = 0;
	pthread_mutex_unlock(&br.mu);
	while ((ev = TAILQ_FIRST(&q)) != NULL) {
		TAILQ_REMOVE(&q, ev, entry);
		if (ev->gen == dc.gen && !dc.stopped && dc.phase != GW_DEAD) {
			if (ev->kind == DC_EV_OPEN && dc.phase == GW_CONNECTING)
				dc.phase = GW_HELLO;
			else if (ev->kind == DC_EV_FRAME)
				on_frame(ev->text, ev->len);
			else if (ev->kind == DC_EV_CLOSED)
				on_closed(ev->code, ev->text);
		}
		free(ev->text);
		free(ev);
	}
}

/* ==== replies: the REST API, on the loop ==== */

static struct dc_limit *
limit_find(const char *route, int create)
{
	struct dc_limit *l, *oldest = NULL;

	LIST_FOREACH(l, &dc.limits, entry) {
		if (strcmp(l->route, route) == 0)
			return l;
		if (oldest == NULL || l->reset_at < oldest->reset_at)
			oldest = l;
	}
	if (!create)
		return NULL;
	/* Bounded: the entry that reset longest ago makes room. */
	if (dc.nlimits >= DC_LIMITS_MAX && oldest != NULL) {
		LIST_REMOVE(oldest, entry);
		free(oldest);
		dc.nlimits--;
	}
	l = xcalloc(1, sizeof(*l));
	snprintf(l->route, sizeof(l->route), "%s", route);
	l->remaining = -1;
	LIST_INSERT_HEAD(&dc.limits, l, entry);
	dc.nlimits++;
	return l;
}

/* How long a request on route must wait: a global pause, or the route's
 * bucket spent until its reset. */
static long
limit_wait(const char *route)
{
	int64_t now = mono_ms(), w = 0;
	struct dc_limit *l = limit_find(route, 0);

	if (dc.global_until > now)
		w = dc.global_until - now;
	if (l != NULL && l->remaining == 0 && l->reset_at - now > w)
		w = l->reset_at - now;
	return (long)w;
}

/* The X-RateLimit-* headers of any answer. Routes Discord puts in one
 * bucket (the same hash, for the same channel) share what it says. */
static void
limit_update(const char *route, const struct http_response *resp)
{
	const char *rem = http_header(resp, "X-RateLimit-Remaining");
	const char *reset = http_header(resp, "X-RateLimit-Reset-After");
	const char *bucket = http_header(resp, "X-RateLimit-Bucket");
	const char *chan = strchr(route, ':');
	struct dc_limit *l, *o;
	char *end;
	long v, ms;

	if (rem == NULL && reset == NULL)
		return;
	l = limit_find(route, 1);
	if (bucket != NULL && strlen(bucket) < sizeof(l->bucket))
		snprintf(l->bucket, sizeof(l->bucket), "%s", bucket);
	if (rem != NULL) {
		v = strtol(rem, &end, 10);
		if (end != rem && *end == '\0' && v >= 0)
			l->remaining = v;
	}
	if (reset != NULL && (ms = dc_seconds_ms(reset)) >= 0)
		l->reset_at = mono_ms() + ms;
	if (l->bucket[0] == '\0' || chan == NULL)
		return;
	LIST_FOREACH(o, &dc.limits, entry)
		if (o != l && strcmp(o->bucket, l->bucket) == 0 &&
		    strchr(o->route, ':') != NULL &&
		    strcmp(strchr(o->route, ':'), chan) == 0) {
			o->remaining = l->remaining;
			o->reset_at = l->reset_at;
		}
}

/* A 429: wait as long as Discord says, for everything when it is global. */
static void
limit_hit(const char *route, const struct http_response *resp)
{
	const char *h;
	long ms = -1;
	int global = 0;

	if (resp->body.data != NULL)
		dc_parse_429(resp->body.data, resp->body.len, &ms, &global);
	if (ms < 0)
		ms = dc_seconds_ms(http_header(resp, "Retry-After"));
	if (ms < 0)
		ms = DC_RETRY_DEFAULT_MS;
	if ((h = http_header(resp, "X-RateLimit-Global")) != NULL &&
	    strcasecmp(h, "true") == 0)
		global = 1;
	if ((h = http_header(resp, "X-RateLimit-Scope")) != NULL &&
	    strcasecmp(h, "global") == 0)
		global = 1;
	dc.rate_limited++;
	if (global) {
		if (mono_ms() + ms > dc.global_until)
			dc.global_until = mono_ms() + ms;
		log_info("discord: globally rate limited for %ld ms", ms);
	} else {
		struct dc_limit *l = limit_find(route, 1);

		l->remaining = 0;
		l->reset_at = mono_ms() + ms;
	}
}

static struct http_call *
api_post(const char *chan, const char *what, const char *body, http_cb cb,
    void *arg)
{
	struct http_request req;
	char *url = xasprintf("%s/channels/%s/%s", dc.api, chan, what);
	struct http_call *call;

	memset(&req, 0, sizeof(req));
	req.method = "POST";
	req.url = url;
	req.headers = dc.headers;
	req.body = body;
	req.bodylen = strlen(body);
	req.timeout_ms = DC_HTTP_TIMEOUT_MS;
	req.connect_timeout_ms = DC_HTTP_CONNECT_MS;
	req.max_response = DC_RESPONSE_MAX;
	call = http_start(&req, cb, arg);
	free(url);
	return call;
}

/* The typing indicator is cosmetic: failures are only logged at debug. */
static void
typing_done(struct chatq *c, const struct http_response *resp)
{
	char route[48];

	snprintf(route, sizeof(route), "typing:%s", c->id);
	limit_update(route, resp);
	if (resp->status == 429)
		limit_hit(route, resp);
	else if (resp->status / 100 != 2)
		log_debug("discord: typing in channel %s: HTTP %ld", c->id,
		    resp->status);
}

/* Skipped while its route is rate limited: the next tick tries again. */
static struct http_call *
typing_start(struct chatq *c, http_cb cb, void *arg)
{
	char route[48];

	snprintf(route, sizeof(route), "typing:%s", c->id);
	if (limit_wait(route) != 0)
		return NULL;
	return api_post(c->id, "typing", "", cb, arg);
}

/* A message waits while its route's bucket, or everything, is spent. */
static long
send_hold(struct chatq *c)
{
	char route[48];

	snprintf(route, sizeof(route), "messages:%s", c->id);
	return limit_wait(route);
}

static struct http_call *
send_start(struct chatq *c, const char *body, http_cb cb, void *arg)
{
	return api_post(c->id, "messages", body, cb, arg);
}

/*
 * One reply message answered. Success sends the next; a 429 waits as long
 * as Discord says and retries; network errors and 5xx back off; other 4xx
 * (no permission in the channel, a deleted channel) will not change on a
 * retry and drop the message. The head stays at the head while it is
 * retried (chatq), so a channel's messages keep their order.
 */
static enum chatq_verdict
sent(struct chatq *c, const struct http_response *resp, int attempts,
    long *delay)
{
	char route[48];
	long wait = -1;

	snprintf(route, sizeof(route), "messages:%s", c->id);
	limit_update(route, resp);
	if (resp->status / 100 == 2) {
		dc.sent++;
		return CHATQ_SENT;
	}
	if (resp->status == 429) {
		limit_hit(route, resp);
		wait = limit_wait(route);
	} else if (resp->status == 0 || resp->status >= 500)
		wait = backoff_next(&c->backoff, DC_BACKOFF_MIN_MS,
		    DC_BACKOFF_MAX_MS);
	if (wait >= 0 && attempts < DC_SEND_ATTEMPTS) {
		log_info("discord: reply to channel %s: HTTP %ld; retrying in "
		    "%ld ms", c->id, resp->status, wait);
		*delay = wait;
		return CHATQ_RETRY;
	}
	log_warnx("discord: a reply to channel %s was not delivered: HTTP "
	    "%ld%s%s", c->id, resp->status, resp->status == 0 ? ": " : "",
	    resp->status == 0 ? resp->error : "");
	dc.send_failed++;
	return CHATQ_DROP;
}

static const struct chatq_def dc_chatq = {
	.queue_max = DC_CHANNEL_QUEUE_MAX,
	.typing_every_ms = DC_TYPING_EVERY_MS,
	.hold = send_hold,
	.send = send_start,
	.sent = sent,
	.typing = typing_start,
	.typing_done = typing_done,
};

/* Queue one message in the channel's order and start sending if idle. */
static void
send_text(struct chatq *c, const char *text, const char *reply_to,
    const char *run_id)
{
	if (chatq_push(c, dc_message_json(text, reply_to), run_id) == -1) {
		log_warnx("discord: channel %s has %zu messages waiting; one "
		    "reply part is dropped", c->id, c->nout);
		dc.send_failed++;
	}
}

/* ==== messages in ==== */

/* Ids from the config may carry leading zeros; Discord's never do. */
static int
id_equal(const char *a, const char *b)
{
	while (*a == '0' && a[1] != '\0')
		a++;
	while (*b == '0' && b[1] != '\0')
		b++;
	return strcmp(a, b) == 0;
}

/* Remember a message id; 1 when it was taken before (a resume replayed it). */
static int
seen(const char *id)
{
	for (size_t i = 0; i < DC_SEEN_MAX; i++)
		if (strcmp(dc.seen[i], id) == 0)
			return 1;
	snprintf(dc.seen[dc.seen_next], DC_ID_MAX, "%s", id);
	dc.seen_next = (dc.seen_next + 1) % DC_SEEN_MAX;
	return 0;
}

/* Whether a message is for the bot: in a configured channel when channels
 * is set; otherwise a direct message or one that mentions the bot. */
static int
addressed(const struct dc_message *m)
{
	const struct cfg_discord *d = &dc.cfg->trig.discord;

	if (d->has_channels) {
		for (size_t i = 0; i < d->channels.n; i++)
			if (id_equal(d->channels.v[i], m->channel_id))
				return 1;
		return 0;
	}
	if (m->guild_id[0] == '\0')
		return 1;
	for (size_t i = 0; i < m->mentions.n; i++)
		if (dc.bot_id[0] != '\0' && strcmp(m->mentions.v[i],
		    dc.bot_id) == 0)
			return 1;
	return 0;
}

/* A message that cannot become a run is answered, never dropped in
 * silence, and leaves a trace in the audit trail. */
static void
refuse(const struct dc_message *m, const char *reason, const char *note)
{
	cJSON *rec = audit_new(NULL, "discord_refused");
	struct chatq *c;

	cJSON_AddStringToObject(rec, "channel_id", m->channel_id);
	cJSON_AddStringToObject(rec, "message_id", m->id);
	cJSON_AddStringToObject(rec, "reason", reason);
	audit_emit(rec);
	dc.refused++;
	log_warnx("discord: message %s in channel %s not taken: %s", m->id,
	    m->channel_id, reason);
	c = chatq_find(&dc.chans, m->channel_id, 1);
	send_text(c, note, m->id, NULL);
	chatq_gc(c);
}

static char *
meta_json(const struct dc_message *m)
{
	cJSON *o = cJSON_CreateObject();
	char *s, *copy;

	cJSON_AddStringToObject(o, "channel_id", m->channel_id);
	cJSON_AddStringToObject(o, "message_id", m->id);
	if (m->guild_id[0] != '\0')
		cJSON_AddStringToObject(o, "guild_id", m->guild_id);
	cJSON_AddStringToObject(o, "author_id", m->author_id);
	if ((s = cJSON_PrintUnformatted(o)) == NULL)
		fatalx("discord: out of memory");
	cJSON_Delete(o);
	copy = xstrdup(s);
	cJSON_free(s);
	return copy;
}

/* A slash command answered by af itself (/help, /status, /reset, /new,
 * unknown ones): audited, and the answer sent without a run. */
static void
answer_command(const struct dc_message *m, const char *text)
{
	cJSON *rec = audit_new(NULL, "discord_command");
	struct strlist parts = { 0 };
	struct chatq *c;

	cJSON_AddStringToObject(rec, "channel_id", m->channel_id);
	cJSON_AddStringToObject(rec, "message_id", m->id);
	audit_emit(rec);
	dc_split(text, DC_TEXT_MAX_CHARS, DC_MAX_PARTS, &parts);
	c = chatq_find(&dc.chans, m->channel_id, 1);
	for (size_t i = 0; i < parts.n; i++)
		send_text(c, parts.v[i], i == 0 ? m->id : NULL, NULL);
	strlist_free(&parts);
	chatq_gc(c);
}

static void
on_message(const struct dc_message *m)
{
	struct run_request req;
	char id[RUN_ID_LEN], *prompt, *meta, *conv, *expanded = NULL;
	struct buf answer;
	struct chatq *c;
	int rc, kind;

	dc.received++;
	/* Bots, the bot itself included, never start a run: two bots would
	 * answer each other for ever. System messages (joins, pins) neither. */
	if (m->author_bot || strcmp(m->author_id, dc.bot_id) == 0 ||
	    (m->type != 0 && m->type != 19) || !addressed(m)) {
		dc.ignored++;
		return;
	}
	if (seen(m->id))
		return;
	prompt = dc_prompt_text(m->content, dc.bot_id);
	if (prompt[0] == '\0') {
		free(prompt);
		refuse(m, "no text", "I can only read text messages.");
		return;
	}
	conv = xasprintf("discord:%s", m->channel_id);
	buf_init(&answer);
	kind = cmd_handle(dc.cfg, DC_NAME, conv, prompt, &answer, &expanded);
	if (kind == CMD_ANSWERED) {
		answer_command(m, answer.data != NULL ? answer.data : "");
		buf_free(&answer);
		free(prompt);
		free(conv);
		return;
	}
	buf_free(&answer);
	meta = meta_json(m);
	memset(&req, 0, sizeof(req));
	req.trigger = DC_NAME;
	req.prompt = kind == CMD_EXPANDED ? expanded : prompt;
	req.conversation = conv;
	req.meta = meta;
	rc = run_submit(&req, id, sizeof(id));
	free(expanded);
	free(prompt);
	free(meta);
	free(conv);
	if (rc == -1) {
		refuse(m, errno == EAGAIN ? "the run queue is full" :
		    errno == ESHUTDOWN ? "af is stopping" : "events cannot be "
		    "journaled", "Sorry, I cannot take this right now. Please "
		    "try again in a few minutes.");
		return;
	}
	log_info("discord: channel %s message %s is run %s", m->channel_id,
	    m->id, id);
	/* Typing shows from acceptance until the reply: the channel's runs
	 * may wait in the queue first. */
	c = chatq_find(&dc.chans, m->channel_id, 1);
	chatq_run_begin(c);
}

static const struct chatq_reply dc_reply = {
	.name = DC_NAME,
	.chat_key = "channel_id",
	.id = dc_id_copy,
	.split = dc_split,
	.max = DC_TEXT_MAX_CHARS,
	.max_parts = DC_MAX_PARTS,
	.send = send_text,
};

static void
dc_deliver(const struct run_outcome *o)
{
	if (dc.cfg != NULL)
		chatq_deliver(&dc.chans, o, &dc_reply);
}

/* ==== the trigger ==== */

/* Discord bot tokens are base64url parts joined by dots; anything else
 * (a "Bot " prefix, a newline) would corrupt the Authorization header. */
static int
token_ok(const char *t)
{
	size_t n = strlen(t);

	return n > 0 && n <= DC_TOKEN_MAX && strspn(t, "0123456789"
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ._-") == n;
}

static int
dc_prepare(const struct cfg *cfg, char *err, size_t errlen)
{
	const struct cfg_discord *d = &cfg->trig.discord;
	struct lws_context_creation_info info;
	size_t n;

	if (d->token == NULL || !token_ok(d->token)) {
		snprintf(err, errlen, "triggers.discord.token is not a bot "
		    "token (letters, digits, '.', '_' and '-', without the "
		    "\"Bot \" prefix)");
		return -1;
	}
	if (dc_url_split(d->gateway, &dc.gateway) == -1) {
		snprintf(err, errlen, "triggers.discord.gateway must be a ws:// "
		    "or wss:// URL");
		return -1;
	}
	log_redact_add(d->token);
	dc.cfg = cfg;
	dc.token = d->token;
	n = strlen(d->api_base);
	while (n > 0 && d->api_base[n - 1] == '/')
		n--;
	dc.api = xstrndup(d->api_base, n);
	dc.auth_header = xasprintf("Authorization: Bot %s", d->token);
	dc.headers[0] = dc.auth_header;
	dc.headers[1] = "Content-Type: application/json";
	dc.headers[2] = DC_USER_AGENT;
	dc.headers[3] = NULL;
	dc.seq = -1;
	dc.target = dc.gateway;
	dc.starts_total = dc.starts_remaining = -1;
	chatq_init(&dc.chans, &dc_chatq);
	LIST_INIT(&dc.limits);
	TAILQ_INIT(&br.in);
	TAILQ_INIT(&br.out);
	buf_init(&br.rx);

	lws_set_log_level(LLL_ERR | LLL_WARN, lws_log);
	memset(&info, 0, sizeof(info));
	info.port = CONTEXT_PORT_NO_LISTEN;
	info.protocols = dc_protocols;
	info.options = LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
	info.gid = -1;
	info.uid = -1;
	/* One connection, a closing one and the wake-up pipe: a small table
	 * rather than one sized by the process's fd limit. */
	info.fd_limit_per_thread = 16;
	if ((br.ctx = lws_create_context(&info)) == NULL) {
		snprintf(err, errlen, "discord: libwebsockets could not start");
		return -1;
	}
	return 0;
}

/* The gateway thread starts here, after the sandbox; it takes no signal
 * (they belong to the loop thread). */
static int
dc_start(const struct cfg *cfg, char *err, size_t errlen)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&br.thread, NULL, thread_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		snprintf(err, errlen, "discord: cannot start the gateway "
		    "thread: %s", strerror(rc));
		return -1;
	}
	br.running = 1;
	trig_set_state(DC_NAME, TRIG_CONNECTING, NULL);
	dc.retry_timer = loop_timer_add(0, gw_connect, NULL);
	return 0;
}

/* Stop taking events: the session ends (close 1000); replies of runs that
 * end during the drain still go out. */
static void
dc_stop(void)
{
	if (dc.stopped)
		return;
	dc.stopped = 1;
	gw_stop_timers();
	http_cancel(dc.check);
	dc.check = NULL;
	loop_timer_cancel(dc.retry_timer);
	dc.retry_timer = NULL;
	if (dc.phase != GW_IDLE && dc.phase != GW_CHECKING &&
	    dc.phase != GW_DEAD)
		bridge_close(dc.gen, 1000);
	dc.gen++;
}

/* The session start limit as last heard, once af has asked. */
static void
status_starts(cJSON *obj)
{
	cJSON *o;
	char until[32];

	if (dc.starts_total < 0)
		return;
	o = cJSON_AddObjectToObject(obj, "session_start_limit");
	cJSON_AddNumberToObject(o, "total", (double)dc.starts_total);
	cJSON_AddNumberToObject(o, "remaining", (double)dc.starts_remaining);
	if (dc.starts_wait_until != 0) {
		fmt_time_iso(dc.starts_wait_until, until, sizeof(until));
		cJSON_AddStringToObject(o, "waiting_until", until);
	} else
		cJSON_AddNullToObject(o, "waiting_until");
}

static void
dc_status(cJSON *obj)
{
	const struct cfg_discord *d = dc.cfg != NULL ? &dc.cfg->trig.discord :
	    NULL;
	char v[32];

	if (d != NULL && d->voice_channels.n > 0)
		cJSON_AddStringToObject(obj, "voice", "not supported yet");
	cJSON_AddBoolToObject(obj, "session", dc.session_id[0] != '\0');
	snprintf(v, sizeof(v), "%lld", (long long)dc.seq);
	cJSON_AddStringToObject(obj, "seq", v);
	cJSON_AddNumberToObject(obj, "heartbeat_interval_ms",
	    (double)dc.hb_interval);
	cJSON_AddNumberToObject(obj, "identifies", (double)dc.identifies);
	cJSON_AddNumberToObject(obj, "resumes", (double)dc.resumes);
	cJSON_AddNumberToObject(obj, "reconnects", (double)dc.reconnects);
	cJSON_AddNumberToObject(obj, "messages", (double)dc.received);
	cJSON_AddNumberToObject(obj, "ignored", (double)dc.ignored);
	cJSON_AddNumberToObject(obj, "refused", (double)dc.refused);
	cJSON_AddNumberToObject(obj, "replies_sent", (double)dc.sent);
	cJSON_AddNumberToObject(obj, "replies_failed", (double)dc.send_failed);
	cJSON_AddNumberToObject(obj, "rate_limited", (double)dc.rate_limited);
	status_starts(obj);
}

static void
bridge_free(void)
{
	struct dc_frame_out *f;
	struct dc_ev *ev;

	if (br.running) {
		pthread_mutex_lock(&br.mu);
		br.stop = 1;
		pthread_mutex_unlock(&br.mu);
		lws_cancel_service(br.ctx);
		pthread_join(br.thread, NULL);
		br.running = 0;
	}
	if (br.ctx != NULL)
		lws_context_destroy(br.ctx);
	br.ctx = NULL;
	while ((ev = TAILQ_FIRST(&br.in)) != NULL) {
		TAILQ_REMOVE(&br.in, ev, entry);
		free(ev->text);
		free(ev);
	}
	while ((f = TAILQ_FIRST(&br.out)) != NULL) {
		TAILQ_REMOVE(&br.out, f, entry);
		explicit_bzero(f->text, strlen(f->text));
		free(f->text);
		free(f);
	}
	br.nout = 0;
	br.in_bytes = 0;
	buf_free(&br.rx);
}

static void
dc_free(void)
{
	struct dc_limit *l;

	dc_stop();
	bridge_free();
	chatq_free_all(&dc.chans);
	while ((l = LIST_FIRST(&dc.limits)) != NULL) {
		LIST_REMOVE(l, entry);
		free(l);
	}
	dc.nlimits = 0;
	if (dc.auth_header != NULL)
		explicit_bzero(dc.auth_header, strlen(dc.auth_header));
	free(dc.auth_header);
	free(dc.api);
	dc.auth_header = dc.api = NULL;
	dc.cfg = NULL;
	dc.token = NULL;
}

const struct trigger_def trigger_discord = {
	.name = DC_NAME,
	.enabled = dc_enabled,
	.prepare = dc_prepare,
	.start = dc_start,
	.stop = dc_stop,
	.deliver = dc_deliver,
	.outbox = 1,
	.status = dc_status,
	.free = dc_free,
};
