/*
 * http_request: one HTTP request to a host the net axis granted, through the
 * shared libcurl multi handle (http_start), never blocking the loop. libcurl
 * follows no redirect; this tool follows up to HR_MAX_HOPS by hand, and every
 * hop is a new permission decision (tool_authorize), audited like the first.
 * What is fetched is always the URL the permission engine parsed and checked
 * (perm_url_format), never the model's text as such.
 *
 * Decisions (README):
 *  - Methods: GET, HEAD, POST, PUT, PATCH, DELETE. A body only with POST,
 *    PUT, PATCH and DELETE.
 *  - Headers the model may not set: Host, Content-Length, Transfer-Encoding,
 *    Connection, Keep-Alive, TE, Trailer, Upgrade, Expect and Proxy-*; names
 *    must be HTTP tokens, values free of control characters.
 *  - Redirects: 303 turns into GET (HEAD stays HEAD), as do 301 and 302 after
 *    a POST, as browsers do; 307 and 308 keep the method and the body. When a
 *    hop leaves the origin (scheme, host or port change), Authorization and
 *    Cookie headers are dropped. A denied hop ends the call with the denial.
 *  - The response body is kept up to 1 MiB (the tool output cap then applies);
 *    any HTTP status, 4xx and 5xx included, is an ordinary result: only a
 *    transport failure, a timeout or a denial is an error.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "http.h"
#include "tool.h"
#include "url.h"
#include "util.h"

#define HR_MAX_HOPS		5
#define HR_MAX_RESPONSE		(1 << 20)
#define HR_MAX_BODY		(1 << 20)	/* request body */
#define HR_MAX_HEADERS		64
#define HR_MAX_HEADER_NAME	256
#define HR_MAX_HEADER_VALUE	8192
#define HR_CONNECT_TIMEOUT_MS	10000
#define HR_URL_MAX		(URL_MAX + 512)

struct hr {
	struct tool_call	*tc;
	struct http_call	*call;
	const char		*method;	/* static */
	char			*url;		/* being fetched */
	struct perm_url		 cur;		/* hr->url as checked */
	struct kvlist		 hdrs;		/* the model's, as validated */
	char			**lines;	/* "Name: value", NULL-ended */
	const char		*body;		/* borrowed from the input */
	size_t			 bodylen;
	int			 send_body;
	int			 hops;
	int64_t			 deadline;	/* mono_ms */
	long			 timeout_ms;
};

static const char *const methods[] = {
	"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"
};

/* The transport is af's to decide (libcurl): a model setting these could
 * smuggle a second request or reach a proxy. */
static const char *const forbidden_headers[] = {
	"host", "content-length", "transfer-encoding", "connection",
	"keep-alive", "te", "trailer", "upgrade", "expect"
};

static int
hr_exists(const struct cfg *cfg)
{
	return cfg->perm.net.n > 0;
}

static void
free_lines(struct hr *hr)
{
	if (hr->lines != NULL) {
		for (char **p = hr->lines; *p != NULL; p++)
			free(*p);
		free(hr->lines);
		hr->lines = NULL;
	}
}

static void
hr_free(struct hr *hr)
{
	free_lines(hr);
	for (size_t i = 0; i < hr->hdrs.n; i++) {
		free(hr->hdrs.v[i].key);
		free(hr->hdrs.v[i].value);
	}
	free(hr->hdrs.v);
	free(hr->url);
	free(hr);
}

/* Detach from the call and hand it its result. */
static void
hr_done(struct hr *hr, const char *out, size_t len, int is_error)
{
	struct tool_call *tc = hr->tc;

	tc->priv = NULL;
	tc->cancel = NULL;
	hr_free(hr);
	tool_done(tc, out, len, is_error);
}

static void
hr_fail(struct hr *hr, const char *fmt, ...) AF_PRINTF(2, 3);

static void
hr_fail(struct hr *hr, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	hr_done(hr, msg, strlen(msg), 1);
}

static int
is_tchar(int c)
{
	return isalnum(c) || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) !=
	    NULL);
}

