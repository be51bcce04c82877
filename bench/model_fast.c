/* An instant stand-in of the Anthropic Messages API for the benchmarks, where
 * tests/standin/model_server.py (a Python thread per connection) would be the
 * bottleneck. Every POST /v1/messages gets a fixed, valid reply: a tool_use of
 * current_time while the conversation has fewer than STEPS-1 assistant turns,
 * then a final text. So each run makes exactly STEPS model calls and STEPS-1
 * tool calls. No auth or shape checks: the integration tests do those.
 *
 *     model_fast [--steps N] [--delay-ms MS] [--port N]
 *
 * A first user message containing "bench-steps=N" overrides --steps for that
 * conversation. --delay-ms holds every reply that long (on a timer, not a
 * thread), to keep runs in flight. POST /_hold holds every reply from then on
 * until POST /_release sends them all, so a benchmark can queue its runs first
 * and time only their steps. Binds 127.0.0.1, prints the bound port as the
 * first line of stdout, serves until SIGTERM or SIGINT. GET /_stats answers
 * {"requests":N,"tool_use":N,"text":N,"held":N,"held_max":N}, so the caller
 * can divide this server's own CPU time (from /proc) by the requests it
 * served, and see how many model calls were waiting at once. */
#include <sys/queue.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#define MF_MAX_BODY	(32 << 20)
#define MF_MAX_HEADERS	(64 << 10)
#define MF_TIMEOUT_S	600
#define MF_ASSISTANT	"\"role\":\"assistant\""
#define MF_STEPS_KEY	"bench-steps="
#define MF_MAX_STEPS	1000

struct held {
	TAILQ_ENTRY(held)	 entry;
	struct evhttp_request	*req;
	int			 tool;
	unsigned long long	 n;
};
TAILQ_HEAD(heldq, held);

static struct {
	struct event_base	*base;
	int			 steps;
	int			 delay_ms;
	int			 gate;		/* /_hold until /_release */
	struct heldq		 gated;
	unsigned long long	 requests, tool_use, text;
	unsigned long long	 held, held_max;	/* replies waiting */
} mf;

static size_t
count(const char *hay, size_t len, const char *needle)
{
	size_t n = 0, nl = strlen(needle);
	const char *p = hay, *end = hay + len, *q;

	while ((q = memmem(p, (size_t)(end - p), needle, nl)) != NULL) {
		n++;
		p = q + nl;
	}
	return n;
}

static int
steps_of(const char *body, size_t len)
{
	const char *p = memmem(body, len, MF_STEPS_KEY, strlen(MF_STEPS_KEY));
	int n = 0;

	if (p == NULL)
		return mf.steps;
	for (p += strlen(MF_STEPS_KEY); p < body + len && *p >= '0' &&
	    *p <= '9' && n <= MF_MAX_STEPS; p++)
		n = n * 10 + (*p - '0');
	return n > 0 ? n : mf.steps;
}

static void
send_reply(struct evhttp_request *req, int tool, unsigned long long n)
{
	struct evbuffer *out = evbuffer_new();

	if (out == NULL) {
		evhttp_send_error(req, 500, "Internal Server Error");
		return;
	}
	if (tool)
		evbuffer_add_printf(out, "{\"id\":\"msg_%llu\",\"type\":\"message\","
		    "\"role\":\"assistant\",\"model\":\"bench\",\"content\":["
		    "{\"type\":\"tool_use\",\"id\":\"toolu_%llu\",\"name\":"
		    "\"current_time\",\"input\":{}}],\"stop_reason\":\"tool_use\","
		    "\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,"
		    "\"output_tokens\":5}}", n, n);
	else
		evbuffer_add_printf(out, "{\"id\":\"msg_%llu\",\"type\":\"message\","
		    "\"role\":\"assistant\",\"model\":\"bench\",\"content\":["
		    "{\"type\":\"text\",\"text\":\"done\"}],\"stop_reason\":"
		    "\"end_turn\",\"stop_sequence\":null,\"usage\":{"
		    "\"input_tokens\":10,\"output_tokens\":1}}", n);
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "application/json");
	evhttp_send_reply(req, 200, "OK", out);
	evbuffer_free(out);
}

/* A held reply's time is up. If the client went away meanwhile, evhttp
 * detached the request from its connection and frees it in send_reply. */
static void
on_held(evutil_socket_t fd, short what, void *arg)
{
	struct held *h = arg;

	mf.held--;
	send_reply(h->req, h->tool, h->n);
	free(h);
}

static void
release_all(void)
{
	struct held *h;

	mf.gate = 0;
	while ((h = TAILQ_FIRST(&mf.gated)) != NULL) {
		TAILQ_REMOVE(&mf.gated, h, entry);
		on_held(-1, 0, h);
	}
}

static void
send_text(struct evhttp_request *req, const char *text)
{
	struct evbuffer *out = evbuffer_new();

	if (out == NULL) {
		evhttp_send_error(req, 500, "Internal Server Error");
		return;
	}
	evbuffer_add_printf(out, "%s\n", text);
	evhttp_send_reply(req, 200, "OK", out);
	evbuffer_free(out);
}

