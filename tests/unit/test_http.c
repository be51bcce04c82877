/* Outbound HTTP against a small evhttp server on 127.0.0.1, run on the same
 * loop as the client: round trips, status codes, the response cap, timeouts,
 * refused connections, cancels, concurrency, redirects and the address pin. */
#include <sys/socket.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "http.h"
#include "loop.h"
#include "tt.h"
#include "util.h"

#define BIG_LEN		100000
#define NCONCURRENT	50

static struct evhttp	*srv;
static int		 srv_port;
static char		 base_url[64];

/* Echoes the method, the X-Test header and the body: "METHOD|hdr|body". */
static void
srv_echo(struct evhttp_request *req, void *arg)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	struct evbuffer *out = evbuffer_new();
	const char *h = evhttp_find_header(evhttp_request_get_input_headers(req),
	    "X-Test");
	const char *m;

	switch (evhttp_request_get_command(req)) {
	case EVHTTP_REQ_GET:	m = "GET"; break;
	case EVHTTP_REQ_POST:	m = "POST"; break;
	case EVHTTP_REQ_PUT:	m = "PUT"; break;
	case EVHTTP_REQ_DELETE:	m = "DELETE"; break;
	default:		m = "OTHER"; break;
	}
	evbuffer_add_printf(out, "%s|%s|", m, h != NULL ? h : "");
	evbuffer_add_buffer(out, in);
	evhttp_add_header(evhttp_request_get_output_headers(req), "X-Reply",
	    " spaced value ");
	evhttp_send_reply(req, 200, "OK", out);
	evbuffer_free(out);
}

static void
srv_missing(struct evhttp_request *req, void *arg)
{
	struct evbuffer *out = evbuffer_new();

	evbuffer_add_printf(out, "no such thing");
	evhttp_send_reply(req, 404, "Not Found", out);
	evbuffer_free(out);
}

static void
srv_big(struct evhttp_request *req, void *arg)
{
	struct evbuffer *out = evbuffer_new();
	char *b = xmalloc(BIG_LEN);

	memset(b, 'a', BIG_LEN);
	evbuffer_add(out, b, BIG_LEN);
	free(b);
	evhttp_send_reply(req, 200, "OK", out);
	evbuffer_free(out);
}

/* Never answers: the client's timeout must end the call. */
static void
srv_hang(struct evhttp_request *req, void *arg)
{
}

static void
srv_redirect(struct evhttp_request *req, void *arg)
{
	struct evbuffer *out = evbuffer_new();

	evbuffer_add_printf(out, "moved");
	evhttp_add_header(evhttp_request_get_output_headers(req), "Location",
	    "/echo");
	evhttp_send_reply(req, 302, "Found", out);
	evbuffer_free(out);
}

static void
srv_many_headers(struct evhttp_request *req, void *arg)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	char name[32];

	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "X-H%d", i);
		evhttp_add_header(h, name, "v");
	}
	evhttp_send_reply(req, 200, "OK", NULL);
}

static int
srv_start(void)
{
	struct evhttp_bound_socket *bs;
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	if ((srv = evhttp_new(loop_base())) == NULL)
		return -1;
	evhttp_set_max_body_size(srv, 1 << 20);
	evhttp_set_max_headers_size(srv, 64 << 10);
	evhttp_set_timeout(srv, 30);
	evhttp_set_allowed_methods(srv, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
	    EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_HEAD);
	evhttp_set_cb(srv, "/echo", srv_echo, NULL);
	evhttp_set_cb(srv, "/missing", srv_missing, NULL);
	evhttp_set_cb(srv, "/big", srv_big, NULL);
	evhttp_set_cb(srv, "/hang", srv_hang, NULL);
	evhttp_set_cb(srv, "/redirect", srv_redirect, NULL);
	evhttp_set_cb(srv, "/many-headers", srv_many_headers, NULL);
	if ((bs = evhttp_bind_socket_with_handle(srv, "127.0.0.1", 0)) == NULL)
		return -1;
	if (getsockname(evhttp_bound_socket_get_fd(bs),
	    (struct sockaddr *)&sin, &len) == -1)
		return -1;
	srv_port = ntohs(sin.sin_port);
	snprintf(base_url, sizeof(base_url), "http://127.0.0.1:%d", srv_port);
	return 0;
}

