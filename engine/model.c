/* One model step over HTTP: build the request with the provider, send it, and
 * retry what the API says is passing (429, 5xx including Anthropic's 529,
 * transport failures) with exponential backoff and full jitter, honouring
 * retry-after. Everything runs on the loop; nothing blocks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loop.h"
#include "model.h"

struct model_call {
	const struct cfg_model	*cfg;		/* borrowed until the callback */
	const struct provider	*prov;
	char			*url;
	char			*body;
	size_t			 bodylen;
	char			**hdrv;		/* NULL-terminated; holds the key */
	size_t			 nhdr;
	model_cb		 cb;
	void			*arg;
	struct http_call	*http;		/* in flight, or NULL */
	struct loop_timer	*timer;		/* retry or delivery, or NULL */
	int			 in_cb;
	struct model_reply	 reply;
};

static void attempt(void *);

const struct provider *
model_provider(int provider)
{
	return provider == PROVIDER_OPENAI ? &provider_openai :
	    &provider_anthropic;
}

/* Error texts come from the API and from libcurl; either may quote what we
 * sent, and the key must never reach a log or the audit trail. */
static void
redact_key(const struct model_call *c, char *s)
{
	static const char mark[] = "[redacted]";
	const char *key = c->cfg->api_key;
	size_t kl, ml = sizeof(mark) - 1;
	char *p = s;

	if (key == NULL || (kl = strlen(key)) == 0)
		return;
	while ((p = strstr(p, key)) != NULL) {
		if (kl >= ml) {
			memcpy(p, mark, ml);
			memmove(p + ml, p + kl, strlen(p + kl) + 1);
			p += ml;
		} else {
			/* A key shorter than the mark: blank it in place. */
			memset(p, '*', kl);
			p += kl;
		}
	}
}

static void
call_free(struct model_call *c)
{
	size_t i;

	if (c->http != NULL)
		http_cancel(c->http);
	loop_timer_cancel(c->timer);
	for (i = 0; i < c->nhdr; i++) {
		explicit_bzero(c->hdrv[i], strlen(c->hdrv[i]));
		free(c->hdrv[i]);
	}
	free(c->hdrv);
	free(c->url);
	free(c->body);
	cJSON_Delete(c->reply.content);
	free(c);
}

static void
deliver(struct model_call *c)
{
	if (!c->reply.ok)
		redact_key(c, c->reply.error);
	c->in_cb = 1;
	c->cb(&c->reply, c->arg);
	c->in_cb = 0;
	call_free(c);
}

static void
deliver_cb(void *arg)
{
	struct model_call *c = arg;

	c->timer = NULL;
	deliver(c);
}

long
model_backoff(int n)
{
	long ceiling = MODEL_BACKOFF_BASE_MS;
	uint32_t r;

	while (n-- > 1 && ceiling < MODEL_BACKOFF_CAP_MS)
		ceiling *= 2;
	if (ceiling > MODEL_BACKOFF_CAP_MS)
		ceiling = MODEL_BACKOFF_CAP_MS;
	/* Full jitter: many runs hit by one overload must not come back in
	 * step. */
	random_bytes(&r, sizeof(r));
	return (long)(r % (uint32_t)(ceiling + 1));
}

long
model_retry_after(const char *v, int64_t now)
{
	struct tm tm;
	const char *end;
	char *e;
	double secs;
	int64_t at, ms;

	if (v == NULL)
		return -1;
	v += strspn(v, " \t");
	if (*v >= '0' && *v <= '9') {
		secs = strtod(v, &e);
		if (e == v || *(e + strspn(e, " \t\r\n")) != '\0' || secs < 0)
			return -1;
		ms = secs > MODEL_RETRY_AFTER_MAX_MS / 1000.0 ?
		    MODEL_RETRY_AFTER_MAX_MS : (int64_t)(secs * 1000);
		return (long)ms;
	}
	/* An HTTP date (IMF-fixdate), always in GMT. */
	memset(&tm, 0, sizeof(tm));
	end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (end == NULL || *(end + strspn(end, " \t\r\n")) != '\0')
		return -1;
	at = (int64_t)timegm(&tm) * 1000;
	ms = at - now;
	if (ms < 0)
		ms = 0;
	if (ms > MODEL_RETRY_AFTER_MAX_MS)
		ms = MODEL_RETRY_AFTER_MAX_MS;
	return (long)ms;
}

/* A transfer that broke (refused, reset, timed out, cut mid-body) is worth
 * another try, whatever status line came before the break. */
static int
retryable(const struct http_response *res)
{
	const char *h;

	if (res->curl_code != 0)
		return 1;
	/* Anthropic says outright when a retry is pointless. */
	h = http_header(res, "x-should-retry");
	if (h != NULL && strcmp(h, "false") == 0)
		return 0;
	if (h != NULL && strcmp(h, "true") == 0)
		return 1;
	return res->status == 429 || (res->status >= 500 && res->status <= 599);
}

static void
describe_failure(struct model_call *c, const struct http_response *res)
{
	char msg[400];

	if (res->curl_code != 0) {
		snprintf(c->reply.error, sizeof(c->reply.error),
		    "model API call failed: %s", res->error[0] != '\0' ?
		    res->error : "transport error");
		redact_key(c, c->reply.error);
		return;
	}
	model_error_text(res->body.data, res->body.len, msg, sizeof(msg));
	snprintf(c->reply.error, sizeof(c->reply.error), "model API HTTP %ld%s%s",
	    res->status, msg[0] != '\0' ? ": " : "", msg);
	redact_key(c, c->reply.error);
}

