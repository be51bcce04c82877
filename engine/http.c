/* Outbound HTTP on the loop: one libcurl multi handle driven by libevent
 * through curl's socket and timer callbacks (the multi-event pattern). */
#include <sys/queue.h>
#include <sys/socket.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <event2/event.h>

#include "http.h"
#include "loop.h"
#include "util.h"

/* Connections held open at once, in all and to one host. HTTP/2 multiplexes
 * many calls over one connection, so these bound HTTP/1.1 peers mostly;
 * calls beyond them wait in curl's queue (their timeout runs meanwhile). */
#define HTTP_MAX_CONNECTIONS		512
#define HTTP_MAX_HOST_CONNECTIONS	256
/* curl's own default is 300 s: far too long to notice a dead peer. */
#define HTTP_CONNECT_TIMEOUT_DEFAULT	30000
/* Bounds on the response's header block, all responses of a call together
 * (1xx interim responses included). */
#define HTTP_MAX_HEADER_BYTES		(64 << 10)
#define HTTP_MAX_HEADERS		128
#define HTTP_MAX_METHOD			32
#define HTTP_USER_AGENT			"af/" AF_VERSION

enum call_state {
	CALL_ACTIVE,		/* in the multi handle, on the active list */
	CALL_DONE		/* finished, on the done list, callback pending */
};

struct http_call {
	TAILQ_ENTRY(http_call)	 entry;
	enum call_state		 state;
	CURL			*easy;
	struct curl_slist	*hdrs;
	http_cb			 cb;
	void			*arg;
	int			(*on_data)(const char *, size_t, void *);
	size_t			 max_response;
	size_t			 received;	/* body bytes taken so far */
	size_t			 header_bytes;
	long			 line_status;	/* of the latest status line */
	int			 cancelled;
	int			 delivering;	/* its callback is running */
	int			 aborted;	/* on_data returned -1 */
	int			 header_overflow;
	int			 unpinned;	/* req->unpinned */
	char			 refused[INET6_ADDRSTRLEN + 16];
	char			 errbuf[CURL_ERROR_SIZE];
	struct http_response	 resp;
};
TAILQ_HEAD(http_calls, http_call);

/* One libevent event per socket curl asks us to watch. */
struct sockinfo {
	LIST_ENTRY(sockinfo)	 entry;
	curl_socket_t		 fd;
	struct event		*ev;
};
LIST_HEAD(sockinfos, sockinfo);

static CURLM			*multi;
static struct event		*timer_ev;	/* curl's single timeout */
static struct event		*pump_ev;	/* reap cancels, run callbacks */
static struct http_calls	 active = TAILQ_HEAD_INITIALIZER(active);
static struct http_calls	 done = TAILQ_HEAD_INITIALIZER(done);
static struct sockinfos		 socks = LIST_HEAD_INITIALIZER(socks);
static size_t			 ninflight;
static int			 pumping;
static int			 reap_needed;	/* a cancelled call is active */
static int			 curl_ready;	/* curl_global_init done */
static char			*sys_capath;
static int			(*addr_ok)(const struct sockaddr *, unsigned int);

static void check_done(void);
static void pump(void);

static void
sock_free(struct sockinfo *si)
{
	LIST_REMOVE(si, entry);
	if (si->ev != NULL)
		event_free(si->ev);
	free(si);
}

/* libevent saw activity on a socket: hand it to curl. si may be freed by
 * curl's socket callback during the action, so it is not touched after. */
static void
on_sock_event(evutil_socket_t fd, short what, void *arg)
{
	int action = 0, running;

	if (what & EV_READ)
		action |= CURL_CSELECT_IN;
	if (what & EV_WRITE)
		action |= CURL_CSELECT_OUT;
	curl_multi_socket_action(multi, fd, action, &running);
	check_done();
}