static int
setup(void)
{
	if (loop_init() == -1 || http_init() == -1)
		return -1;
	return srv_start();
}

/* The client goes first so its connections close before the server's. */
static void
teardown(void)
{
	http_shutdown();
	if (srv != NULL)
		evhttp_free(srv);
	srv = NULL;
	loop_free();
}

/* Only meaningful after setup(), which learns the server's port. */
static char *
url(const char *path)
{
	static char u[128];

	snprintf(u, sizeof(u), "%s%s", base_url, path);
	return u;
}

/* What a callback saw, copied out: the response is freed after it. */
struct got {
	int	 calls;
	long	 status;
	int	 curl_code;
	int	 truncated;
	char	 error[256];
	char	*body;
	size_t	 bodylen;
	char	*location;
	char	*reply_hdr;
	char	*effective_url;
	size_t	 inflight_in_cb;
};

static void
got_free(struct got *g)
{
	free(g->body);
	free(g->location);
	free(g->reply_hdr);
	free(g->effective_url);
	memset(g, 0, sizeof(*g));
}

static char *
dup_or_null(const char *s)
{
	return s != NULL ? xstrdup(s) : NULL;
}

static void
on_done(struct http_response *r, void *arg)
{
	struct got *g = arg;

	free(g->location);
	free(g->reply_hdr);
	free(g->effective_url);
	g->calls++;
	g->status = r->status;
	g->curl_code = r->curl_code;
	g->truncated = r->truncated;
	snprintf(g->error, sizeof(g->error), "%s", r->error);
	free(g->body);
	g->body = xstrndup(r->body.data != NULL ? r->body.data : "",
	    r->body.len);
	g->bodylen = r->body.len;
	g->location = dup_or_null(http_header(r, "location"));
	g->reply_hdr = dup_or_null(http_header(r, "X-REPLY"));
	g->effective_url = dup_or_null(r->effective_url);
	g->inflight_in_cb = http_inflight();
}

static void
deadline_hit(void *arg)
{
	*(int *)arg = 1;
}

/* Turn the loop until *count reaches want or ms pass; 0 when reached. */
static int
wait_for(const int *count, int want, long ms)
{
	int late = 0;
	struct loop_timer *t = loop_timer_add(ms, deadline_hit, &late);

	while (*count < want && !late)
		event_base_loop(loop_base(), EVLOOP_ONCE);
	if (!late)
		loop_timer_cancel(t);
	return *count >= want ? 0 : -1;
}

static void
turn_for(long ms)
{
	int never = 0;

	(void)wait_for(&never, 1, ms);
}

static void
test_get(void)
{
	const char *hdrs[] = { "X-Test: hello", NULL };
	struct http_request req = { .method = "GET", .headers = hdrs,
	    .timeout_ms = 5000 };
	struct got g = { 0 };
	struct http_call *c;

	tt_int_op(setup(), ==, 0);
	req.url = url("/echo");
	c = http_start(&req, on_done, &g);
	tt_assert(c != NULL);
	tt_int_op(http_inflight(), ==, 1);
	tt_int_op(wait_for(&g.calls, 1, 5000), ==, 0);
	tt_int_op(g.curl_code, ==, 0);
	tt_int_op(g.status, ==, 200);
	tt_str_op(g.body, ==, "GET|hello|");
	tt_str_op(g.error, ==, "");
	tt_str_op(g.reply_hdr, ==, "spaced value");
	tt_str_op(g.effective_url, ==, url("/echo"));
	tt_int_op(g.inflight_in_cb, ==, 0);
	turn_for(20);
	tt_int_op(g.calls, ==, 1);
	tt_int_op(http_inflight(), ==, 0);
end:
	got_free(&g);
	teardown();
}

