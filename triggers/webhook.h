/* The webhook trigger's pure parts: the signature and token checks and the
 * prompt rendering. They touch neither the loop nor the engine, so the unit
 * test links them alone (webhook_util.c). The HTTP side the webhook and
 * GitHub triggers share is in wh_http.c (at the end of this file); each
 * trigger's own is in webhook.c and github.c. */
#ifndef AF_WEBHOOK_H
#define AF_WEBHOOK_H

#include <stddef.h>

#include "httpd.h"

#define WH_MAX_BODY		(1 << 20)	/* larger bodies get 413 */
#define WH_MAX_HEADERS		(16 << 10)	/* larger header blocks get 400 */
#define WH_MAX_PROMPT		(4 << 20)	/* rendered prompt; beyond: 413 */
#define WH_TIMEOUT_S		10		/* idle read/write, per connection */
#define WH_REQUEST_S		20		/* first byte to whole request */
#define WH_SHA256_LEN		32
#define WH_SIG_HEADER		"X-Hub-Signature-256"
#define WH_SIG_PREFIX		"sha256="

/* What wh_verify_signature found. */
#define WH_SIG_OK		0
#define WH_SIG_MISSING		1	/* no header */
#define WH_SIG_MALFORMED	2	/* not "sha256=" and 64 hex digits */
#define WH_SIG_MISMATCH		3	/* well formed, wrong value */
#define WH_SIG_ERROR		4	/* the HMAC could not be computed */

/* HMAC-SHA256 of data under key; 0, or -1 when the library fails. */
int wh_hmac_sha256(const void *key, size_t keylen, const void *data,
    size_t len, unsigned char out[WH_SHA256_LEN]);

/*
 * Check an X-Hub-Signature-256 value (header may be NULL) against the
 * HMAC-SHA256 of the raw body under secret. The value must be "sha256="
 * followed by exactly 64 hex digits (either case); the digests are compared
 * in constant time. Returns one of WH_SIG_*.
 */
int wh_verify_signature(const char *secret, const void *body, size_t len,
    const char *header);
/* A short, fixed reason for a WH_SIG_* value (for the 401 and the audit). */
const char *wh_sig_reason(int);

/*
 * Render the configured prompt template: every "{{body}}" is replaced by the
 * body as text. The body is data: it is inserted once per occurrence and never
 * scanned for templates itself. Invalid UTF-8 and NUL bytes in the body become
 * U+FFFD, one per bad byte. Returns an allocated string the caller frees, or
 * NULL with errno E2BIG when the result would exceed WH_MAX_PROMPT bytes.
 */
char *wh_render(const char *tmpl, const void *body, size_t len);

/* A template variable: every "{{NAME}}" becomes the value (cleaned as the
 * body is). */
struct wh_var {
	const char	*name;		/* "body", "event", ... */
	const void	*value;
	size_t		 len;
};

/* wh_render with several variables, each inserted as data (never scanned
 * for templates). NULL with errno E2BIG past WH_MAX_PROMPT bytes. */
char *wh_render_vars(const char *tmpl, const struct wh_var *, size_t n);

/* What wh_check_bearer found. */
#define WH_AUTH_OK		0
#define WH_AUTH_MISSING		1	/* no Authorization header */
#define WH_AUTH_MALFORMED	2	/* not "Bearer TOKEN" */
#define WH_AUTH_MISMATCH	3	/* another token */

/* Check an Authorization header value (may be NULL) against token, in
 * constant time. Returns one of WH_AUTH_*. */
int wh_check_bearer(const char *token, const char *header);
const char *wh_auth_reason(int);

/* Append body to out as valid UTF-8 without NUL bytes (as wh_render does). */
struct buf;
void wh_utf8_sanitize(struct buf *out, const void *body, size_t len);

/* The shared HTTP side (wh_http.c). */
struct cJSON;
struct cfg_listen;
struct evhttp;
struct evhttp_bound_socket;
struct evhttp_request;
struct loop_timer;

/* One listener with evhttp's limits (WH_MAX_BODY, WH_MAX_HEADERS,
 * WH_TIMEOUT_S) set. */
struct wh_server {
	const char			*name;		/* "webhook": logs */
	struct evhttp			*http;
	struct httpd			 httpd;	/* limits and deadlines */
	struct evhttp_bound_socket	*sock;
	struct loop_timer		*resume;
	char				 where[300];	/* HOST:PORT */
	int				 stopping;
};

/* Bind (before the sandbox) and log "NAME listening on HOST:PORT"; cb gets
 * the server as its argument. Connections wait until wh_server_start. */
int wh_server_bind(struct wh_server *, const char *name,
    const struct cfg_listen *, void (*cb)(struct evhttp_request *, void *),
    char *err, size_t errlen);
int wh_server_start(struct wh_server *, char *err, size_t errlen);
void wh_server_stop(struct wh_server *);
void wh_server_free(struct wh_server *);

/* Path (exact), method (POST) and stopping (503): 0 to go on, -1 when the
 * request was answered. */
int wh_precheck(struct wh_server *, struct evhttp_request *,
    const char *path);
/* Send obj as the JSON body; obj is freed. */
void wh_reply_json(struct evhttp_request *, int code, const char *phrase,
    struct cJSON *obj);
void wh_reply_error(struct evhttp_request *, int code, const char *phrase,
    const char *msg);
void wh_set_retry_after(struct evhttp_request *, int secs);
/* The answer to an event run_submit refused (its errno): 429, 503, 500. */
void wh_reply_refused(struct evhttp_request *, int err);
const char *wh_peer(struct evhttp_request *);
/* A webhook_refused audit record (with "trigger" unless it is the
 * webhook). */
void wh_audit_refusal(const char *trigger, struct evhttp_request *, int code,
    const char *reason);

#endif