/* Check one header of the model's; NULL when it is fine, else why not. */
static const char *
header_problem(const char *name, const char *value)
{
	size_t nl = strlen(name);

	if (nl == 0 || nl > HR_MAX_HEADER_NAME)
		return "its name must be 1 to 256 characters";
	for (const char *p = name; *p != '\0'; p++)
		if (!is_tchar((unsigned char)*p))
			return "its name may hold only letters, digits and "
			    "!#$%&'*+-.^_`|~";
	for (size_t i = 0; i < nitems(forbidden_headers); i++)
		if (strcasecmp(name, forbidden_headers[i]) == 0)
			return "af sets it itself";
	if (strncasecmp(name, "proxy-", 6) == 0)
		return "proxy headers are not allowed";
	if (strlen(value) > HR_MAX_HEADER_VALUE)
		return "its value is longer than 8192 bytes";
	for (const char *p = value; *p != '\0'; p++) {
		unsigned char c = (unsigned char)*p;

		if (c == '\r' || c == '\n')
			return "its value contains CR or LF";
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return "its value contains control characters";
	}
	return NULL;
}

/* The header lines for libcurl. An empty value is written "Name;", libcurl's
 * way to send an empty header rather than drop one of its own. */
static void
build_lines(struct hr *hr, int cross_origin)
{
	size_t n = 0;

	free_lines(hr);
	hr->lines = xcalloc(hr->hdrs.n + 1, sizeof(*hr->lines));
	for (size_t i = 0; i < hr->hdrs.n; i++) {
		const char *k = hr->hdrs.v[i].key, *v = hr->hdrs.v[i].value;

		if (cross_origin && (strcasecmp(k, "authorization") == 0 ||
		    strcasecmp(k, "cookie") == 0))
			continue;
		if (!hr->send_body && strcasecmp(k, "content-type") == 0)
			continue;
		hr->lines[n++] = *v == '\0' ? xasprintf("%s;", k) :
		    xasprintf("%s: %s", k, v);
	}
	hr->lines[n] = NULL;
}

static void on_response(struct http_response *, void *);

/* Fetch hr->url; 0, or -1 after finishing the call with an error. */
static int
fetch(struct hr *hr)
{
	struct http_request req;
	int64_t left = hr->deadline - mono_ms();

	if (left <= 0) {
		hr_fail(hr, "http_request: timed out after %ld ms",
		    hr->timeout_ms);
		return -1;
	}
	memset(&req, 0, sizeof(req));
	req.method = hr->method;
	req.url = hr->url;
	req.headers = (const char *const *)hr->lines;
	if (hr->send_body) {
		req.body = hr->body;
		req.bodylen = hr->bodylen;
	}
	req.timeout_ms = (long)left;
	req.connect_timeout_ms = left < HR_CONNECT_TIMEOUT_MS ? (long)left :
	    HR_CONNECT_TIMEOUT_MS;
	req.max_response = HR_MAX_RESPONSE;
	req.unpinned = hr->cur.by_wildcard;
	if ((hr->call = http_start(&req, on_response, hr)) == NULL) {
		hr_fail(hr, "http_request: the request could not be started");
		return -1;
	}
	return 0;
}

/* Resolve a Location value against the URL it came from (RFC 3986 section
 * 5.2, by libcurl's URL API); NULL when it is not a usable URL. */
static char *
resolve_location(const char *base, const char *loc)
{
	CURLU *u;
	char *s = NULL, *out = NULL;

	if (strlen(loc) > URL_MAX || (u = curl_url()) == NULL)
		return NULL;
	if (curl_url_set(u, CURLUPART_URL, base, 0) == CURLUE_OK &&
	    curl_url_set(u, CURLUPART_URL, loc, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_URL, &s, 0) == CURLUE_OK) {
		out = xstrdup(s);
		curl_free(s);
	}
	curl_url_cleanup(u);
	return out;
}

static int
same_origin(const struct perm_url *a, const struct perm_url *b)
{
	return strcmp(a->scheme, b->scheme) == 0 &&
	    strcmp(a->host, b->host) == 0 && a->port == b->port;
}

/* Follow a redirect: authorize the next hop, adjust method and headers, go. */
static void
redirect(struct hr *hr, long status, const char *loc)
{
	struct perm_result res;
	char *next, fetch_url[HR_URL_MAX];
	int cross;

	if (hr->hops == HR_MAX_HOPS) {
		hr_fail(hr, "http_request: stopped after %d redirects (the "
		    "last pointed to %.300s)", HR_MAX_HOPS, loc);
		return;
	}
	if ((next = resolve_location(hr->url, loc)) == NULL) {
		hr_fail(hr, "http_request: HTTP %ld redirect to an invalid "
		    "Location \"%.300s\"", status, loc);
		return;
	}
	if (!tool_authorize(hr->tc, PERM_NET, next, &res)) {
		free(next);
		hr_fail(hr, "permission denied: %s (a redirect from %.300s)",
		    res.reason, hr->url);
		return;
	}
	if (perm_url_format(&res.url, next, fetch_url, sizeof(fetch_url)) ==
	    -1) {
		free(next);
		hr_fail(hr, "http_request: the redirect URL is too long");
		return;
	}
	free(next);
	cross = !same_origin(&hr->cur, &res.url);
	hr->cur = res.url;

	if (status == 303 && strcmp(hr->method, "HEAD") != 0) {
		hr->method = "GET";
		hr->send_body = 0;
	} else if ((status == 301 || status == 302) &&
	    strcmp(hr->method, "POST") == 0) {
		hr->method = "GET";
		hr->send_body = 0;
	}
	build_lines(hr, cross);
	free(hr->url);
	hr->url = xstrdup(fetch_url);
	hr->hops++;
	(void)fetch(hr);
}

