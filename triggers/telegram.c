/*
 * The Telegram trigger (SPEC section 2): long polling of getUpdates through
 * the loop's HTTP client; each text message from an allowed chat becomes a
 * run in the chat's own conversation, and the run's outcome goes back as a
 * reply with sendMessage.
 *
 * Each update is taken once, across restarts and crashes: its event is
 * journaled by run_submit (committed) and only then is the offset past it
 * committed. The one gap, a crash between the two commits, is closed at
 * start: an event still pending in the journal carries its update_id, and
 * the offset starts past it. An update the engine refuses (queue full) is
 * not passed: the Bot API keeps it and the next poll brings it back.
 *
 * Before the first poll the trigger asks getMe for the bot's username: in a
 * group, "/reset@OtherBot" reaches every bot there, and only a command that
 * names this bot (or none) is ours. No update is taken before the name is
 * known, so none is misjudged.
 *
 * The bot token is part of every Bot API URL, so no URL is ever logged, and
 * transport errors are scrubbed of the token before they go anywhere.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "audit/audit.h"
#include "command.h"
#include "config.h"
#include "http.h"
#include "loop.h"
#include "run.h"
#include "state.h"
#include "trigger.h"
#include "triggers/chatq.h"
#include "triggers/telegram.h"
#include "util.h"

#define TG_NAME			"telegram"
#define TG_CURSOR		"telegram.offset"
#define TG_POLL_TIMEOUT_S	50	/* getUpdates long poll */
#define TG_POLL_SLACK_MS	15000	/* HTTP timeout beyond the long poll */
#define TG_POLL_MIN_GAP_MS	1000	/* after a long poll that brought nothing */
#define TG_CONNECT_TIMEOUT_MS	10000
#define TG_SEND_TIMEOUT_MS	30000
#define TG_BACKOFF_MIN_MS	1000
#define TG_BACKOFF_MAX_MS	60000
#define TG_STALL_MAX_MS		30000	/* retrying a refused update */
#define TG_CONFLICT_RETRY_MS	30000
#define TG_CONFLICT_DOWN_AFTER	4	/* 409s in a row before "down" */
#define TG_RETRY_AFTER_DEFAULT	5	/* seconds, when a 429 gives none */
#define TG_RETRY_AFTER_MIN	1	/* seconds: never a tight retry loop */
#define TG_SEND_ATTEMPTS	5	/* per message */
#define TG_SEND_RESPONSE_MAX	(1 << 20)
#define TG_TYPING_EVERY_MS	4500	/* Telegram clears it after 5 s */
#define TG_CHAT_QUEUE_MAX	(4 * TG_MAX_PARTS)	/* messages per chat */
#define TG_TOKEN_MAX		256
#define TG_ME_RESPONSE_MAX	(64 << 10)
#define TG_USERNAME_MAX		32	/* Telegram allows 5 to 32 characters */

static const char *const tg_json_headers[] = {
	"Content-Type: application/json", NULL
};

_Static_assert(TG_ID_MAX <= CHATQ_ID_MAX, "a chat id fits a chatq id");

/* What became of one update, or of a whole batch. */
enum tg_step {
	TG_DONE,	/* handled, offset committed past it */
	TG_STALL,	/* refused for now: poll again later from here */
	TG_FATAL,	/* the offset cannot be kept: stop polling */
	TG_STOP		/* af is stopping */
};

static struct {
	const struct cfg	*cfg;
	const char		*token;		/* the config's; never logged */
	char			*url_me;	/* these hold the token */
	char			*url_updates;
	char			*url_send;
	char			*url_action;
	char			 username[TG_USERNAME_MAX + 1]; /* "" until getMe */
	int64_t			 offset;
	long			 limit;
	struct http_call	*poll;
	struct loop_timer	*poll_timer;
	long			 backoff;
	long			 stall;
	int			 conflicts;
	int			 stalled;
	int			 healthy;	/* the last poll succeeded */
	int			 waiting;	/* the poll in flight may be held */
	int64_t			 poll_since;	/* when it started (mono) */
	int			 stopped;
	int			 dead;
	struct chatq_table	 chats;	/* sendMessage JSON bodies */
	uint64_t		 received;
	uint64_t		 ignored;
	uint64_t		 refused;
	uint64_t		 sent;
	uint64_t		 send_failed;
} tg;