/* The delay before the next attempt: what the server asked for when it said,
 * else backoff. OpenAI's retry-after-ms is finer and wins. */
static long
next_delay(const struct model_call *c, const struct http_response *res)
{
	const char *h;
	long ms;

	if (res->curl_code == 0) {
		if ((h = http_header(res, "retry-after-ms")) != NULL) {
			char *e;
			long v = strtol(h, &e, 10);

			if (e != h && v >= 0)
				return v > MODEL_RETRY_AFTER_MAX_MS ?
				    MODEL_RETRY_AFTER_MAX_MS : v;
		}
		if ((ms = model_retry_after(http_header(res, "retry-after"),
		    now_ms())) >= 0)
			return ms;
	}
	return model_backoff(c->reply.attempts);
}

static void
on_http(struct http_response *res, void *arg)
{
	struct model_call *c = arg;
	long delay;

	c->http = NULL;
	c->reply.http_status = res->status;
	/* Too big is not passing: the same question gets the same answer. */
	if (res->truncated) {
		snprintf(c->reply.error, sizeof(c->reply.error),
		    "model reply larger than %d bytes", MODEL_MAX_RESPONSE);
		deliver(c);
		return;
	}
	if (res->status == 200 && res->curl_code == 0) {
		c->reply.error[0] = '\0';	/* an earlier attempt's */
		if (c->prov->parse(res->body.data, res->body.len,
		    &c->reply) == 0)
			c->reply.ok = 1;
		deliver(c);
		return;
	}
	describe_failure(c, res);
	if (!retryable(res) || c->reply.attempts >= MODEL_MAX_ATTEMPTS) {
		if (retryable(res))
			log_warnx("model: giving up after %d attempts: %s",
			    c->reply.attempts, c->reply.error);
		deliver(c);
		return;
	}
	delay = next_delay(c, res);
	log_info("model: %s; retry %d of %d in %ld ms", c->reply.error,
	    c->reply.attempts + 1, MODEL_MAX_ATTEMPTS, delay);
	c->timer = loop_timer_add(delay, attempt, c);
}

static void
attempt(void *arg)
{
	struct model_call *c = arg;
	struct http_request req;

	c->timer = NULL;
	c->reply.attempts++;
	memset(&req, 0, sizeof(req));
	req.method = "POST";
	req.url = c->url;
	req.headers = (const char *const *)c->hdrv;
	req.body = c->body;
	req.bodylen = c->bodylen;
	req.timeout_ms = c->cfg->timeout_ms;
	req.max_response = MODEL_MAX_RESPONSE;
	if ((c->http = http_start(&req, on_http, c)) != NULL)
		return;
	/* Could not even start (no memory in libcurl, a bad URL): say so and
	 * let the attempt count like a transport failure. */
	snprintf(c->reply.error, sizeof(c->reply.error),
	    "model API request could not be started");
	if (c->reply.attempts >= MODEL_MAX_ATTEMPTS) {
		c->timer = loop_timer_add(0, deliver_cb, c);
		return;
	}
	c->timer = loop_timer_add(model_backoff(c->reply.attempts), attempt, c);
}

static char *
join_url(const char *base, const char *path)
{
	size_t n = strlen(base);

	while (n > 0 && base[n - 1] == '/')
		n--;
	return xasprintf("%.*s%s", (int)n, base, path);
}

struct model_call *
model_send(const struct cfg_model *cfg, const char *system,
    const cJSON *messages, const cJSON *tools, model_cb cb, void *arg)
{
	struct model_call *c = xcalloc(1, sizeof(*c));
	struct strlist h = { NULL, 0 };
	char err[256];

	c->cfg = cfg;
	c->prov = model_provider(cfg->provider);
	c->cb = cb;
	c->arg = arg;
	snprintf(c->reply.stop, sizeof(c->reply.stop), "other");
	c->url = join_url(cfg->base_url != NULL ? cfg->base_url : "",
	    c->prov->path);
	c->prov->headers(cfg, &h);
	c->hdrv = xreallocarray(NULL, h.n + 1, sizeof(char *));
	memcpy(c->hdrv, h.v, h.n * sizeof(char *));
	c->hdrv[h.n] = NULL;
	c->nhdr = h.n;
	free(h.v);
	c->body = c->prov->request(cfg, system, messages, tools, err,
	    sizeof(err));
	/* Even a failure is reported through the callback, never from inside
	 * this call, so callers have one path. */
	if (c->body == NULL) {
		snprintf(c->reply.error, sizeof(c->reply.error),
		    "cannot build the model request: %s", err);
		c->timer = loop_timer_add(0, deliver_cb, c);
		return c;
	}
	c->bodylen = strlen(c->body);
	c->timer = loop_timer_add(0, attempt, c);
	return c;
}

void
model_cancel(struct model_call *c)
{
	/* From inside the callback the call is already finishing. */
	if (c == NULL || c->in_cb)
		return;
	call_free(c);
}

cJSON *
model_text_message(const char *role, const char *text)
{
	cJSON *m = cJSON_CreateObject(), *content = cJSON_CreateArray();
	cJSON *block = cJSON_CreateObject();

	cJSON_AddStringToObject(block, "type", "text");
	cJSON_AddStringToObject(block, "text", text);
	cJSON_AddItemToArray(content, block);
	cJSON_AddStringToObject(m, "role", role);
	cJSON_AddItemToObject(m, "content", content);
	return m;
}
