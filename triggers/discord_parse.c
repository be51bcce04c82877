/* The Discord trigger's pure helpers (see discord.h): the gateway payload
 * parser, which keeps snowflakes as the exact strings Discord sent, the
 * payloads af sends, and the reply splitter. No loop, no engine, no
 * libwebsockets, so the fuzzer links this file alone. */
#include "triggers/discord.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define DC_SEQ_MAX		9007199254740992.0	/* 2^53: exact in JSON */
#define DC_HB_MIN_MS		100	/* a heartbeat interval below this is
					   clamped: a peer cannot make af spin */
#define DC_HB_MAX_MS		(60L * 60 * 1000)
#define DC_WAIT_MAX_MS		(24L * 60 * 60 * 1000)
#define DC_MENTIONS_MAX		100
#define DC_COUNT_MAX		1e9	/* session starts, shards */
#define DC_CUT_NOTE		"\n[The reply was cut here: it was too long " \
				"to send.]"

static const cJSON *
get(const cJSON *o, const char *name)
{
	return cJSON_GetObjectItemCaseSensitive(o, name);
}

int
dc_snowflake_ok(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= 20 && strspn(s, "0123456789") == n;
}

int
dc_id_copy(const char *s, char *out, size_t outlen)
{
	if (!dc_snowflake_ok(s) || strlen(s) >= outlen)
		return -1;
	memcpy(out, s, strlen(s) + 1);
	return 0;
}

/* Copy a snowflake field; -1 when absent or not a snowflake string. */
static int
get_id(const cJSON *o, const char *name, char *out)
{
	const cJSON *v = get(o, name);

	return cJSON_IsString(v) ? dc_id_copy(v->valuestring, out, DC_ID_MAX) :
	    -1;
}

/* A string that must fit whole: -1 when absent, empty or too long. */
static int
get_str(const cJSON *o, const char *name, char *out, size_t outlen)
{
	const cJSON *v = get(o, name);
	size_t n;

	if (!cJSON_IsString(v))
		return -1;
	n = strlen(v->valuestring);
	if (n == 0 || n >= outlen)
		return -1;
	memcpy(out, v->valuestring, n + 1);
	return 0;
}

/* An exact integer in [min, max]. */
static int
get_int(const cJSON *v, double min, double max, double *out)
{
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) ||
	    v->valuedouble != floor(v->valuedouble) || v->valuedouble < min ||
	    v->valuedouble > max)
		return -1;
	*out = v->valuedouble;
	return 0;
}

static int
parse_hello(const cJSON *d, struct dc_frame *f)
{
	const cJSON *v = get(d, "heartbeat_interval");

	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) ||
	    v->valuedouble <= 0)
		return -1;
	if (v->valuedouble < DC_HB_MIN_MS)
		f->heartbeat_interval = DC_HB_MIN_MS;
	else if (v->valuedouble > DC_HB_MAX_MS)
		f->heartbeat_interval = DC_HB_MAX_MS;
	else
		f->heartbeat_interval = (long)v->valuedouble;
	return 0;
}

static int
parse_ready(const cJSON *d, struct dc_frame *f)
{
	if (get_str(d, "session_id", f->session_id, sizeof(f->session_id)) ==
	    -1 || get_id(get(d, "user"), "id", f->user_id) == -1)
		return -1;
	/* Without a usable resume URL af resumes at the configured one. */
	if (get_str(d, "resume_gateway_url", f->resume_url,
	    sizeof(f->resume_url)) == -1)
		f->resume_url[0] = '\0';
	return 0;
}

static int
parse_message(const cJSON *d, struct dc_message *m)
{
	const cJSON *author = get(d, "author"), *v, *u;
	double type;
	size_t n = 0;

	if (get_id(d, "id", m->id) == -1 ||
	    get_id(d, "channel_id", m->channel_id) == -1 ||
	    get_id(author, "id", m->author_id) == -1)
		return -1;
	v = get(d, "guild_id");
	if (v != NULL && !cJSON_IsNull(v) && get_id(d, "guild_id",
	    m->guild_id) == -1)
		return -1;
	/* A webhook's message has an author too, but no person behind it:
	 * answering one could start a loop between two automations. */
	m->author_bot = cJSON_IsTrue(get(author, "bot")) ||
	    (get(d, "webhook_id") != NULL && !cJSON_IsNull(get(d,
	    "webhook_id")));
	v = get(d, "type");
	m->type = get_int(v, 0, 1000, &type) == 0 ? (int)type : 0;
	v = get(d, "content");
	m->content = xstrdup(cJSON_IsString(v) ? v->valuestring : "");
	cJSON_ArrayForEach(u, get(d, "mentions")) {
		char id[DC_ID_MAX];

		if (n++ >= DC_MENTIONS_MAX)
			break;
		if (get_id(u, "id", id) == 0)
			strlist_add(&m->mentions, id);
	}
	return 0;
}

