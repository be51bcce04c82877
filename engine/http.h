/* Outbound HTTP: every request af makes (model APIs, Telegram, Discord REST,
 * http_request, MCP) goes through one libcurl multi handle driven by the loop
 * (curl's multi-event pattern). Nothing blocks. */
#ifndef AF_HTTP_H
#define AF_HTTP_H

#include <stddef.h>

#include "util.h"

#define HTTP_MAX_RESPONSE_DEFAULT	(8 << 20)

struct http_header {
	char	*name;
	char	*value;
};

struct http_response {
	long			 status;	/* 0 when no response arrived */
	int			 curl_code;	/* CURLcode; 0 on transport success */
	char			 error[256];	/* transport error text, or "" */
	/* The body hit max_response: it holds the first max_response
	 * bytes, the transfer was stopped, curl_code is CURLE_WRITE_ERROR
	 * and error says why. */
	int			 truncated;
	struct buf		 body;
	struct http_header	*headers;	/* of the last response only,
						 * names and values trimmed */
	size_t			 nheaders;
	char			*effective_url;
};

/* http_start copies what it needs: nothing here must outlive the call. */
struct http_request {
	const char	*method;	/* "GET", "POST", ... */
	const char	*url;
	const char	*const *headers;	/* "Name: value", NULL-terminated */
	const void	*body;
	size_t		 bodylen;
	long		 timeout_ms;	/* whole transfer; 0: none */
	long		 connect_timeout_ms;	/* 0: 30 s */
	size_t		 max_response;	/* 0: HTTP_MAX_RESPONSE_DEFAULT */
	/* Streaming (SSE, long polls): called for each chunk as it arrives, when
	 * set; the body is then not accumulated. Return -1 to abort. arg is
	 * http_start's. Only a 2xx body streams: any other status's body is
	 * collected in body for the callback. max_response bounds the bytes
	 * streamed too. No compressed encoding is asked for or decoded. */
	int		(*on_data)(const char *, size_t, void *arg);
	/* Optional: a CA file added to the system trust (tests, private CAs).
	 * TLS is always verified. */
	const char	*ca_file;
	/* The host was granted by a "*." pattern: the hermetic pin has no
	 * addresses for it and lets it pass (Landlock's ports still hold). */
	int		 unpinned;
};

/* Called once on the loop thread with the outcome (unless cancelled); the
 * response and the call are freed after the callback returns. */
typedef void (*http_cb)(struct http_response *, void *arg);

struct http_call;

/* After loop_init. */
int http_init(void);
/* Drops calls in flight without their callbacks; before loop_free. */
void http_shutdown(void);
/* Start a request; redirects are never followed (callers that follow them
 * re-check each hop with the permission engine). Loop thread only. Never
 * NULL: a bad method, header or URL is reported through the callback, which
 * never runs before http_start returns. */
struct http_call *http_start(const struct http_request *, http_cb, void *arg);
/* Cancel a call in flight: its callback is not called. Safe from any
 * callback, this call's own included (a no-op there); the handle is invalid
 * once its callback has returned. NULL-safe. */
void http_cancel(struct http_call *);
/* Case-insensitive header lookup in a response: the first match, or NULL. */
const char *http_header(const struct http_response *, const char *name);
/* Calls in flight (status, tests). */
size_t http_inflight(void);

/* Hermetic mode pins connections: when set, every socket libcurl opens must
 * pass this check (CURLOPT_OPENSOCKETFUNCTION), which returns nonzero to
 * allow. A refused address fails the call with an error naming the address
 * and "refused by the hermetic pin". NULL removes the filter. */
struct sockaddr;
void http_set_addr_filter(int (*ok)(const struct sockaddr *, unsigned int len));

#endif