static void
test_post_put_delete(void)
{
	const char *hdrs[] = { "X-Test: posted", "Content-Type: text/plain",
	    NULL };
	static const char body[] = "a body\0with a NUL";
	struct http_request req = { .method = "POST",
	    .headers = hdrs, .body = body, .bodylen = sizeof(body) - 1,
	    .timeout_ms = 5000 };
	struct got g = { 0 };

	tt_int_op(setup(), ==, 0);
	req.url = url("/echo");
	http_start(&req, on_done, &g);
	tt_int_op(wait_for(&g.calls, 1, 5000), ==, 0);
	tt_int_op(g.status, ==, 200);
	tt_int_op(g.bodylen, ==, strlen("POST|posted|") + sizeof(body) - 1);
	tt_int_op(memcmp(g.body, "POST|posted|a body\0with a NUL",
	    g.bodylen), ==, 0);

	req.method = "PUT";
	req.body = "x";
	req.bodylen = 1;
	http_start(&req, on_done, &g);
	tt_int_op(wait_for(&g.calls, 2, 5000), ==, 0);
	tt_str_op(g.body, ==, "PUT|posted|x");

	req.method = "DELETE";
	req.body = NULL;
	req.bodylen = 0;
	http_start(&req, on_done, &g);
	tt_int_op(wait_for(&g.calls, 3, 5000), ==, 0);
	tt_str_op(g.body, ==, "DELETE|posted|");
end:
	got_free(&g);
	teardown();
}

static void
test_status_404(void)
{
	struct http_request req = { .method = "GET" };
	struct got g = { 0 };

	tt_int_op(setup(), ==, 0);
	req.url = url("/missing");
	http_start(&req, on_done, &g);
	tt_int_op(wait_for(&g.calls, 1, 5000), ==, 0);
	tt_int_op(g.curl_code, ==, 0);
	tt_int_op(g.status, ==, 404);
	tt_str_op(g.body, ==, "no such thing");
end:
	got_free(&g);
	teardown();
}

static void
test_truncated(void)
{
	struct http_request req = { .method = "GET", .max_response = 1000 };
	struct got g = { 0 };

	tt_int_op(setup(), ==, 0);
	req.url = url("/big");
	http_start(&req, on_done, &g);
	tt_int_op(wait_for(&g.calls, 1, 5000), ==, 0);
	tt_int_op(g.status, ==, 200);
	tt_int_op(g.truncated, ==, 1);
	tt_int_op(g.bodylen, ==, 1000);
	tt_int_op(g.curl_code, !=, 0);
	tt_assert(strstr(g.error, "max_response") != NULL);

	/* Exactly at the cap is not truncated. */
	req.max_response = BIG_LEN;
	http_start(&req, on_done, &g);
	tt_int_op(wait_for(&g.calls, 2, 5000), ==, 0);
	tt_int_op(g.truncated, ==, 0);
	tt_int_op(g.curl_code, ==, 0);
	tt_int_op(g.bodylen, ==, BIG_LEN);
end:
	got_free(&g);
	teardown();
}

/* A got first, so that on_done can take the same pointer. */
struct streamed {
	struct got	g;
	size_t		bytes;
	int		chunks;
	int		abort_after;
};

static int
on_chunk(const char *p, size_t len, void *arg)
{
	struct streamed *s = arg;

	s->bytes += len;
	s->chunks++;
	if (s->abort_after > 0 && s->chunks >= s->abort_after)
		return -1;
	return 0;
}

/* A 2xx body goes to on_data and is not kept; an error status's body is
 * kept for the callback; on_data may abort. */