static void tg_poll(void *);
static void me_start(void);
static const struct chatq_def tg_chatq;

static int
tg_enabled(const struct cfg *cfg)
{
	return cfg->trig.telegram.enabled;
}

/* Copy s to out with every occurrence of the token replaced: curl's error
 * text could quote a URL one day, and the token must never leave. */
static void
scrub(const char *s, char *out, size_t outlen)
{
	size_t tl = tg.token != NULL ? strlen(tg.token) : 0;
	struct buf b;

	buf_init(&b);
	while (*s != '\0') {
		if (tl > 0 && strncmp(s, tg.token, tl) == 0) {
			buf_adds(&b, "[token]");
			s += tl;
		} else
			buf_addc(&b, *s++);
	}
	snprintf(out, outlen, "%s", b.data != NULL ? b.data : "");
	buf_free(&b);
}

/* A bot token is "DIGITS:SECRET" with a URL-safe secret; anything else
 * would change the meaning of the URL it is pasted into. */
static int
token_ok(const char *t)
{
	size_t n = strlen(t);

	if (n == 0 || n > TG_TOKEN_MAX || strchr(t, ':') == NULL)
		return 0;
	return strspn(t, "0123456789abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ:_-") == n;
}

static int
tg_prepare(const struct cfg *cfg, char *err, size_t errlen)
{
	const struct cfg_telegram *t = &cfg->trig.telegram;
	size_t blen;

	if (t->token == NULL || !token_ok(t->token)) {
		snprintf(err, errlen, "triggers.telegram.token is not a bot "
		    "token (DIGITS:SECRET, letters, digits, '_' and '-')");
		return -1;
	}
	tg.cfg = cfg;
	tg.token = t->token;
	log_redact_add(t->token);
	blen = strlen(t->api_base);
	while (blen > 0 && t->api_base[blen - 1] == '/')
		blen--;
	tg.url_me = xasprintf("%.*s/bot%s/getMe", (int)blen, t->api_base,
	    t->token);
	tg.url_updates = xasprintf("%.*s/bot%s/getUpdates", (int)blen,
	    t->api_base, t->token);
	tg.url_send = xasprintf("%.*s/bot%s/sendMessage", (int)blen,
	    t->api_base, t->token);
	tg.url_action = xasprintf("%.*s/bot%s/sendChatAction", (int)blen,
	    t->api_base, t->token);
	tg.limit = TG_MAX_UPDATES;
	chatq_init(&tg.chats, &tg_chatq);
	return 0;
}

static int64_t
parse_offset(const char *s)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 0)
		return -1;
	return v;
}

static void
poll_later(long ms)
{
	loop_timer_cancel(tg.poll_timer);
	tg.poll_timer = loop_timer_add(ms, tg_poll, NULL);
}

static void
tg_poll_done(struct http_response *, void *);

/* The first poll after a start or an error does not wait: the status port
 * then knows at once whether the token works and the Bot API answers. */
static void
tg_poll(void *arg)
{
	struct http_request req;
	char body[160];
	int wait_s = tg.healthy ? TG_POLL_TIMEOUT_S : 0;

	tg.poll_timer = NULL;
	if (tg.stopped || tg.dead || tg.poll != NULL)
		return;
	if (tg.username[0] == '\0') {
		me_start();
		return;
	}
	snprintf(body, sizeof(body), "{\"offset\":%lld,\"limit\":%ld,"
	    "\"timeout\":%d,\"allowed_updates\":[\"message\"]}",
	    (long long)tg.offset, tg.limit, wait_s);
	memset(&req, 0, sizeof(req));
	req.method = "POST";
	req.url = tg.url_updates;
	req.headers = tg_json_headers;
	req.body = body;
	req.bodylen = strlen(body);
	req.timeout_ms = wait_s * 1000L + TG_POLL_SLACK_MS;
	req.connect_timeout_ms = TG_CONNECT_TIMEOUT_MS;
	req.max_response = TG_MAX_RESPONSE;
	tg.waiting = wait_s > 0;
	tg.poll_since = mono_ms();
	tg.poll = http_start(&req, tg_poll_done, NULL);
}