static int
parse_dispatch(const cJSON *d, struct dc_frame *f)
{
	if (strcmp(f->t, "READY") == 0)
		return parse_ready(d, f);
	if (strcmp(f->t, "MESSAGE_CREATE") == 0) {
		f->has_message = 1;
		return parse_message(d, &f->msg);
	}
	return 0;
}

/* Gateway frames and REST replies alike: nothing over DC_FRAME_MAX is
 * parsed. */
static cJSON *
parse_bounded(const char *json, size_t len)
{
	return len > DC_FRAME_MAX ? NULL : cJSON_ParseWithLength(json, len);
}

int
dc_parse_frame(const char *json, size_t len, struct dc_frame *f)
{
	const cJSON *d, *t;
	cJSON *root;
	double v;
	int rc = -1;

	memset(f, 0, sizeof(*f));
	f->seq = -1;
	if ((root = parse_bounded(json, len)) == NULL)
		return -1;
	if (!cJSON_IsObject(root) || get_int(get(root, "op"), 0, 255, &v) ==
	    -1)
		goto out;
	f->op = (int)v;
	if (get_int(get(root, "s"), 0, DC_SEQ_MAX, &v) == 0)
		f->seq = (int64_t)v;
	t = get(root, "t");
	if (cJSON_IsString(t) && strlen(t->valuestring) < sizeof(f->t))
		snprintf(f->t, sizeof(f->t), "%s", t->valuestring);
	d = get(root, "d");
	switch (f->op) {
	case DC_OP_HELLO:
		rc = parse_hello(d, f);
		break;
	case DC_OP_INVALID_SESSION:
		f->resumable = cJSON_IsTrue(d);
		rc = 0;
		break;
	case DC_OP_DISPATCH:
		rc = parse_dispatch(d, f);
		break;
	default:
		rc = 0;
	}
out:
	cJSON_Delete(root);
	return rc;
}

void
dc_frame_free(struct dc_frame *f)
{
	free(f->msg.content);
	f->msg.content = NULL;
	strlist_free(&f->msg.mentions);
}

static char *
print_free(cJSON *o)
{
	char *s = cJSON_PrintUnformatted(o), *copy;

	if (s == NULL)
		fatalx("discord: out of memory");
	cJSON_Delete(o);
	copy = xstrdup(s);
	cJSON_free(s);
	return copy;
}

/* Integers go out as raw text: cJSON would print them through a double. */
static cJSON *
raw_int(int64_t v)
{
	char s[32];

	snprintf(s, sizeof(s), "%lld", (long long)v);
	return cJSON_CreateRaw(s);
}

char *
dc_identify_json(const char *token, long intents)
{
	cJSON *o = cJSON_CreateObject(), *d, *p;

	cJSON_AddNumberToObject(o, "op", DC_OP_IDENTIFY);
	d = cJSON_AddObjectToObject(o, "d");
	cJSON_AddStringToObject(d, "token", token);
	cJSON_AddItemToObject(d, "intents", raw_int(intents));
	p = cJSON_AddObjectToObject(d, "properties");
	cJSON_AddStringToObject(p, "os", "linux");
	cJSON_AddStringToObject(p, "browser", "af");
	cJSON_AddStringToObject(p, "device", "af");
	return print_free(o);
}

char *
dc_resume_json(const char *token, const char *session_id, int64_t seq)
{
	cJSON *o = cJSON_CreateObject(), *d;

	cJSON_AddNumberToObject(o, "op", DC_OP_RESUME);
	d = cJSON_AddObjectToObject(o, "d");
	cJSON_AddStringToObject(d, "token", token);
	cJSON_AddStringToObject(d, "session_id", session_id);
	cJSON_AddItemToObject(d, "seq", raw_int(seq < 0 ? 0 : seq));
	return print_free(o);
}