static void
on_response(struct http_response *resp, void *arg)
{
	struct hr *hr = arg;
	const char *loc, *ct;
	struct buf out;
	long s = resp->status;
	int is_error = 0;

	hr->call = NULL;
	if (s == 0) {
		if (resp->curl_code == CURLE_OPERATION_TIMEDOUT)
			hr_fail(hr, "http_request: %s %.300s timed out after "
			    "%ld ms", hr->method, hr->url, hr->timeout_ms);
		else
			hr_fail(hr, "http_request: %s %.300s failed: %s",
			    hr->method, hr->url, resp->error[0] != '\0' ?
			    resp->error : curl_easy_strerror(
			    (CURLcode)resp->curl_code));
		return;
	}
	loc = http_header(resp, "location");
	if ((s == 301 || s == 302 || s == 303 || s == 307 || s == 308) &&
	    loc != NULL && *loc != '\0') {
		redirect(hr, s, loc);
		return;
	}

	buf_init(&out);
	buf_addf(&out, "HTTP %ld\n", s);
	if ((ct = http_header(resp, "content-type")) != NULL)
		buf_addf(&out, "content-type: %.512s\n", ct);
	if (loc != NULL)
		buf_addf(&out, "location: %.2048s\n", loc);
	if (hr->hops > 0)
		buf_addf(&out, "redirected %d time%s; final URL: %s\n",
		    hr->hops, hr->hops == 1 ? "" : "s", hr->url);
	/* Up here, where the output cap cannot cut it off. */
	if (resp->truncated)
		buf_addf(&out, "body truncated: only the first %d bytes were "
		    "received\n", HR_MAX_RESPONSE);
	else if (resp->curl_code != 0) {
		/* Headers came, the rest did not (a timeout mid-body). */
		buf_addf(&out, "transfer failed, the body is incomplete: "
		    "%.300s\n", resp->error[0] != '\0' ? resp->error :
		    curl_easy_strerror((CURLcode)resp->curl_code));
		is_error = 1;
	}
	buf_addc(&out, '\n');
	if (resp->body.len > 0)
		buf_add(&out, resp->body.data, resp->body.len);
	hr_done(hr, out.data, out.len, is_error);
	buf_free(&out);
}

static void
hr_cancel(struct tool_call *tc)
{
	struct hr *hr = tc->priv;

	if (hr == NULL)
		return;
	if (hr->call != NULL)
		http_cancel(hr->call);
	hr->call = NULL;
	hr_fail(hr, "http_request: cancelled");
}