/* CURLMOPT_SOCKETFUNCTION: curl says which sockets to watch and for what. */
static int
on_curl_socket(CURL *e, curl_socket_t fd, int what, void *userp, void *sockp)
{
	struct sockinfo *si = sockp;
	short kind = EV_PERSIST;

	if (what == CURL_POLL_REMOVE) {
		if (si != NULL)
			sock_free(si);
		return 0;
	}
	if (si == NULL) {
		si = xcalloc(1, sizeof(*si));
		si->fd = fd;
		LIST_INSERT_HEAD(&socks, si, entry);
		curl_multi_assign(multi, fd, si);
	} else if (si->ev != NULL)
		event_free(si->ev);
	if (what & CURL_POLL_IN)
		kind |= EV_READ;
	if (what & CURL_POLL_OUT)
		kind |= EV_WRITE;
	si->ev = event_new(loop_base(), fd, kind, on_sock_event, si);
	if (si->ev == NULL || event_add(si->ev, NULL) == -1) {
		log_warnx("http: cannot watch socket %d", (int)fd);
		return -1;
	}
	return 0;
}

static void
on_timer_event(evutil_socket_t fd, short what, void *arg)
{
	int running;

	curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_done();
}

/* CURLMOPT_TIMERFUNCTION: -1 removes the timer; 0 means "as soon as you
 * can", which must not be done from inside this callback, so it becomes a
 * zero timeout on the loop like any other. */
static int
on_curl_timer(CURLM *m, long ms, void *userp)
{
	struct timeval tv;

	if (ms < 0) {
		evtimer_del(timer_ev);
		return 0;
	}
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	return evtimer_add(timer_ev, &tv) == -1 ? -1 : 0;
}

static void
on_pump_event(evutil_socket_t fd, short what, void *arg)
{
	pump();
}

/* The system trust directory libcurl uses by default, so that a ca_file can
 * be added to it rather than replace it (see set_tls). */
static void
find_sys_capath(void)
{
	CURL *e;
	char *p = NULL;

	if ((e = curl_easy_init()) == NULL)
		return;
	if (curl_easy_getinfo(e, CURLINFO_CAPATH, &p) == CURLE_OK && p != NULL)
		sys_capath = xstrdup(p);
	curl_easy_cleanup(e);
	if (sys_capath == NULL)
		log_warnx("http: libcurl has no default CA directory: a ca_file "
		    "will replace the system trust instead of adding to it");
}

int
http_init(void)
{
	const curl_version_info_data *v;

	if (multi != NULL)
		return 0;
	if (loop_base() == NULL) {
		log_warnx("http: http_init before loop_init");
		return -1;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		log_warnx("http: curl_global_init failed");
		return -1;
	}
	curl_ready = 1;
	v = curl_version_info(CURLVERSION_NOW);
	if (!(v->features & CURL_VERSION_ASYNCHDNS))
		log_warnx("http: libcurl %s resolves names synchronously: each DNS "
		    "lookup blocks the event loop", v->version);
	find_sys_capath();

	timer_ev = evtimer_new(loop_base(), on_timer_event, NULL);
	pump_ev = event_new(loop_base(), -1, 0, on_pump_event, NULL);
	if ((multi = curl_multi_init()) == NULL || timer_ev == NULL ||
	    pump_ev == NULL) {
		log_warnx("http: cannot set up the multi handle");
		http_shutdown();
		return -1;
	}
	curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
	curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
	curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS,
	    (long)HTTP_MAX_CONNECTIONS);
	curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS,
	    (long)HTTP_MAX_HOST_CONNECTIONS);
	return 0;
}

static void
headers_free(struct http_response *r)
{
	for (size_t i = 0; i < r->nheaders; i++) {
		free(r->headers[i].name);
		free(r->headers[i].value);
	}
	free(r->headers);
	r->headers = NULL;
	r->nheaders = 0;
}

static void
call_free(struct http_call *c)
{
	if (c->easy != NULL)
		curl_easy_cleanup(c->easy);
	curl_slist_free_all(c->hdrs);
	headers_free(&c->resp);
	buf_free(&c->resp.body);
	free(c->resp.effective_url);
	free(c);
}

/* Only a 2xx body is streamed: an error status's body (a JSON error from a
 * model API, say) is collected as usual so the callback can report it. */
static int
take_body(struct http_call *c, const char *p, size_t len)
{
	if (c->on_data != NULL && c->line_status >= 200 &&
	    c->line_status < 300) {
		if (c->on_data(p, len, c->arg) == -1) {
			c->aborted = 1;
			return -1;
		}
	} else
		buf_add(&c->resp.body, p, len);
	return 0;
}