/* The Bot API's own words where it gave some, else the HTTP status. */
static void
describe(const struct http_response *resp, const struct tg_reply *rep,
    char *out, size_t outlen)
{
	if (rep->parsed && rep->description[0] != '\0')
		snprintf(out, outlen, "%s", rep->description);
	else if (resp->status == 0)
		scrub(resp->error[0] ? resp->error : "no response", out,
		    outlen);
	else
		snprintf(out, outlen, "HTTP %ld", resp->status);
}

/* How long a 429 asks to wait; Telegram's value is honoured as given. */
static long
retry_after_s(const struct tg_reply *rep)
{
	if (rep->retry_after < 0)
		return TG_RETRY_AFTER_DEFAULT;
	return rep->retry_after < TG_RETRY_AFTER_MIN ? TG_RETRY_AFTER_MIN :
	    rep->retry_after;
}

static void
poll_backoff(const char *why)
{
	tg.healthy = 0;
	trig_set_state(TG_NAME, TRIG_BACKOFF, why);
	poll_later(backoff_next(&tg.backoff, TG_BACKOFF_MIN_MS,
	    TG_BACKOFF_MAX_MS));
}

/*
 * A failed poll. A bad token (401, or 404 for one Telegram cannot even
 * parse) will not heal by itself: the trigger goes down and stops. A 409
 * means another poller or a webhook holds the bot; that needs the operator
 * too, but may clear, so it is retried slowly and turns to "down" when it
 * persists. Everything else backs off and retries.
 */
static void
poll_failed(const char *method, const struct http_response *resp,
    const struct tg_reply *rep)
{
	long code = rep->parsed && rep->error_code ? rep->error_code :
	    resp->status;
	char detail[300], why[512];
	long wait;

	tg.healthy = 0;
	describe(resp, rep, detail, sizeof(detail));
	if (resp->status == 0) {
		snprintf(why, sizeof(why), "cannot reach the Bot API: %s",
		    detail);
		poll_backoff(why);
		return;
	}
	switch (code) {
	case 401:
	case 404:
		snprintf(why, sizeof(why), "bad token: %s", detail);
		tg.dead = 1;
		trig_set_state(TG_NAME, TRIG_DOWN, why);
		return;
	case 409:
		tg.conflicts++;
		snprintf(why, sizeof(why), "%s (only one getUpdates poller "
		    "may use a bot token, and no webhook may be set)", detail);
		trig_set_state(TG_NAME, tg.conflicts >= TG_CONFLICT_DOWN_AFTER ?
		    TRIG_DOWN : TRIG_BACKOFF, why);
		poll_later(TG_CONFLICT_RETRY_MS);
		return;
	case 429:
		wait = retry_after_s(rep);
		snprintf(why, sizeof(why), "rate limited: retry after %ld s",
		    wait);
		trig_set_state(TG_NAME, TRIG_BACKOFF, why);
		poll_later(wait * 1000);
		return;
	default:
		snprintf(why, sizeof(why), "%s failed: %s", method, detail);
		poll_backoff(why);
	}
}

static struct http_call *
api_post(const char *url, const char *body, long max, http_cb cb, void *arg)
{
	struct http_request req;

	memset(&req, 0, sizeof(req));
	req.method = "POST";
	req.url = url;
	req.headers = tg_json_headers;
	req.body = body;
	req.bodylen = strlen(body);
	req.timeout_ms = TG_SEND_TIMEOUT_MS;
	req.connect_timeout_ms = TG_CONNECT_TIMEOUT_MS;
	req.max_response = max;
	return http_start(&req, cb, arg);
}

/* A username as Telegram makes them: letters, digits and '_', which is
 * also all that a command's "@bot" suffix can hold. */