/* Validate the input into hr; -1 with the reason in why. */
static int
parse_input(struct tool_call *tc, struct hr *hr, const char **url,
    char *why, size_t whylen)
{
	static const char *const fields[] = { "method", "url", "headers",
	    "body" };
	const cJSON *f[4], *it, *m, *u, *h, *b;
	const char *p;

	if (tool_pick(tc->input, fields, nitems(fields), f, why, whylen) == -1)
		return -1;
	m = f[0];
	u = f[1];
	h = f[2];
	b = f[3];
	if (!cJSON_IsString(m) || m->valuestring == NULL) {
		snprintf(why, whylen, "\"method\" must be a string");
		return -1;
	}
	for (size_t i = 0; i < nitems(methods) && hr->method == NULL; i++)
		if (strcasecmp(m->valuestring, methods[i]) == 0)
			hr->method = methods[i];
	if (hr->method == NULL) {
		snprintf(why, whylen, "\"method\" must be one of GET, HEAD, "
		    "POST, PUT, PATCH, DELETE");
		return -1;
	}
	if (!cJSON_IsString(u) || u->valuestring == NULL) {
		snprintf(why, whylen, "\"url\" must be a string");
		return -1;
	}
	*url = u->valuestring;
	if (h != NULL && !cJSON_IsNull(h)) {
		size_t n = 0;

		if (!cJSON_IsObject(h)) {
			snprintf(why, whylen, "\"headers\" must be an object of "
			    "strings");
			return -1;
		}
		cJSON_ArrayForEach(it, h)
			n++;
		if (n > HR_MAX_HEADERS) {
			snprintf(why, whylen, "at most %d headers",
			    HR_MAX_HEADERS);
			return -1;
		}
		hr->hdrs.v = xcalloc(n > 0 ? n : 1, sizeof(*hr->hdrs.v));
		cJSON_ArrayForEach(it, h) {
			const char *k = it->string != NULL ? it->string : "";

			if (!cJSON_IsString(it) || it->valuestring == NULL) {
				snprintf(why, whylen, "header \"%.64s\" must "
				    "have a string value", k);
				return -1;
			}
			if ((p = header_problem(k, it->valuestring)) != NULL) {
				snprintf(why, whylen, "header \"%.64s\" is "
				    "refused: %s", k, p);
				return -1;
			}
			hr->hdrs.v[hr->hdrs.n].key = xstrdup(k);
			hr->hdrs.v[hr->hdrs.n].value =
			    xstrdup(it->valuestring);
			hr->hdrs.n++;
		}
	}
	if (b != NULL && !cJSON_IsNull(b)) {
		if (!cJSON_IsString(b) || b->valuestring == NULL) {
			snprintf(why, whylen, "\"body\" must be a string");
			return -1;
		}
		if (strcmp(hr->method, "GET") == 0 ||
		    strcmp(hr->method, "HEAD") == 0) {
			snprintf(why, whylen, "a %s request takes no body",
			    hr->method);
			return -1;
		}
		hr->body = b->valuestring;
		if ((hr->bodylen = strlen(hr->body)) > HR_MAX_BODY) {
			snprintf(why, whylen, "\"body\" is larger than 1 MiB");
			return -1;
		}
		hr->send_body = 1;
	}
	return 0;
}

static void
hr_call(struct tool_call *tc)
{
	struct hr *hr = xcalloc(1, sizeof(*hr));
	char why[256], fetch_url[HR_URL_MAX];
	const char *url = NULL;

	hr->tc = tc;
	if (parse_input(tc, hr, &url, why, sizeof(why)) == -1) {
		hr_fail(hr, "http_request: %s", why);
		return;
	}
	if (!tc->perm.allowed ||
	    perm_url_format(&tc->perm.url, url, fetch_url,
	    sizeof(fetch_url)) == -1) {
		hr_fail(hr, "http_request: the URL was not authorized");
		return;
	}
	hr->url = xstrdup(fetch_url);
	hr->cur = tc->perm.url;
	/* The engine fills timeout_ms with the agent's tool timeout. */
	hr->timeout_ms = tc->timeout_ms > 0 ? tc->timeout_ms :
	    tc->cfg->limits.tool_timeout_ms > 0 ?
	    tc->cfg->limits.tool_timeout_ms : 60000;
	hr->deadline = mono_ms() + hr->timeout_ms;
	build_lines(hr, 0);
	tc->priv = hr;
	tc->cancel = hr_cancel;
	(void)fetch(hr);
}

const struct tool_def tool_http_request = {
	.name = "http_request",
	.description = "Make an HTTP request to a host the agent may reach. "
	    "Redirects are followed (up to 5), each checked again. Returns "
	    "the status, the content type and the body (capped).",
	.input_schema = "{\"type\":\"object\",\"properties\":{"
	    "\"method\":{\"type\":\"string\",\"enum\":[\"GET\",\"HEAD\","
	    "\"POST\",\"PUT\",\"PATCH\",\"DELETE\"]},"
	    "\"url\":{\"type\":\"string\",\"description\":\"http or https "
	    "URL\"},"
	    "\"headers\":{\"type\":\"object\",\"additionalProperties\":"
	    "{\"type\":\"string\"},\"description\":\"Request headers; Host, "
	    "Content-Length, Transfer-Encoding, Connection and Proxy-* are "
	    "set by af\"},"
	    "\"body\":{\"type\":\"string\",\"description\":\"Request body "
	    "(not for GET or HEAD)\"}},"
	    "\"required\":[\"method\",\"url\"],\"additionalProperties\":false}",
	.axis = PERM_NET,
	.target_key = "url",
	.exists = hr_exists,
	.call = hr_call,
};