static void
test_streaming(void)
{
	struct streamed st;
	struct http_request req = { .method = "GET", .on_data = on_chunk };

	memset(&st, 0, sizeof(st));
	tt_int_op(setup(), ==, 0);
	req.url = url("/big");
	http_start(&req, on_done, &st);
	tt_int_op(wait_for(&st.g.calls, 1, 5000), ==, 0);
	tt_int_op(st.g.curl_code, ==, 0);
	tt_int_op(st.bytes, ==, BIG_LEN);
	tt_int_op(st.g.bodylen, ==, 0);

	st.bytes = 0;
	req.url = url("/missing");
	http_start(&req, on_done, &st);
	tt_int_op(wait_for(&st.g.calls, 2, 5000), ==, 0);
	tt_int_op(st.g.status, ==, 404);
	tt_int_op(st.bytes, ==, 0);
	tt_str_op(st.g.body, ==, "no such thing");

	/* The cap holds for a stream too. */
	req.url = url("/big");
	req.max_response = 5000;
	http_start(&req, on_done, &st);
	tt_int_op(wait_for(&st.g.calls, 3, 5000), ==, 0);
	tt_int_op(st.g.truncated, ==, 1);
	tt_int_op(st.bytes, ==, 5000);

	st.abort_after = 1;
	req.max_response = 0;
	http_start(&req, on_done, &st);
	tt_int_op(wait_for(&st.g.calls, 4, 5000), ==, 0);
	tt_int_op(st.g.curl_code, !=, 0);
	tt_assert(strstr(st.g.error, "aborted") != NULL);
end:
	got_free(&st.g);
	teardown();
}

static void
test_timeout(void)
{
	struct http_request req = { .method = "GET", .timeout_ms = 300 };
	struct got g = { 0 };
	int64_t t0;

	tt_int_op(setup(), ==, 0);
	req.url = url("/hang");
	t0 = mono_ms();
	http_start(&req, on_done, &g);
	tt_int_op(wait_for(&g.calls, 1, 5000), ==, 0);
	tt_int_op(mono_ms() - t0, >=, 290);
	tt_int_op(g.status, ==, 0);
	tt_int_op(g.curl_code, ==, 28);	/* CURLE_OPERATION_TIMEDOUT */
	tt_assert(strstr(g.error, "timed out") != NULL);
end:
	got_free(&g);
	teardown();
}

/* A port that was just closed: nothing listens there. */
static int
closed_port(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	int fd, port = -1;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		return -1;
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sin, &len) == 0)
		port = ntohs(sin.sin_port);
	close(fd);
	return port;
}

static void
test_refused(void)
{
	struct http_request req = { .method = "GET", .timeout_ms = 5000 };
	struct got g = { 0 };
	char u[64];
	int port;

	tt_int_op(setup(), ==, 0);
	tt_int_op((port = closed_port()), >, 0);
	snprintf(u, sizeof(u), "http://127.0.0.1:%d/", port);
	req.url = u;
	http_start(&req, on_done, &g);
	tt_int_op(wait_for(&g.calls, 1, 5000), ==, 0);
	tt_int_op(g.curl_code, !=, 0);
	tt_int_op(g.status, ==, 0);
	tt_assert(g.error[0] != '\0');
end:
	got_free(&g);
	teardown();
}

/* Bad input never reaches the wire and still answers through the callback,
 * never from inside http_start. */
static void
test_bad_request(void)
{
	const char *evil[] = { "X-A: 1\r\nX-B: 2", NULL };
	struct http_request req = { .method = "GET /x HTTP/1.1\r\n" };
	struct got g = { 0 };

	tt_int_op(setup(), ==, 0);
	req.url = url("/echo");
	http_start(&req, on_done, &g);
	tt_int_op(g.calls, ==, 0);
	tt_int_op(wait_for(&g.calls, 1, 5000), ==, 0);
	tt_int_op(g.curl_code, !=, 0);
	tt_str_op(g.error, ==, "invalid HTTP method");

	req.method = "GET";
	req.headers = evil;
	http_start(&req, on_done, &g);
	tt_int_op(wait_for(&g.calls, 2, 5000), ==, 0);
	tt_int_op(g.curl_code, !=, 0);

	req.headers = NULL;
	req.url = "file:///etc/passwd";
	http_start(&req, on_done, &g);
	tt_int_op(wait_for(&g.calls, 3, 5000), ==, 0);
	tt_int_op(g.curl_code, ==, 1);	/* CURLE_UNSUPPORTED_PROTOCOL */
end:
	got_free(&g);
	teardown();
}