char *
dc_heartbeat_json(int64_t seq)
{
	if (seq < 0)
		return xstrdup("{\"op\":1,\"d\":null}");
	return xasprintf("{\"op\":1,\"d\":%lld}", (long long)seq);
}

char *
dc_message_json(const char *content, const char *reply_to)
{
	cJSON *o = cJSON_CreateObject(), *am, *ref;

	cJSON_AddStringToObject(o, "content", content);
	/* Nothing the model writes pings anyone: not @everyone, @here, a
	 * role or a user. */
	am = cJSON_AddObjectToObject(o, "allowed_mentions");
	cJSON_AddItemToObject(am, "parse", cJSON_CreateArray());
	if (reply_to != NULL) {
		ref = cJSON_AddObjectToObject(o, "message_reference");
		cJSON_AddStringToObject(ref, "message_id", reply_to);
		/* The question may be deleted by then: answer anyway. */
		cJSON_AddFalseToObject(ref, "fail_if_not_exists");
	}
	return print_free(o);
}

enum dc_close_action
dc_close_action(int code)
{
	switch (code) {
	case 4004:	/* authentication failed */
	case 4010:	/* invalid shard */
	case 4011:	/* sharding required */
	case 4012:	/* invalid API version */
	case 4013:	/* invalid intents */
	case 4014:	/* disallowed intents */
		return DC_CLOSE_FATAL;
	case 4007:	/* invalid seq */
	case 4009:	/* session timed out */
		return DC_CLOSE_REIDENTIFY;
	default:
		return DC_CLOSE_RESUME;
	}
}

const char *
dc_close_text(int code)
{
	switch (code) {
	case 0:
		return "the connection dropped without a close frame";
	case 4000:
		return "unknown error (4000)";
	case 4001:
		return "unknown opcode (4001)";
	case 4002:
		return "decode error (4002)";
	case 4003:
		return "not authenticated (4003)";
	case 4004:
		return "authentication failed (4004): the bot token is wrong "
		    "or was reset";
	case 4005:
		return "already authenticated (4005)";
	case 4007:
		return "invalid sequence on resume (4007)";
	case 4008:
		return "rate limited (4008)";
	case 4009:
		return "session timed out (4009)";
	case 4010:
		return "invalid shard (4010)";
	case 4011:
		return "sharding required (4011): the bot is in too many "
		    "guilds for one connection";
	case 4012:
		return "invalid API version (4012): the gateway URL must ask "
		    "for v=10";
	case 4013:
		return "invalid intents (4013)";
	case 4014:
		return "disallowed intents (4014): enable the Message Content "
		    "intent in the bot's settings";
	default:
		return "closed by the gateway";
	}
}

/* A wait Discord asked for, in ms: whole ms up, at most DC_WAIT_MAX_MS;
 * -1 for NaN or a negative one. */
static long
wait_ms(double ms)
{
	if (isnan(ms) || ms < 0)
		return -1;
	ms = ceil(ms);
	return ms > (double)DC_WAIT_MAX_MS ? DC_WAIT_MAX_MS : (long)ms;
}

static long
seconds_to_ms(double s)
{
	return isfinite(s) ? wait_ms(s * 1000.0) : -1;
}

int
dc_parse_429(const char *json, size_t len, long *ms, int *global)
{
	const cJSON *ra;
	cJSON *root;
	int rc = -1;

	*ms = -1;
	*global = 0;
	if ((root = cJSON_ParseWithLength(json, len)) == NULL)
		return -1;
	ra = get(root, "retry_after");
	if (cJSON_IsObject(root) && cJSON_IsNumber(ra) &&
	    (*ms = seconds_to_ms(ra->valuedouble)) >= 0) {
		*global = cJSON_IsTrue(get(root, "global"));
		rc = 0;
	}
	cJSON_Delete(root);
	return rc;
}

long
dc_seconds_ms(const char *s)
{
	char *end;
	double v;

	if (s == NULL || !(isdigit((unsigned char)*s) || *s == '.'))
		return -1;
	v = strtod(s, &end);
	if (end == s || *end != '\0')
		return -1;
	return seconds_to_ms(v);
}

