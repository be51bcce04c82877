/* Model providers. A conversation is kept in one neutral shape, Anthropic's
 * content blocks, as cJSON:
 *   {"role":"user","content":[{"type":"text","text":"..."}]}
 *   {"role":"assistant","content":[{"type":"text","text":"..."},
 *       {"type":"tool_use","id":"...","name":"...","input":{...}}]}
 *   {"role":"user","content":[{"type":"tool_result","tool_use_id":"...",
 *       "content":"...","is_error":true}]}
 * Tools are [{"name":..,"description":..,"input_schema":{..}}]. Each provider
 * file translates to and from its wire format; model.c does the HTTP call and
 * retries with backoff. The parsers and the reply checks live in the provider
 * files so a fuzzer links them without the loop or libcurl. */
#ifndef AF_MODEL_H
#define AF_MODEL_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "http.h"

#define MODEL_MAX_ATTEMPTS	5
#define MODEL_MAX_RESPONSE	(8 << 20)
#define MODEL_BACKOFF_BASE_MS	500
#define MODEL_BACKOFF_CAP_MS	30000
/* A retry-after longer than this is cut to it: a run must not sleep for an
 * hour on one header, and the attempts bound still ends it. */
#define MODEL_RETRY_AFTER_MAX_MS	60000
#define MODEL_MAX_ID		256	/* bytes of a tool_use id */
#define MODEL_MAX_BLOCKS	1024	/* content blocks (tool calls) a reply */
#define MODEL_ANTHROPIC_VERSION	"2023-06-01"

struct model_reply {
	int	 ok;		/* 0: error holds why; the run ends with it */
	char	 error[512];
	long	 http_status;	/* last HTTP status, 0 if none */
	cJSON	*content;	/* assistant content blocks (owned by the reply) */
	/* "end_turn", "tool_use", "max_tokens", "other". "tool_use" exactly
	 * when content holds at least one tool_use block. */
	char	 stop[32];
	long	 in_tokens;
	long	 out_tokens;
	int	 attempts;
};

typedef void (*model_cb)(struct model_reply *, void *arg);

struct model_call;

/* Send one step. cfg is borrowed until the callback; messages and tools are
 * serialized before this returns. The callback is never called from inside
 * model_send, and exactly once unless model_cancel comes first. The reply is
 * freed after the callback returns (steal content by setting it to NULL). */
struct model_call *model_send(const struct cfg_model *, const char *system,
    const cJSON *messages, const cJSON *tools, model_cb, void *arg);
/* Stop the call (request in flight or retry timer); its callback is not
 * called. NULL-safe; a no-op from inside the call's own callback. */
void model_cancel(struct model_call *);

/* The provider translations, exposed for tests and fuzzers. */
struct provider {
	const char	*name;
	/* Build the request body for one step; NULL (err filled) when the
	 * conversation cannot be expressed. Caller frees. */
	char		*(*request)(const struct cfg_model *, const char *system,
			    const cJSON *messages, const cJSON *tools,
			    char *err, size_t errlen);
	/* "Name: value" lines; the API key is in one of them. */
	void		 (*headers)(const struct cfg_model *, struct strlist *out);
	const char	*path;	/* appended to base_url */
	/* Parse a 200 body into the reply (content, stop, tokens); -1 with
	 * reply->error on garbage. reply->content is NULL on failure. */
	int		 (*parse)(const char *body, size_t len,
			    struct model_reply *);
};
extern const struct provider provider_anthropic;
extern const struct provider provider_openai;
const struct provider *model_provider(int provider);	/* enum cfg_provider */

/* One message of the neutral shape with a single text block. */
cJSON *model_text_message(const char *role, const char *text);

/* Error text from a non-200 body ({"error":{"message":..}} in both APIs,
 * {"error":"..."} from some local servers, else the printable start of the
 * body). Never fails; out is "" for an empty body. */
void model_error_text(const char *body, size_t len, char *out, size_t outlen);

/* Check neutral assistant content: every block well-formed, tool_use ids
 * non-empty, bounded and unique. */
int model_check_content(const cJSON *content, char *err, size_t errlen);
/* Mark a reply malformed ("malformed model reply: MSG"); returns -1. */
int model_reply_malformed(struct model_reply *, const char *msg);
/* JSON that must fill all of s[0..len), bar whitespace: a reply with junk
 * after its object is not the reply we think it is. */
cJSON *model_json_parse(const char *s, size_t len);
/* The common start of both parsers: r emptied, then the body as a JSON
 * object (the caller frees it), or NULL with r marked malformed. */
cJSON *model_reply_begin(const char *body, size_t len, struct model_reply *r);
/* An error the API put in a reply body: r->error says so; returns -1. */
int model_reply_api_error(const char *body, size_t len,
    struct model_reply *r);
/* The common end of both parsers: token counts from usage (absent counts 0),
 * model_check_content, and stop made consistent with the content. -1 with
 * reply->error and reply->content freed. */
int model_finish_reply(struct model_reply *, const cJSON *usage,
    const char *in_key, const char *out_key);

/* Delay asked for by a retry-after header value (delta-seconds or an HTTP
 * date), in ms, capped at MODEL_RETRY_AFTER_MAX_MS; -1 when unusable. */
long model_retry_after(const char *value, int64_t now_ms);
/* Full-jitter backoff before attempt n+1 (n >= 1 attempts made so far). */
long model_backoff(int n);

#endif