static void
test_too_many_headers(void)
{
	struct http_request req = { .method = "GET" };
	struct got g = { 0 };

	tt_int_op(setup(), ==, 0);
	req.url = url("/many-headers");
	http_start(&req, on_done, &g);
	tt_int_op(wait_for(&g.calls, 1, 5000), ==, 0);
	tt_int_op(g.curl_code, !=, 0);
	tt_assert(strstr(g.error, "headers") != NULL);
end:
	got_free(&g);
	teardown();
}

static void
test_cancel(void)
{
	struct http_request req = { .method = "GET", .timeout_ms = 100 };
	struct got g = { 0 };
	struct http_call *c;

	tt_int_op(setup(), ==, 0);
	req.url = url("/hang");
	c = http_start(&req, on_done, &g);
	turn_for(20);
	http_cancel(c);
	tt_int_op(http_inflight(), ==, 0);
	turn_for(300);
	tt_int_op(g.calls, ==, 0);

	/* Cancelled before the loop even turned, and a failed start too. */
	c = http_start(&req, on_done, &g);
	http_cancel(c);
	req.method = "BAD METHOD";
	c = http_start(&req, on_done, &g);
	http_cancel(c);
	http_cancel(NULL);
	turn_for(300);
	tt_int_op(g.calls, ==, 0);
	tt_int_op(http_inflight(), ==, 0);
end:
	got_free(&g);
	teardown();
}

/* Three calls; whichever answers first cancels the other two, whatever state
 * they are in (finished and waiting for their callback, or in flight). */
struct trio {
	struct http_call	*c[3];
	int			 calls;
	int			 self_cancel_ok;
};

static void
on_trio(struct http_response *r, void *arg)
{
	struct trio *t = arg;

	t->calls++;
	for (int i = 0; i < 3; i++)
		http_cancel(t->c[i]);	/* includes this very call: a no-op */
	t->self_cancel_ok = 1;
}

static void
test_cancel_from_callback(void)
{
	struct http_request fast = { .method = "GET" };
	struct http_request slow = { .method = "GET", .timeout_ms = 200 };
	struct trio t = { { NULL }, 0, 0 };

	tt_int_op(setup(), ==, 0);
	fast.url = url("/echo");
	slow.url = url("/hang");
	t.c[0] = http_start(&fast, on_trio, &t);
	t.c[1] = http_start(&fast, on_trio, &t);
	t.c[2] = http_start(&slow, on_trio, &t);
	tt_int_op(wait_for(&t.calls, 1, 5000), ==, 0);
	turn_for(400);
	tt_int_op(t.calls, ==, 1);
	tt_int_op(t.self_cancel_ok, ==, 1);
	tt_int_op(http_inflight(), ==, 0);
end:
	teardown();
}

struct one {
	int	*calls;
	int	*ok;
	int	 i;
	char	 body[16];
};

static void
on_many(struct http_response *r, void *arg)
{
	struct one *o = arg;
	char want[32];

	(*o->calls)++;
	snprintf(want, sizeof(want), "POST||%d", o->i);
	if (r->status == 200 && r->curl_code == 0 &&
	    strcmp(r->body.data, want) == 0)
		(*o->ok)++;
}