/* CURLOPT_WRITEFUNCTION. The cap counts the bytes as they arrive on the wire,
 * since nothing is decompressed (see set_options): what fits is kept, then
 * the transfer stops. */
static size_t
on_body(char *p, size_t size, size_t n, void *arg)
{
	struct http_call *c = arg;
	size_t len = size * n, keep = len;

	if (c->cancelled)
		return CURL_WRITEFUNC_ERROR;
	if (keep > c->max_response - c->received) {
		keep = c->max_response - c->received;
		c->resp.truncated = 1;
	}
	if (keep > 0 && take_body(c, p, keep) == -1)
		return CURL_WRITEFUNC_ERROR;
	c->received += keep;
	return keep == len ? len : CURL_WRITEFUNC_ERROR;
}

static char *
trimmed(const char *p, size_t len)
{
	while (len > 0 && (*p == ' ' || *p == '\t')) {
		p++;
		len--;
	}
	while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
		len--;
	return xstrndup(p, len);
}

/* A folded continuation line (obsolete, but legal from old servers) joins
 * the previous header's value. */
static void
header_fold(struct http_response *r, const char *p, size_t len)
{
	struct http_header *h;
	char *more, *v;

	if (r->nheaders == 0)
		return;
	h = &r->headers[r->nheaders - 1];
	more = trimmed(p, len);
	v = xasprintf("%s %s", h->value, more);
	free(more);
	free(h->value);
	h->value = v;
}

static int
header_add(struct http_call *c, const char *p, size_t len)
{
	struct http_response *r = &c->resp;
	const char *colon;

	if ((colon = memchr(p, ':', len)) == NULL)
		return 0;	/* not a header: ignored, as curl does */
	if (r->nheaders >= HTTP_MAX_HEADERS)
		return -1;
	r->headers = xreallocarray(r->headers, r->nheaders + 1,
	    sizeof(*r->headers));
	r->headers[r->nheaders].name = trimmed(p, (size_t)(colon - p));
	r->headers[r->nheaders].value = trimmed(colon + 1,
	    len - (size_t)(colon - p) - 1);
	r->nheaders++;
	return 0;
}

/* CURLOPT_HEADERFUNCTION: one line at a time. A status line starts a new
 * response (after a 100 Continue or any 1xx), so the headers collected so
 * far belong to a response the caller never sees and are dropped. */
static size_t
on_header(char *p, size_t size, size_t n, void *arg)
{
	struct http_call *c = arg;
	size_t len = size * n;
	const char *sp;

	if (c->cancelled)
		return CURL_WRITEFUNC_ERROR;
	c->header_bytes += len;
	if (c->header_bytes > HTTP_MAX_HEADER_BYTES) {
		c->header_overflow = 1;
		return CURL_WRITEFUNC_ERROR;
	}
	if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		headers_free(&c->resp);
		sp = memchr(p, ' ', len);
		c->line_status = sp != NULL ? strtol(sp + 1, NULL, 10) : 0;
		return len;
	}
	while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == '\r'))
		len--;
	if (len == 0)
		return size * n;
	if (p[0] == ' ' || p[0] == '\t')
		header_fold(&c->resp, p, len);
	else if (header_add(c, p, len) == -1) {
		c->header_overflow = 1;
		return CURL_WRITEFUNC_ERROR;
	}
	return size * n;
}

static void
addr_text(const struct sockaddr *sa, char *out, size_t outlen)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
	}
	snprintf(out, outlen, "%s port %u", host, port);
}

/*
 * CURLOPT_OPENSOCKETFUNCTION: every socket curl connects passes here, after
 * the name was resolved, so the hermetic pin judges the address actually
 * used (a rebinding DNS answer cannot slip past it). The socket is made
 * close-on-exec, which curl does not do: run_bash's children must not
 * inherit connections to model APIs.
 */
static curl_socket_t
open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct http_call *c = arg;

	if (addr_ok != NULL && !c->unpinned &&
	    !addr_ok(&a->addr, a->addrlen)) {
		addr_text(&a->addr, c->refused, sizeof(c->refused));
		log_warnx("http: connection to %s refused by the hermetic pin",
		    c->refused);
		return CURL_SOCKET_BAD;
	}
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

