/* The Discord trigger's pure parts: the gateway payload parser, the payloads
 * af sends, the REST helpers (429 bodies, the reply splitter) and the URL
 * splitter the gateway connection needs. No loop, no libwebsockets, no
 * engine: the fuzzer links discord_parse.c alone. The connection and the
 * replies live in discord.c. */
#ifndef AF_DISCORD_H
#define AF_DISCORD_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "util.h"

#define DC_NAME			"discord"
#define DC_ID_MAX		24	/* a snowflake: at most 20 digits */
#define DC_SESSION_MAX		128
#define DC_URL_MAX		512
#define DC_EVENT_NAME_MAX	64
#define DC_FRAME_MAX		(1 << 20)	/* one gateway message */
#define DC_TEXT_MAX_CHARS	2000	/* message content, in characters */
#define DC_MAX_PARTS		10	/* messages one reply may become */

/* Gateway intents (Discord's "List of Intents"). MESSAGE_CONTENT is
 * privileged: the bot's settings must enable it, or the gateway closes with
 * 4014. */
#define DC_INTENT_GUILD_MESSAGES	(1L << 9)
#define DC_INTENT_DIRECT_MESSAGES	(1L << 12)
#define DC_INTENT_MESSAGE_CONTENT	(1L << 15)
#define DC_INTENTS	(DC_INTENT_GUILD_MESSAGES | \
			 DC_INTENT_DIRECT_MESSAGES | DC_INTENT_MESSAGE_CONTENT)

enum dc_op {
	DC_OP_DISPATCH = 0,
	DC_OP_HEARTBEAT = 1,
	DC_OP_IDENTIFY = 2,
	DC_OP_RESUME = 6,
	DC_OP_RECONNECT = 7,
	DC_OP_INVALID_SESSION = 9,
	DC_OP_HELLO = 10,
	DC_OP_HEARTBEAT_ACK = 11
};

/* A MESSAGE_CREATE, as far as the trigger cares. Ids are the exact strings
 * Discord sent (snowflakes pass 2^53). */
struct dc_message {
	char		 id[DC_ID_MAX];
	char		 channel_id[DC_ID_MAX];
	char		 guild_id[DC_ID_MAX];	/* "": a direct message */
	char		 author_id[DC_ID_MAX];
	int		 author_bot;	/* a bot, or a webhook: never answered */
	int		 type;		/* 0 default, 19 reply; others are
					   system messages */
	char		*content;	/* owned; "" when absent */
	struct strlist	 mentions;	/* user ids */
};

/* One gateway payload. */
struct dc_frame {
	int		 op;
	int64_t		 seq;		/* "s"; -1 when null or absent */
	char		 t[DC_EVENT_NAME_MAX];	/* dispatch name or "" */
	long		 heartbeat_interval;	/* HELLO, in ms */
	int		 resumable;		/* INVALID_SESSION's d */
	/* READY */
	char		 session_id[DC_SESSION_MAX];
	char		 resume_url[DC_URL_MAX];
	char		 user_id[DC_ID_MAX];
	/* MESSAGE_CREATE */
	int		 has_message;
	struct dc_message msg;
};

/*
 * Parse one gateway payload (len bytes, need not be NUL-terminated). Returns
 * 0 with f filled, or -1 when it is not a payload af can use: not JSON, no
 * integer op, a HELLO without a usable interval, a READY without a session,
 * or a MESSAGE_CREATE without its ids. Unknown ops and events parse (op and
 * t set) so the caller can still track the sequence. Free with
 * dc_frame_free, also after -1.
 */
int dc_parse_frame(const char *json, size_t len, struct dc_frame *f);
void dc_frame_free(struct dc_frame *);

/* 1 for a snowflake: 1 to 20 decimal digits. */
int dc_snowflake_ok(const char *);
/* Copy a snowflake into out (0), or -1 when s is not one or does not fit. */
int dc_id_copy(const char *s, char *out, size_t outlen);