int
dc_parse_gateway_bot(const char *json, size_t len, struct dc_gateway_bot *g)
{
	const cJSON *lim, *ra;
	cJSON *root;
	double v;
	int rc = -1;

	memset(g, 0, sizeof(*g));
	g->max_concurrency = 1;
	if ((root = parse_bounded(json, len)) == NULL)
		return -1;
	lim = get(root, "session_start_limit");
	ra = get(lim, "reset_after");
	if (!cJSON_IsObject(root) || !cJSON_IsObject(lim) ||
	    get_int(get(lim, "remaining"), 0, DC_COUNT_MAX, &v) == -1 ||
	    !cJSON_IsNumber(ra))
		goto out;
	g->remaining = (long)v;
	if (!isfinite(ra->valuedouble) ||
	    (g->reset_after = wait_ms(ra->valuedouble)) == -1)
		goto out;
	if (get_int(get(lim, "total"), 0, DC_COUNT_MAX, &v) == 0)
		g->total = (long)v;
	if (get_int(get(lim, "max_concurrency"), 1, DC_COUNT_MAX, &v) == 0)
		g->max_concurrency = (long)v;
	if (get_int(get(root, "shards"), 0, DC_COUNT_MAX, &v) == 0)
		g->shards = (long)v;
	if (get_str(root, "url", g->url, sizeof(g->url)) == -1)
		g->url[0] = '\0';
	rc = 0;
out:
	cJSON_Delete(root);
	return rc;
}

int
dc_gateway_pick(const char *configured, const char *returned,
    struct dc_url *out)
{
	struct dc_url conf, u;

	if (dc_url_split(configured, &conf) == -1)
		return -1;
	*out = conf;
	if (strcmp(configured, DC_GATEWAY_DEFAULT) != 0 || returned == NULL ||
	    dc_url_split(returned, &u) == -1)
		return 0;
	if (!u.tls || u.port != conf.port || strcmp(u.path, "/") != 0)
		return 0;
	memcpy(u.path, conf.path, sizeof(u.path));
	*out = u;
	return 1;
}

/* ---- UTF-8 and the splitter ---- */

/* Length of the valid UTF-8 sequence at s (RFC 3629), or 0 when invalid. */
static size_t
utf8_seq(const unsigned char *s, size_t n)
{
	size_t k;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		k = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		k = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		k = 4;
		cp = s[0] & 0x07;
	} else
		return 0;
	if (k > n)
		return 0;
	for (size_t j = 1; j < k; j++) {
		if ((s[j] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[j] & 0x3f);
	}
	if ((k == 2 && cp < 0x80) || (k == 3 && cp < 0x800) ||
	    (k == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return k;
}

static void
utf8_clean(const char *text, struct buf *out)
{
	const unsigned char *s = (const unsigned char *)text;
	size_t n = strlen(text), i = 0, k;

	while (i < n) {
		if ((k = utf8_seq(s + i, n - i)) == 0) {
			buf_adds(out, "\xef\xbf\xbd");
			i++;
		} else {
			buf_add(out, s + i, k);
			i += k;
		}
	}
}

/* In valid UTF-8 every byte but a continuation byte starts a character. */
size_t
dc_utf8_chars(const char *s, size_t n)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			c++;
	return c;
}

/* The byte offset after n characters from pos, or len. */
static size_t
advance(const char *s, size_t len, size_t pos, size_t n)
{
	while (pos < len && n > 0) {
		pos++;
		while (pos < len && ((unsigned char)s[pos] & 0xc0) == 0x80)
			pos++;
		n--;
	}
	return pos;
}

/* Where to end a part that may run from pos to end: after the last line
 * break, else the last space, in the part's second half; else at end. */
static size_t
best_cut(const char *s, size_t pos, size_t end, size_t half)
{
	const char *seps = "\n ";

	for (; *seps != '\0'; seps++)
		for (size_t i = end; i > half && i > pos; i--)
			if (s[i - 1] == *seps)
				return i;
	return end;
}

static int
blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isspace((unsigned char)s[i]))
			return 0;
	return 1;
}

static void
add_part(struct strlist *parts, const char *s, size_t n, const char *note)
{
	char *p;

	p = xasprintf("%.*s%s", (int)n, s, note != NULL ? note : "");
	strlist_add(parts, p);
	free(p);
}

void
dc_split(const char *text, size_t max_chars, size_t max_parts,
    struct strlist *parts)
{
	size_t note_chars = strlen(DC_CUT_NOTE), pos = 0, end, cut, n0;
	size_t budget;
	struct buf clean;