/* A method goes on the request line verbatim: only an RFC 9110 token may,
 * or a model could smuggle a second request into http_request's. */
static int
method_ok(const char *m)
{
	size_t n = 0;

	if (m == NULL)
		return 0;
	for (; m[n] != '\0'; n++) {
		unsigned char ch = (unsigned char)m[n];

		if (!isalnum(ch) && strchr("!#$%&'*+-.^_`|~", ch) == NULL)
			return 0;
	}
	return n > 0 && n <= HTTP_MAX_METHOD;
}

static int
text_ok(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 0;
	return 1;
}

/* "Expect:" with no value stops curl from sending Expect: 100-continue for
 * large bodies: servers that ignore it cost a second's wait per call. */
static int
set_headers(struct http_call *c, const char *const *hdrs, char *err,
    size_t errlen)
{
	int has_expect = 0;

	for (size_t i = 0; hdrs != NULL && hdrs[i] != NULL; i++) {
		if (!text_ok(hdrs[i]) || strpbrk(hdrs[i], ":;") == NULL) {
			snprintf(err, errlen, "invalid request header #%zu", i);
			return -1;
		}
		if (strncasecmp(hdrs[i], "Expect:", 7) == 0)
			has_expect = 1;
		c->hdrs = curl_slist_append(c->hdrs, hdrs[i]);
	}
	if (!has_expect)
		c->hdrs = curl_slist_append(c->hdrs, "Expect:");
	if (c->hdrs == NULL)
		fatalx("http: out of memory");
	curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, c->hdrs);
	return 0;
}

/* GET and HEAD carry no body unless given one; POST, PUT and PATCH always
 * send one, if empty, so that a Content-Length goes out. The body is copied:
 * the caller's request need not outlive http_start. */
static void
set_method(CURL *e, const struct http_request *req)
{
	const char *m = req->method;
	int has_body = req->body != NULL || req->bodylen > 0;

	if (strcmp(m, "HEAD") == 0 && !has_body) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
		return;
	}
	if (strcmp(m, "GET") == 0 && !has_body) {
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
		return;
	}
	if (strcmp(m, "POST") != 0)
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m);
	if (has_body || strcmp(m, "POST") == 0 || strcmp(m, "PUT") == 0 ||
	    strcmp(m, "PATCH") == 0) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
		    (curl_off_t)req->bodylen);
		curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS,
		    req->body != NULL ? req->body : "");
	}
}

/*
 * TLS is always verified. libcurl with GnuTLS cannot take a CA blob
 * (CURLOPT_CAINFO_BLOB is not built in), but it loads both CURLOPT_CAINFO
 * and CURLOPT_CAPATH: the extra file goes in CAINFO and the system directory
 * stays in CAPATH, so the file adds to the system trust.
 */
static int
set_tls(CURL *e, const char *ca_file, char *err, size_t errlen)
{
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
	if (curl_easy_setopt(e, CURLOPT_SSLVERSION,
	    (long)CURL_SSLVERSION_TLSv1_2) != CURLE_OK) {
		snprintf(err, errlen, "cannot require TLS 1.2");
		return -1;
	}
	if (ca_file == NULL)
		return 0;
	if (curl_easy_setopt(e, CURLOPT_CAINFO, ca_file) != CURLE_OK ||
	    (sys_capath != NULL &&
	    curl_easy_setopt(e, CURLOPT_CAPATH, sys_capath) != CURLE_OK)) {
		snprintf(err, errlen, "cannot use the CA file %s", ca_file);
		return -1;
	}
	return 0;
}

/*
 * Everything that does not depend on the request's content. No
 * CURLOPT_ACCEPT_ENCODING: curl then neither asks for nor decodes
 * compressed bodies, so max_response bounds what is held in memory and a
 * small compressed bomb cannot expand past it. Redirects are not followed,
 * and only http and https may be spoken, for a redirect too.
 */