static void
on_stats(struct evhttp_request *req)
{
	struct evbuffer *out = evbuffer_new();

	if (out == NULL) {
		evhttp_send_error(req, 500, "Internal Server Error");
		return;
	}
	evbuffer_add_printf(out, "{\"requests\":%llu,\"tool_use\":%llu,"
	    "\"text\":%llu,\"held\":%llu,\"held_max\":%llu}\n", mf.requests,
	    mf.tool_use, mf.text, mf.held, mf.held_max);
	evhttp_send_reply(req, 200, "OK", out);
	evbuffer_free(out);
}

static void
on_request(struct evhttp_request *req, void *arg)
{
	const char *uri = evhttp_request_get_uri(req);
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	const char *body;
	struct timeval tv;
	struct held *h;
	int tool;

	if (evhttp_request_get_command(req) == EVHTTP_REQ_GET &&
	    strcmp(uri, "/_stats") == 0) {
		on_stats(req);
		return;
	}
	if (evhttp_request_get_command(req) == EVHTTP_REQ_POST &&
	    strcmp(uri, "/_hold") == 0) {
		mf.gate = 1;
		send_text(req, "held");
		return;
	}
	if (evhttp_request_get_command(req) == EVHTTP_REQ_POST &&
	    strcmp(uri, "/_release") == 0) {
		release_all();
		send_text(req, "released");
		return;
	}
	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST ||
	    strcmp(uri, "/v1/messages") != 0) {
		evhttp_send_error(req, 404, "Not Found");
		return;
	}
	body = len > 0 ? (const char *)evbuffer_pullup(in, -1) : "";
	if (body == NULL) {
		evhttp_send_error(req, 500, "Internal Server Error");
		return;
	}
	mf.requests++;
	tool = (int)count(body, len, MF_ASSISTANT) + 1 < steps_of(body, len);
	if (tool)
		mf.tool_use++;
	else
		mf.text++;
	if (mf.delay_ms <= 0 && !mf.gate) {
		send_reply(req, tool, mf.requests);
		return;
	}
	if ((h = malloc(sizeof(*h))) == NULL) {
		evhttp_send_error(req, 500, "Internal Server Error");
		return;
	}
	h->req = req;
	h->tool = tool;
	h->n = mf.requests;
	if (++mf.held > mf.held_max)
		mf.held_max = mf.held;
	if (mf.gate) {
		TAILQ_INSERT_TAIL(&mf.gated, h, entry);
		return;
	}
	tv.tv_sec = mf.delay_ms / 1000;
	tv.tv_usec = (mf.delay_ms % 1000) * 1000;
	if (event_base_once(mf.base, -1, EV_TIMEOUT, on_held, h, &tv) == -1) {
		free(h);
		mf.held--;
		evhttp_send_error(req, 500, "Internal Server Error");
	}
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	event_base_loopbreak(mf.base);
}

static void
usage(void)
{
	fprintf(stderr, "usage: model_fast [--steps N] [--delay-ms MS] "
	    "[--port N]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	struct evhttp *http;
	struct evhttp_bound_socket *sock;
	struct event *sigterm, *sigint;
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	int port = 0;

	mf.steps = 2;
	TAILQ_INIT(&mf.gated);
	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			usage();
		if (strcmp(argv[i], "--steps") == 0)
			mf.steps = atoi(argv[++i]);
		else if (strcmp(argv[i], "--delay-ms") == 0)
			mf.delay_ms = atoi(argv[++i]);
		else if (strcmp(argv[i], "--port") == 0)
			port = atoi(argv[++i]);
		else
			usage();
	}
	if (mf.steps < 1 || mf.steps > MF_MAX_STEPS || mf.delay_ms < 0)
		usage();
	signal(SIGPIPE, SIG_IGN);
	if ((mf.base = event_base_new()) == NULL ||
	    (http = evhttp_new(mf.base)) == NULL) {
		fprintf(stderr, "model_fast: cannot set up libevent\n");
		return 1;
	}
	evhttp_set_max_body_size(http, MF_MAX_BODY);
	evhttp_set_max_headers_size(http, MF_MAX_HEADERS);
	evhttp_set_timeout(http, MF_TIMEOUT_S);
	evhttp_set_gencb(http, on_request, NULL);
	if ((sock = evhttp_bind_socket_with_handle(http, "127.0.0.1",
	    (ev_uint16_t)port)) == NULL) {
		fprintf(stderr, "model_fast: cannot listen on port %d\n", port);
		return 1;
	}
	if (getsockname(evhttp_bound_socket_get_fd(sock),
	    (struct sockaddr *)&sin, &sl) == -1) {
		perror("model_fast: getsockname");
		return 1;
	}
	printf("%d\n", ntohs(sin.sin_port));
	fflush(stdout);
	sigterm = evsignal_new(mf.base, SIGTERM, on_signal, NULL);
	sigint = evsignal_new(mf.base, SIGINT, on_signal, NULL);
	if (sigterm == NULL || sigint == NULL || evsignal_add(sigterm, NULL) ==
	    -1 || evsignal_add(sigint, NULL) == -1) {
		fprintf(stderr, "model_fast: cannot catch signals\n");
		return 1;
	}
	event_base_dispatch(mf.base);
	fprintf(stderr, "model_fast: %llu requests (%llu tool_use, %llu text)\n",
	    mf.requests, mf.tool_use, mf.text);
	event_free(sigterm);
	event_free(sigint);
	evhttp_free(http);
	event_base_free(mf.base);
	return 0;
}