static int
username_ok(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= TG_USERNAME_MAX && strspn(s, "0123456789"
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_") == n;
}

/* The username of a getMe answer (a User with is_bot true); -1 when it is
 * no such answer, with rep telling whether it was an error envelope. */
static int
me_parse(const char *json, size_t len, struct tg_reply *rep, char *out,
    size_t outlen)
{
	const cJSON *res, *bot, *name;
	cJSON *root;
	int rc = -1;

	if (tg_parse_reply(json, len, rep) == -1 || !rep->ok)
		return -1;
	if ((root = cJSON_ParseWithLength(json, len)) == NULL)
		return -1;
	res = cJSON_GetObjectItemCaseSensitive(root, "result");
	bot = cJSON_GetObjectItemCaseSensitive(res, "is_bot");
	name = cJSON_GetObjectItemCaseSensitive(res, "username");
	if (cJSON_IsTrue(bot) && cJSON_IsString(name) &&
	    username_ok(name->valuestring)) {
		snprintf(out, outlen, "%s", name->valuestring);
		rc = 0;
	}
	cJSON_Delete(root);
	return rc;
}

/* The common start of a getMe or getUpdates answer: -1 when it is not to be
 * read (the trigger stopped, or no body came back: that failure is handled
 * here), else rep is ready for the parser. */
static int
poll_answer(const char *method, const struct http_response *resp,
    struct tg_reply *rep)
{
	tg.poll = NULL;
	if (tg.stopped)
		return -1;
	memset(rep, 0, sizeof(*rep));
	rep->retry_after = -1;
	if (resp->status == 0 || resp->body.data == NULL) {
		poll_failed(method, resp, rep);
		return -1;
	}
	return 0;
}

/* getMe fails the way getUpdates does, and is retried the same way: a bad
 * token is "down", anything else backs off and asks again. */
static void
me_done(struct http_response *resp, void *arg)
{
	struct tg_reply rep;
	char name[TG_USERNAME_MAX + 1];

	if (poll_answer("getMe", resp, &rep) == -1)
		return;
	if (me_parse(resp->body.data, resp->body.len, &rep, name,
	    sizeof(name)) == -1) {
		if (resp->status == 200 && rep.parsed && rep.ok)
			poll_backoff("getMe gave no bot username");
		else if (resp->status == 200 && !rep.parsed)
			poll_backoff("getMe reply is not a Bot API answer");
		else
			poll_failed("getMe", resp, &rep);
		return;
	}
	snprintf(tg.username, sizeof(tg.username), "%s", name);
	log_info("telegram: the bot is @%s", tg.username);
	poll_later(0);
}

static void
me_start(void)
{
	tg.poll = api_post(tg.url_me, "{}", TG_ME_RESPONSE_MAX, me_done, NULL);
}

/* The typing indicator is cosmetic: failures are only logged at debug. */
static void
typing_done(struct chatq *c, const struct http_response *resp)
{
	if (resp->status != 200)
		log_debug("telegram: sendChatAction to chat %s: %ld", c->id,
		    resp->status);
}

static struct http_call *
typing_start(struct chatq *c, http_cb cb, void *arg)
{
	char body[96];

	snprintf(body, sizeof(body), "{\"chat_id\":%s,\"action\":"
	    "\"typing\"}", c->id);
	return api_post(tg.url_action, body, 64 << 10, cb, arg);
}

static int
chat_allowed(const char *id)
{
	const struct cfg_telegram *t = &tg.cfg->trig.telegram;

	if (!t->has_allowed_chats)
		return 1;
	for (size_t i = 0; i < t->allowed_chats.n; i++)
		if (tg_id_equal(t->allowed_chats.v[i], id))
			return 1;
	return 0;
}

/* Commit the offset past u: from here on Telegram will not send it again. */
static enum tg_step
advance(const struct tg_update *u)
{
	char v[32];

	tg.offset = u->update_id + 1;
	snprintf(v, sizeof(v), "%lld", (long long)tg.offset);
	if (state_cursor_set(TG_CURSOR, v) == -1) {
		tg.dead = 1;
		trig_set_state(TG_NAME, TRIG_DOWN, "the update offset cannot be "
		    "saved in the state database");
		return TG_FATAL;
	}
	return TG_DONE;
}

/* An update that starts no run still leaves a trace in the audit trail; no
 * trace, no pass: it waits like a refused event. */
static enum tg_step
ignore(const struct tg_update *u, const char *reason)
{
	cJSON *rec = audit_new(NULL, "telegram_ignored");

	if (u->chat_id[0] != '\0')
		cJSON_AddStringToObject(rec, "chat_id", u->chat_id);
	cJSON_AddNumberToObject(rec, "update_id", (double)u->update_id);
	cJSON_AddStringToObject(rec, "reason", reason);
	if (audit_emit(rec) == -1) {
		log_warnx("telegram: the audit trail cannot be written; "
		    "updates wait");
		return TG_STALL;
	}
	tg.ignored++;
	return advance(u);
}

static void send_text(struct chatq *, const char *text,
    const char *reply_to, const char *run_id);

static enum tg_step
submit(const struct tg_update *u, const char *prompt)
{
	struct run_request req;
	char id[RUN_ID_LEN], uid[32], *meta, *conv;
	struct chatq *c;
	enum tg_step st;
	cJSON *m;
	int rc;

	snprintf(uid, sizeof(uid), "%lld", (long long)u->update_id);
	m = cJSON_CreateObject();
	cJSON_AddStringToObject(m, "chat_id", u->chat_id);
	cJSON_AddStringToObject(m, "message_id", u->message_id);
	cJSON_AddStringToObject(m, "update_id", uid);
	cJSON_AddStringToObject(m, "chat_type", u->chat_type);
	meta = cJSON_PrintUnformatted(m);
	cJSON_Delete(m);
	if (meta == NULL)
		fatalx("telegram: out of memory");
	conv = xasprintf("telegram:%s", u->chat_id);
	memset(&req, 0, sizeof(req));
	req.trigger = TG_NAME;
	req.prompt = prompt;
	req.conversation = conv;
	req.meta = meta;
	rc = run_submit(&req, id, sizeof(id));
	free(conv);
	cJSON_free(meta);
	if (rc == -1) {
		if (errno == ESHUTDOWN)
			return TG_STOP;
		tg.refused++;
		if (!tg.stalled)
			log_warnx("telegram: update %lld waits: %s", (long long)
			    u->update_id, errno == EAGAIN ? "the run queue is "
			    "full" : "events cannot be journaled");
		return TG_STALL;
	}
	if ((st = advance(u)) != TG_DONE)
		return st;
	log_info("telegram: chat %s message %s is run %s", u->chat_id,
	    u->message_id, id);
	/* Typing shows from acceptance until the reply: the chat's runs may
	 * wait in the queue first, and the user should see the bot is on it. */
	c = chatq_find(&tg.chats, u->chat_id, 1);
	chatq_run_begin(c);
	return TG_DONE;
}

/* A command answered without a run: audited like an ignored update (no
 * trace, no pass), then the offset passes it, then the answer is queued. */
static enum tg_step
answer_command(const struct tg_update *u, const char *answer)
{
	struct strlist parts = { 0 };
	char name[CMD_NAME_MAX + 2];
	struct chatq *c;
	enum tg_step st;
	cJSON *rec;

	snprintf(name, sizeof(name), "%.*s", (int)strcspn(u->text, " \t\r\n"),
	    u->text);
	rec = audit_new(NULL, "telegram_command");
	cJSON_AddStringToObject(rec, "chat_id", u->chat_id);
	cJSON_AddNumberToObject(rec, "update_id", (double)u->update_id);
	cJSON_AddStringToObject(rec, "command", name);
	if (audit_emit(rec) == -1) {
		log_warnx("telegram: the audit trail cannot be written; "
		    "updates wait");
		return TG_STALL;
	}
	if ((st = advance(u)) != TG_DONE)
		return st;
	c = chatq_find(&tg.chats, u->chat_id, 1);
	tg_split(answer, TG_TEXT_MAX_UNITS, TG_MAX_PARTS, &parts);
	for (size_t i = 0; i < parts.n; i++)
		send_text(c, parts.v[i], i == 0 ? u->message_id : NULL, NULL);
	strlist_free(&parts);
	chatq_gc(c);
	return TG_DONE;
}

/* Slash commands (engine/command.c) are answered at once or become their
 * prompt; one addressed to another bot is ignored like any update that is
 * not for us; any other text is the prompt as it is. */
static enum tg_step
take_text(const struct tg_update *u)
{
	struct buf answer;
	char *conv, *prompt = NULL;
	enum tg_step st;
	int kind;

	buf_init(&answer);
	conv = xasprintf("telegram:%s", u->chat_id);
	kind = cmd_handle_bot(tg.cfg, TG_NAME, tg.username, conv, u->text,
	    &answer, &prompt);
	free(conv);
	if (kind == CMD_OTHER_BOT)
		st = ignore(u, "a command for another bot");
	else if (kind == CMD_ANSWERED)
		st = answer_command(u, answer.data ? answer.data : "");
	else
		st = submit(u, kind == CMD_EXPANDED ? prompt : u->text);
	free(prompt);
	buf_free(&answer);
	return st;
}

static enum tg_step
take_update(const struct tg_update *u)
{
	struct chatq *c;
	enum tg_step st;

	if (u->update_id < tg.offset)
		return TG_DONE;		/* already handled */
	tg.received++;
	if (u->kind == TG_OTHER)
		return ignore(u, "not a message the bot can answer");
	if (!chat_allowed(u->chat_id))
		return ignore(u, "chat not in allowed_chats");
	if (u->kind == TG_NONTEXT) {
		st = ignore(u, "not a text message");
		/* A person in a private chat gets told; a group's service
		 * messages (joins, pins) must not make the bot talk. */
		if (st == TG_DONE && strcmp(u->chat_type, "private") == 0) {
			c = chatq_find(&tg.chats, u->chat_id, 1);
			send_text(c, "I can only read text messages.",
			    u->message_id, NULL);
			chatq_gc(c);
		}
		return st;
	}
	return take_text(u);
}

static enum tg_step
take_batch(const struct tg_update *v, size_t n)
{
	enum tg_step st;

	for (size_t i = 0; i < n; i++)
		if ((st = take_update(&v[i])) != TG_DONE)
			return st;
	return TG_DONE;
}

static void
tg_poll_done(struct http_response *resp, void *arg)
{
	struct tg_update *v = NULL;
	struct tg_reply rep;
	size_t n = 0;
	enum tg_step st;
	int64_t before;

	if (poll_answer("getUpdates", resp, &rep) == -1)
		return;
	if (tg_parse_updates(resp->body.data, resp->body.len, TG_MAX_UPDATES,
	    &rep, &v, &n) == -1) {
		if (resp->status == 200 && resp->truncated) {
			/* One update at a time always fits. */
			tg.limit = 1;
			poll_backoff("getUpdates reply too large; fetching "
			    "one update at a time");
		} else if (resp->status == 200 && !(rep.parsed && !rep.ok))
			poll_backoff("getUpdates reply is not a Bot API "
			    "answer");
		else
			poll_failed("getUpdates", resp, &rep);
		return;
	}
	tg.backoff = 0;
	tg.conflicts = 0;
	tg.healthy = 1;
	trig_set_state(TG_NAME, TRIG_UP, NULL);
	before = tg.offset;
	st = take_batch(v, n);
	tg_updates_free(v, n);
	switch (st) {
	case TG_DONE:
		tg.stall = 0;
		tg.stalled = 0;
		if (n > 0)
			tg.limit = TG_MAX_UPDATES;
		/* A long poll that came back at once with nothing new (a
		 * proxy that ignores the timeout, a server that ignores the
		 * offset) must not turn into a busy loop. */
		if (tg.offset == before && tg.waiting &&
		    mono_ms() - tg.poll_since < TG_POLL_MIN_GAP_MS)
			poll_later(TG_POLL_MIN_GAP_MS);
		else
			poll_later(0);
		break;
	case TG_STALL:
		tg.stalled = 1;
		poll_later(backoff_next(&tg.stall, TG_BACKOFF_MIN_MS,
		    TG_STALL_MAX_MS));
		break;
	case TG_FATAL:
	case TG_STOP:
		break;
	}
}

static char *
send_body(const char *chat, const char *text, const char *reply_to)
{
	cJSON *o = cJSON_CreateObject(), *rp;
	char *s, *copy;

	/* Ids went through tg_id_canon: digits only, safe as raw JSON, and
	 * sent back exactly as Telegram wrote them. */
	cJSON_AddItemToObject(o, "chat_id", cJSON_CreateRaw(chat));
	cJSON_AddStringToObject(o, "text", text);
	if (reply_to != NULL) {
		rp = cJSON_AddObjectToObject(o, "reply_parameters");
		cJSON_AddItemToObject(rp, "message_id",
		    cJSON_CreateRaw(reply_to));
		cJSON_AddTrueToObject(rp, "allow_sending_without_reply");
	}
	if ((s = cJSON_PrintUnformatted(o)) == NULL)
		fatalx("telegram: out of memory");
	cJSON_Delete(o);
	copy = xstrdup(s);
	cJSON_free(s);
	return copy;
}

/* Queue one message in the chat's order and start sending if idle. */
static void
send_text(struct chatq *c, const char *text, const char *reply_to,
    const char *run_id)
{
	if (chatq_push(c, send_body(c->id, text, reply_to), run_id) == -1) {
		log_warnx("telegram: chat %s has %zu messages waiting; one "
		    "reply part is dropped", c->id, c->nout);
		tg.send_failed++;
	}
}

static struct http_call *
send_start(struct chatq *c, const char *body, http_cb cb, void *arg)
{
	return api_post(tg.url_send, body, TG_SEND_RESPONSE_MAX, cb, arg);
}

/*
 * One reply message answered. Success sends the next; a 429 waits as long
 * as Telegram asks; network errors and 5xx back off; other 4xx (the bot was
 * blocked, the chat is gone) will not change on a retry and drop the
 * message. The head stays at the head while it is retried (chatq), so a
 * chat's messages keep their order.
 */
static enum chatq_verdict
sent(struct chatq *c, const struct http_response *resp, int attempts,
    long *delay)
{
	struct tg_reply rep;
	char detail[300];
	long code, wait = -1;

	memset(&rep, 0, sizeof(rep));
	rep.retry_after = -1;
	if (resp->body.data != NULL)
		tg_parse_reply(resp->body.data, resp->body.len, &rep);
	if (resp->status == 200 && rep.parsed && rep.ok) {
		tg.sent++;
		return CHATQ_SENT;
	}
	code = rep.parsed && rep.error_code ? rep.error_code : resp->status;
	if (code == 429)
		wait = 1000 * retry_after_s(&rep);
	else if (resp->status == 0 || code >= 500)
		wait = backoff_next(&c->backoff, TG_BACKOFF_MIN_MS,
		    TG_BACKOFF_MAX_MS);
	describe(resp, &rep, detail, sizeof(detail));
	if (wait >= 0 && attempts < TG_SEND_ATTEMPTS) {
		log_info("telegram: reply to chat %s: %s; retrying in %ld ms",
		    c->id, detail, wait);
		*delay = wait;
		return CHATQ_RETRY;
	}
	log_warnx("telegram: a reply to chat %s was not delivered: %s",
	    c->id, detail);
	tg.send_failed++;
	return CHATQ_DROP;
}

static const struct chatq_def tg_chatq = {
	.queue_max = TG_CHAT_QUEUE_MAX,
	.typing_every_ms = TG_TYPING_EVERY_MS,
	.send = send_start,
	.sent = sent,
	.typing = typing_start,
	.typing_done = typing_done,
};

static const struct chatq_reply tg_reply = {
	.name = TG_NAME,
	.chat_key = "chat_id",
	.id = tg_id_canon,
	.split = tg_split,
	.max = TG_TEXT_MAX_UNITS,
	.max_parts = TG_MAX_PARTS,
	.send = send_text,
};

static void
tg_deliver(const struct run_outcome *o)
{
	if (tg.cfg != NULL)
		chatq_deliver(&tg.chats, o, &tg_reply);
}

/*
 * Events accepted before a stop or a crash and not yet answered: the engine
 * replays them, so their chats show typing again. One may have been
 * journaled just before a crash, with its offset never committed: the offset
 * starts past the highest update_id found.
 */
static void
journal_scan(const char *id, const char *trigger, const char *conv,
    const char *prompt, const char *meta, void *arg)
{
	char chat[TG_ID_MAX], msg[TG_ID_MAX];
	int64_t *next = arg, v;
	struct chatq *c;
	cJSON *m, *uid;

	if (trigger == NULL || strcmp(trigger, TG_NAME) != 0 || meta == NULL)
		return;
	if ((m = cJSON_Parse(meta)) == NULL)
		return;
	uid = cJSON_GetObjectItemCaseSensitive(m, "update_id");
	if (cJSON_IsString(uid) && (v = parse_offset(uid->valuestring)) != -1
	    && v < INT64_MAX && v + 1 > *next)
		*next = v + 1;
	cJSON_Delete(m);
	if (chatq_meta_target(meta, "chat_id", tg_id_canon, chat, msg) == 0) {
		c = chatq_find(&tg.chats, chat, 1);
		chatq_run_begin(c);
	}
}

static int
tg_start(const struct cfg *cfg, char *err, size_t errlen)
{
	char v[32];
	int64_t off = 0, past;

	if (state_cursor_get(TG_CURSOR, v, sizeof(v)) == 1 &&
	    (off = parse_offset(v)) == -1) {
		log_warnx("telegram: stored offset is malformed; starting "
		    "from the updates Telegram still holds");
		off = 0;
	}
	past = off;
	if (state_journal_pending(journal_scan, &past) == 0 && past > off) {
		log_info("telegram: an accepted update's offset was not "
		    "saved; starting past it");
		snprintf(v, sizeof(v), "%lld", (long long)past);
		if (state_cursor_set(TG_CURSOR, v) == -1) {
			snprintf(err, errlen, "telegram: cannot save the "
			    "update offset");
			return -1;
		}
		off = past;
	}
	tg.offset = off;
	trig_set_state(TG_NAME, TRIG_CONNECTING, NULL);
	poll_later(0);
	return 0;
}

static void
tg_status(cJSON *obj)
{
	char v[32];

	snprintf(v, sizeof(v), "%lld", (long long)tg.offset);
	cJSON_AddStringToObject(obj, "offset", v);
	if (tg.username[0] != '\0')
		cJSON_AddStringToObject(obj, "username", tg.username);
	cJSON_AddNumberToObject(obj, "updates", (double)tg.received);
	cJSON_AddNumberToObject(obj, "ignored", (double)tg.ignored);
	cJSON_AddNumberToObject(obj, "refused", (double)tg.refused);
	cJSON_AddNumberToObject(obj, "replies_sent", (double)tg.sent);
	cJSON_AddNumberToObject(obj, "replies_failed", (double)tg.send_failed);
}

/* Stop polling; replies of runs that end during the drain still go out. */
static void
tg_stop(void)
{
	tg.stopped = 1;
	http_cancel(tg.poll);
	tg.poll = NULL;
	loop_timer_cancel(tg.poll_timer);
	tg.poll_timer = NULL;
}

/* The loop's drain waits for runs, not for their replies: a reply still
 * queued or waiting out a 429 when the loop ends is lost, and said so. */
static void
tg_free(void)
{
	size_t lost;

	tg_stop();
	lost = chatq_free_all(&tg.chats);
	if (lost > 0)
		log_warnx("telegram: %zu reply message%s not sent before the "
		    "stop", lost, lost == 1 ? " was" : "s were");
	free(tg.url_me);
	free(tg.url_updates);
	free(tg.url_send);
	free(tg.url_action);
	tg.url_me = tg.url_updates = tg.url_send = tg.url_action = NULL;
	tg.username[0] = '\0';
	tg.cfg = NULL;
	tg.token = NULL;
}

const struct trigger_def trigger_telegram = {
	.name = TG_NAME,
	.enabled = tg_enabled,
	.prepare = tg_prepare,
	.start = tg_start,
	.stop = tg_stop,
	.deliver = tg_deliver,
	.outbox = 1,
	.status = tg_status,
	.free = tg_free,
};