static int
set_options(struct http_call *c, const struct http_request *req, char *err,
    size_t errlen)
{
	CURL *e = c->easy;
	long cto = req->connect_timeout_ms > 0 ? req->connect_timeout_ms :
	    HTTP_CONNECT_TIMEOUT_DEFAULT;

	if (curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") !=
	    CURLE_OK || curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR,
	    "http,https") != CURLE_OK) {
		snprintf(err, errlen, "cannot restrict protocols to http(s)");
		return -1;
	}
	curl_easy_setopt(e, CURLOPT_URL, req->url);
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_PRIVATE, c);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->errbuf);
	curl_easy_setopt(e, CURLOPT_USERAGENT, HTTP_USER_AGENT);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, cto);
	if (req->timeout_ms > 0)
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, req->timeout_ms);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket);
	curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, c);
	return set_tls(e, req->ca_file, err, errlen);
}

static int
call_setup(struct http_call *c, const struct http_request *req, char *err,
    size_t errlen)
{
	if (!method_ok(req->method)) {
		snprintf(err, errlen, "invalid HTTP method");
		return CURLE_BAD_FUNCTION_ARGUMENT;
	}
	if (req->url == NULL || !text_ok(req->url) || strchr(req->url, ' ')) {
		snprintf(err, errlen, "invalid URL");
		return CURLE_URL_MALFORMAT;
	}
	if ((c->easy = curl_easy_init()) == NULL) {
		snprintf(err, errlen, "cannot create a curl handle");
		return CURLE_FAILED_INIT;
	}
	if (set_options(c, req, err, errlen) == -1)
		return CURLE_NOT_BUILT_IN;
	if (set_headers(c, req->headers, err, errlen) == -1)
		return CURLE_BAD_FUNCTION_ARGUMENT;
	set_method(c->easy, req);
	return CURLE_OK;
}

/* A call that never reached curl still answers through its callback, later
 * on the loop: callers have one error path, and no callback runs inside
 * http_start. */
static void
fail_early(struct http_call *c, int code, const char *err)
{
	c->resp.curl_code = code;
	snprintf(c->resp.error, sizeof(c->resp.error), "%s", err);
	c->state = CALL_DONE;
	TAILQ_INSERT_TAIL(&done, c, entry);
	event_active(pump_ev, EV_TIMEOUT, 0);
}

struct http_call *
http_start(const struct http_request *req, http_cb cb, void *arg)
{
	struct http_call *c;
	char err[sizeof(c->resp.error)] = "";
	int code;

	if (multi == NULL)
		fatalx("http_start before http_init");
	c = xcalloc(1, sizeof(*c));
	buf_init(&c->resp.body);
	c->cb = cb;
	c->arg = arg;
	c->on_data = req->on_data;
	c->unpinned = req->unpinned;
	c->max_response = req->max_response > 0 ? req->max_response :
	    HTTP_MAX_RESPONSE_DEFAULT;
	ninflight++;

	if ((code = call_setup(c, req, err, sizeof(err))) != CURLE_OK) {
		fail_early(c, code, err);
		return c;
	}
	if (curl_multi_add_handle(multi, c->easy) != CURLM_OK) {
		fail_early(c, CURLE_FAILED_INIT, "cannot start the transfer");
		return c;
	}
	c->state = CALL_ACTIVE;
	TAILQ_INSERT_TAIL(&active, c, entry);
	return c;
}

/* Our own reasons for stopping a transfer say more than curl's "failed
 * writing received data". */
static void
set_error(struct http_call *c, CURLcode res)
{
	struct http_response *r = &c->resp;
	const char *curl_text = c->errbuf[0] != '\0' ? c->errbuf :
	    curl_easy_strerror(res);

	if (res == CURLE_OK)
		r->error[0] = '\0';
	else if (c->refused[0] != '\0')
		snprintf(r->error, sizeof(r->error), "connection to %s refused "
		    "by the hermetic pin", c->refused);
	else if (r->truncated)
		snprintf(r->error, sizeof(r->error), "response body larger than "
		    "%zu bytes (max_response): truncated", c->max_response);
	else if (c->aborted)
		snprintf(r->error, sizeof(r->error), "transfer aborted by the "
		    "data callback");
	else if (c->header_overflow)
		snprintf(r->error, sizeof(r->error), "response headers over "
		    "%d lines or %d bytes", HTTP_MAX_HEADERS,
		    HTTP_MAX_HEADER_BYTES);
	else
		snprintf(r->error, sizeof(r->error), "%s", curl_text);
}