/* The payloads af sends; the caller frees them. The token goes only here,
 * never into a log line. */
char *dc_identify_json(const char *token, long intents);
char *dc_resume_json(const char *token, const char *session_id, int64_t seq);
char *dc_heartbeat_json(int64_t seq);	/* seq -1: null */
/* POST /channels/{id}/messages: content, a reply reference when reply_to is
 * set, and allowed_mentions that ping no one. */
char *dc_message_json(const char *content, const char *reply_to);

/* What to do after the gateway closed with code (0: no close frame). */
enum dc_close_action {
	DC_CLOSE_RESUME,	/* reconnect and resume the session */
	DC_CLOSE_REIDENTIFY,	/* reconnect with a new session */
	DC_CLOSE_FATAL		/* the operator must act: stop */
};
enum dc_close_action dc_close_action(int code);
/* Words for the status port: "authentication failed (4004): ..." */
const char *dc_close_text(int code);

/*
 * A 429 body: {"retry_after": seconds (a float), "global": bool}. Returns 0
 * with the wait in ms (rounded up, clamped to a day) and the global flag, or
 * -1 when the body says neither.
 */
int dc_parse_429(const char *json, size_t len, long *ms, int *global);
/* A rate-limit header's seconds ("1.25") in ms, rounded up; -1 when not a
 * non-negative number. Clamped to a day. */
long dc_seconds_ms(const char *);

/*
 * Split text into messages of at most max_chars characters (code points)
 * each. Invalid UTF-8 becomes U+FFFD first; a cut never falls inside a
 * character and prefers a line break, then a space, in the second half of
 * a part. Parts of only whitespace are dropped (Discord refuses empty
 * content). At most max_parts parts: when more would be needed, the last
 * says the reply was cut. Appends copies to parts.
 */
void dc_split(const char *text, size_t max_chars, size_t max_parts,
    struct strlist *parts);
/* Characters (code points) in valid UTF-8. */
size_t dc_utf8_chars(const char *, size_t);

/* The text a run sees: the content with the bot's own mentions (<@ID>,
 * <@!ID>) taken out and the ends trimmed. Caller frees. */
char *dc_prompt_text(const char *content, const char *bot_id);

/* A gateway URL split for libwebsockets: ws or wss, host, port, and the
 * path with its query ("/?v=10&encoding=json"). */
struct dc_url {
	int	tls;
	char	host[256];
	int	port;
	char	path[DC_URL_MAX];
};
int dc_url_split(const char *url, struct dc_url *);

/* The config's default for triggers.discord.gateway. */
#define DC_GATEWAY_DEFAULT	CFG_DISCORD_GATEWAY

/* GET /gateway/bot's reply: where to connect, and how many new sessions
 * (IDENTIFYs) Discord still allows before its limit resets. */
struct dc_gateway_bot {
	char	url[DC_URL_MAX];	/* "" when absent or too long */
	long	shards;			/* 0 when absent */
	long	total;			/* 0 when absent */
	long	remaining;
	long	reset_after;		/* ms, clamped to a day */
	long	max_concurrency;	/* 1 when absent */
};

/*
 * Parse GET /gateway/bot's reply. Returns 0 with g filled, or -1 when it is
 * not JSON, or session_start_limit lacks an integer remaining >= 0 or a
 * reset_after >= 0: without those af cannot know whether it may start a
 * session.
 */
int dc_parse_gateway_bot(const char *json, size_t len,
    struct dc_gateway_bot *g);

/*
 * Where a new session connects. When the configured gateway is Discord's
 * default, the url GET /gateway/bot returned (as Discord asks), with the
 * configured path and query; otherwise, or when the returned one is not
 * wss on the configured port with an empty path (the sandbox opens only
 * the configured port), the configured gateway. Returns 1 when the
 * returned url was taken, 0 when the configured one, -1 when the
 * configured one is not a gateway URL.
 */
int dc_gateway_pick(const char *configured, const char *returned,
    struct dc_url *out);

#endif