static void
test_concurrent(void)
{
	static struct one ones[NCONCURRENT];
	int calls = 0, ok = 0;

	tt_int_op(setup(), ==, 0);
	for (int i = 0; i < NCONCURRENT; i++) {
		struct http_request req = { .method = "POST",
		    .url = url("/echo"), .timeout_ms = 10000 };
		struct one *o = &ones[i];

		o->calls = &calls;
		o->ok = &ok;
		o->i = i;
		snprintf(o->body, sizeof(o->body), "%d", i);
		req.body = o->body;
		req.bodylen = strlen(o->body);
		http_start(&req, on_many, o);
	}
	tt_int_op(http_inflight(), ==, NCONCURRENT);
	tt_int_op(wait_for(&calls, NCONCURRENT, 10000), ==, 0);
	tt_int_op(ok, ==, NCONCURRENT);
	tt_int_op(http_inflight(), ==, 0);
end:
	teardown();
}

static void
test_no_redirect(void)
{
	struct http_request req = { .method = "GET" };
	struct got g = { 0 };

	tt_int_op(setup(), ==, 0);
	req.url = url("/redirect");
	http_start(&req, on_done, &g);
	tt_int_op(wait_for(&g.calls, 1, 5000), ==, 0);
	tt_int_op(g.curl_code, ==, 0);
	tt_int_op(g.status, ==, 302);
	tt_str_op(g.location, ==, "/echo");
	tt_str_op(g.body, ==, "moved");
	tt_str_op(g.effective_url, ==, url("/redirect"));
end:
	got_free(&g);
	teardown();
}

static int
deny_loopback(const struct sockaddr *sa, unsigned int len)
{
	const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

	if (sa->sa_family == AF_INET &&
	    in->sin_addr.s_addr == htonl(INADDR_LOOPBACK))
		return 0;
	return 1;
}

static int
allow_all(const struct sockaddr *sa, unsigned int len)
{
	return 1;
}

static void
test_addr_filter(void)
{
	struct http_request req = { .method = "GET", .timeout_ms = 5000 };
	struct got g = { 0 };

	tt_int_op(setup(), ==, 0);
	req.url = url("/echo");
	http_set_addr_filter(deny_loopback);
	http_start(&req, on_done, &g);
	tt_int_op(wait_for(&g.calls, 1, 5000), ==, 0);
	tt_int_op(g.curl_code, !=, 0);
	tt_int_op(g.status, ==, 0);
	tt_assert(strstr(g.error, "127.0.0.1") != NULL);
	tt_assert(strstr(g.error, "refused by the hermetic pin") != NULL);

	/* A host granted by a wildcard has no pinned addresses. */
	req.unpinned = 1;
	http_start(&req, on_done, &g);
	tt_int_op(wait_for(&g.calls, 2, 5000), ==, 0);
	tt_int_op(g.status, ==, 200);
	req.unpinned = 0;

	http_set_addr_filter(allow_all);
	http_start(&req, on_done, &g);
	tt_int_op(wait_for(&g.calls, 3, 5000), ==, 0);
	tt_int_op(g.status, ==, 200);
end:
	http_set_addr_filter(NULL);
	got_free(&g);
	teardown();
}

/*
 * TLS against openssl s_server with a certificate from a CA made here: not
 * trusted by default, trusted with ca_file, and a wrong ca_file does not
 * help. Skipped (and said so) where the openssl command is missing.
 */
#define TLS_SETUP							\
	"cd %s && "							\
	"openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 " \
	"-nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=af-test-ca && " \
	"openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 " \
	"-nodes -keyout other.key -out other.pem -days 2 -subj /CN=other && " \
	"openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 " \
	"-nodes -keyout srv.key -out srv.csr -subj /CN=localhost && "	\
	"printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > ext && " \
	"openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key "	\
	"-CAcreateserial -out srv.pem -days 2 -extfile ext"

static pid_t
tls_server(const char *dir, int port)
{
	char portstr[16], cert[256], key[256];
	pid_t pid;
	int fd;

	snprintf(portstr, sizeof(portstr), "%d", port);
	snprintf(cert, sizeof(cert), "%s/srv.pem", dir);
	snprintf(key, sizeof(key), "%s/srv.key", dir);
	if ((pid = fork()) != 0)
		return pid;
	if ((fd = open("/dev/null", O_RDWR)) != -1) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
	}
	execlp("openssl", "openssl", "s_server", "-accept", portstr, "-cert",
	    cert, "-key", key, "-www", "-quiet", (char *)NULL);
	_exit(127);
}