static void
finish(struct http_call *c, CURLcode res)
{
	struct http_response *r = &c->resp;
	long status = 0;
	char *url = NULL;

	curl_multi_remove_handle(multi, c->easy);
	TAILQ_REMOVE(&active, c, entry);
	if (curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status) ==
	    CURLE_OK)
		r->status = status;
	if (curl_easy_getinfo(c->easy, CURLINFO_EFFECTIVE_URL, &url) ==
	    CURLE_OK && url != NULL)
		r->effective_url = xstrdup(url);
	r->curl_code = (int)res;
	set_error(c, res);
	c->state = CALL_DONE;
	TAILQ_INSERT_TAIL(&done, c, entry);
}

/* Collect every finished transfer first, then run callbacks: a callback may
 * start or cancel calls, and none of that may happen while curl's message
 * list is being read. */
static void
check_done(void)
{
	CURLMsg *m;
	int left;

	while ((m = curl_multi_info_read(multi, &left)) != NULL) {
		struct http_call *c = NULL;
		CURLcode res = m->data.result;

		if (m->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &c);
		finish(c, res);
	}
	pump();
}

/*
 * The one place calls are freed, always outside curl's callbacks: cancelled
 * transfers leave the multi handle, then each finished call's callback runs
 * (unless it was cancelled meanwhile, even by an earlier callback of this
 * same pass) and only after it returns is the call freed.
 */
static void
pump(void)
{
	struct http_call *c, *next;

	if (pumping)
		return;
	pumping = 1;
	for (c = TAILQ_FIRST(&active); reap_needed && c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (!c->cancelled)
			continue;
		TAILQ_REMOVE(&active, c, entry);
		curl_multi_remove_handle(multi, c->easy);
		call_free(c);
	}
	reap_needed = 0;
	while ((c = TAILQ_FIRST(&done)) != NULL) {
		TAILQ_REMOVE(&done, c, entry);
		if (!c->cancelled) {
			ninflight--;
			c->delivering = 1;
			if (c->cb != NULL)
				c->cb(&c->resp, c->arg);
		}
		call_free(c);
	}
	pumping = 0;
}

/* Only marks the call: it may be running curl's callbacks right now (an
 * on_data that cancels), and curl forbids removing a handle from there. */
void
http_cancel(struct http_call *c)
{
	if (c == NULL || c->cancelled || c->delivering)
		return;
	c->cancelled = 1;
	reap_needed = 1;
	ninflight--;
	event_active(pump_ev, EV_TIMEOUT, 0);
}

const char *
http_header(const struct http_response *r, const char *name)
{
	for (size_t i = 0; i < r->nheaders; i++)
		if (strcasecmp(r->headers[i].name, name) == 0)
			return r->headers[i].value;
	return NULL;
}

size_t
http_inflight(void)
{
	return ninflight;
}

void
http_set_addr_filter(int (*ok)(const struct sockaddr *, unsigned int))
{
	addr_ok = ok;
}

/* Calls still in flight are dropped without their callbacks: their owners
 * are shutting down too. Must run before loop_free, which frees the base
 * these events live on. */
void
http_shutdown(void)
{
	struct http_call *c;
	struct sockinfo *si;

	while ((c = TAILQ_FIRST(&active)) != NULL) {
		TAILQ_REMOVE(&active, c, entry);
		curl_multi_remove_handle(multi, c->easy);
		call_free(c);
	}
	while ((c = TAILQ_FIRST(&done)) != NULL) {
		TAILQ_REMOVE(&done, c, entry);
		call_free(c);
	}
	if (multi != NULL)
		curl_multi_cleanup(multi);
	multi = NULL;
	if (curl_ready)
		curl_global_cleanup();
	curl_ready = 0;
	while ((si = LIST_FIRST(&socks)) != NULL)
		sock_free(si);
	if (timer_ev != NULL)
		event_free(timer_ev);
	if (pump_ev != NULL)
		event_free(pump_ev);
	timer_ev = pump_ev = NULL;
	free(sys_capath);
	sys_capath = NULL;
	ninflight = 0;
}