	if (max_chars == 0)
		max_chars = 1;
	if (max_parts == 0)
		return;
	buf_init(&clean);
	utf8_clean(text, &clean);
	n0 = parts->n;
	/* A stretch of only whitespace is skipped rather than sent, and
	 * does not use up a part. */
	while (pos < clean.len && parts->n - n0 < max_parts) {
		if (dc_utf8_chars(clean.data + pos, clean.len - pos) <=
		    max_chars) {
			if (!blank(clean.data + pos, clean.len - pos))
				add_part(parts, clean.data + pos,
				    clean.len - pos, NULL);
			break;
		}
		if (parts->n - n0 == max_parts - 1) {
			/* The last part says the rest was left out, if the
			 * note fits at all. */
			budget = max_chars > note_chars ? max_chars -
			    note_chars : max_chars;
			end = advance(clean.data, clean.len, pos, budget);
			if (blank(clean.data + pos, end - pos)) {
				pos = end;
				continue;
			}
			add_part(parts, clean.data + pos, end - pos,
			    budget < max_chars ? DC_CUT_NOTE : NULL);
			break;
		}
		end = advance(clean.data, clean.len, pos, max_chars);
		cut = best_cut(clean.data, pos, end, advance(clean.data,
		    clean.len, pos, max_chars / 2));
		if (!blank(clean.data + pos, cut - pos))
			add_part(parts, clean.data + pos, cut - pos, NULL);
		pos = cut;
	}
	buf_free(&clean);
}

char *
dc_prompt_text(const char *content, const char *bot_id)
{
	size_t idlen = bot_id != NULL ? strlen(bot_id) : 0, skip, n;
	struct buf b;
	const char *s = content, *start, *end;
	char *out;

	buf_init(&b);
	while (*s != '\0') {
		skip = 0;
		if (idlen > 0 && strncmp(s, "<@", 2) == 0) {
			n = s[2] == '!' ? 3 : 2;
			if (strncmp(s + n, bot_id, idlen) == 0 &&
			    s[n + idlen] == '>')
				skip = n + idlen + 1;
		}
		if (skip > 0)
			s += skip;
		else
			buf_addc(&b, *s++);
	}
	start = b.data != NULL ? b.data : "";
	while (isspace((unsigned char)*start))
		start++;
	end = start + strlen(start);
	while (end > start && isspace((unsigned char)end[-1]))
		end--;
	out = xstrndup(start, (size_t)(end - start));
	buf_free(&b);
	return out;
}

int
dc_url_split(const char *url, struct dc_url *u)
{
	const char *h, *he, *p;
	char *end;
	long port;
	size_t hl;

	memset(u, 0, sizeof(*u));
	if (strncasecmp(url, "wss://", 6) == 0) {
		u->tls = 1;
		h = url + 6;
	} else if (strncasecmp(url, "ws://", 5) == 0)
		h = url + 5;
	else
		return -1;
	if (*h == '[') {
		if ((he = strchr(h, ']')) == NULL)
			return -1;
		h++;
		p = he + 1;
	} else {
		he = h + strcspn(h, ":/?#");
		p = he;
	}
	hl = (size_t)(he - h);
	if (hl == 0 || hl >= sizeof(u->host))
		return -1;
	for (size_t i = 0; i < hl; i++)
		if ((unsigned char)h[i] <= ' ' || h[i] == '@' || h[i] == '\\')
			return -1;
	memcpy(u->host, h, hl);
	u->port = u->tls ? 443 : 80;
	if (*p == ':') {
		if (!isdigit((unsigned char)p[1]))
			return -1;
		port = strtol(p + 1, &end, 10);
		if (port < 1 || port > 65535)
			return -1;
		u->port = (int)port;
		p = end;
	}
	if (*p != '\0' && *p != '/' && *p != '?' && *p != '#')
		return -1;
	hl = strcspn(p, "#");
	for (size_t i = 0; i < hl; i++)
		if ((unsigned char)p[i] <= ' ' || p[i] == 0x7f)
			return -1;
	if (snprintf(u->path, sizeof(u->path), "%s%.*s", *p == '/' ? "" : "/",
	    (int)hl, p) >= (int)sizeof(u->path))
		return -1;
	return 0;
}