static int
port_open(int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	int fd, rc;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(port);
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		return 0;
	rc = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
	close(fd);
	return rc == 0;
}

static void
test_tls_ca_file(void)
{
	char dir[] = "/tmp/af-test-tls-XXXXXX", cmd[2048], u[64], ca[128];
	struct http_request req = { .method = "GET", .timeout_ms = 5000 };
	struct got g = { 0 };
	pid_t pid = -1;
	int port, i, made = 0;

	tt_int_op(setup(), ==, 0);
	if (system("command -v openssl >/dev/null 2>&1") != 0) {
		printf("skip tls_ca_file: no openssl command\n");
		goto end;
	}
	tt_assert(mkdtemp(dir) != NULL);
	made = 1;
	snprintf(cmd, sizeof(cmd), "(" TLS_SETUP ") >/dev/null 2>&1", dir);
	tt_int_op(system(cmd), ==, 0);
	tt_int_op((port = closed_port()), >, 0);
	tt_int_op((pid = tls_server(dir, port)), >, 0);
	for (i = 0; i < 100 && !port_open(port); i++)
		usleep(20 * 1000);
	tt_int_op(i, <, 100);
	snprintf(u, sizeof(u), "https://127.0.0.1:%d/", port);
	req.url = u;

	http_start(&req, on_done, &g);
	tt_int_op(wait_for(&g.calls, 1, 5000), ==, 0);
	tt_int_op(g.status, ==, 0);
	tt_int_op(g.curl_code, ==, 60);	/* CURLE_PEER_FAILED_VERIFICATION */

	snprintf(ca, sizeof(ca), "%s/other.pem", dir);
	req.ca_file = ca;
	http_start(&req, on_done, &g);
	tt_int_op(wait_for(&g.calls, 2, 5000), ==, 0);
	tt_int_op(g.curl_code, ==, 60);

	snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
	http_start(&req, on_done, &g);
	tt_int_op(wait_for(&g.calls, 3, 5000), ==, 0);
	tt_int_op(g.curl_code, ==, 0);
	tt_int_op(g.status, ==, 200);
end:
	if (pid > 0) {
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
	}
	if (made) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		(void)!system(cmd);
	}
	got_free(&g);
	teardown();
}

/* Shutting down with calls in flight frees them without callbacks. */
static void
test_shutdown_inflight(void)
{
	struct http_request req = { .method = "GET" };
	struct got g = { 0 };

	tt_int_op(setup(), ==, 0);
	req.url = url("/hang");
	http_start(&req, on_done, &g);
	http_start(&req, on_done, &g);
	turn_for(50);
	tt_int_op(http_inflight(), ==, 2);
	http_shutdown();
	tt_int_op(http_inflight(), ==, 0);
	tt_int_op(g.calls, ==, 0);
end:
	teardown();
	got_free(&g);
}

static const struct tt_case cases[] = {
	{ "get", test_get },
	{ "post_put_delete", test_post_put_delete },
	{ "status_404", test_status_404 },
	{ "truncated", test_truncated },
	{ "streaming", test_streaming },
	{ "timeout", test_timeout },
	{ "refused", test_refused },
	{ "bad_request", test_bad_request },
	{ "too_many_headers", test_too_many_headers },
	{ "cancel", test_cancel },
	{ "cancel_from_callback", test_cancel_from_callback },
	{ "concurrent", test_concurrent },
	{ "no_redirect", test_no_redirect },
	{ "addr_filter", test_addr_filter },
	{ "tls_ca_file", test_tls_ca_file },
	{ "shutdown_inflight", test_shutdown_inflight },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	log_init(LOG_TEXT, 0);
	return tt_main(argc, argv, cases);
}
