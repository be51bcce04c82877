/* The Telegram trigger's pure parts: the Bot API reply and update parser and
 * the reply splitter. They touch neither the loop nor the engine, so the
 * fuzzer links them alone (telegram_parse.c); the polling and sending side is
 * in telegram.c. */
#ifndef AF_TELEGRAM_H
#define AF_TELEGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* Bot API limits and the trigger's own bounds. */
#define TG_TEXT_MAX_UNITS	4096	/* sendMessage text, in UTF-16 units */
#define TG_MAX_PARTS		32	/* messages one reply may become */
#define TG_MAX_UPDATES		100	/* getUpdates "limit" */
#define TG_MAX_RESPONSE		(16 << 20)
#define TG_ID_MAX		24	/* "-" + 19 digits + NUL, with room */
#define TG_DESC_MAX		256	/* a Bot API error description kept */

/* What one update carries, as far as the trigger cares. */
enum tg_kind {
	TG_OTHER,	/* not a message, or one that cannot be answered */
	TG_TEXT,	/* a message with text */
	TG_NONTEXT	/* a message without text: photo, sticker, service */
};

/* Ids are the exact decimal text Telegram sent, never a double: chat ids
 * can pass 2^32 and be negative, and must come back unchanged. */
struct tg_update {
	int64_t		 update_id;
	enum tg_kind	 kind;
	char		 chat_id[TG_ID_MAX];	/* "" for TG_OTHER */
	char		 chat_type[16];		/* "private", "group", ... */
	char		 message_id[TG_ID_MAX];
	char		*text;			/* TG_TEXT only; owned */
};

/* The envelope every Bot API method answers with. */
struct tg_reply {
	int		 parsed;	/* 0: not a Bot API envelope at all */
	int		 ok;
	long		 error_code;	/* 0 when absent */
	char		 description[TG_DESC_MAX];
	long		 retry_after;	/* seconds; -1 when absent */
};

/*
 * Parse the envelope of any Bot API reply (len bytes, need not be
 * NUL-terminated). Returns 0 when it is an envelope (rep->parsed set), -1
 * otherwise. Never fails on an unknown field.
 */
int tg_parse_reply(const char *json, size_t len, struct tg_reply *rep);

/*
 * Parse a getUpdates reply: the envelope into rep and, when ok, at most max
 * updates into the array *out (allocated, *nout entries; free with
 * tg_updates_free). Entries without a usable update_id are skipped; updates
 * keep the server's order. Returns 0, or -1 when the reply is not a
 * well-formed getUpdates answer (rep tells whether it was an error envelope).
 */
int tg_parse_updates(const char *json, size_t len, size_t max,
    struct tg_reply *rep, struct tg_update **out, size_t *nout);
void tg_updates_free(struct tg_update *, size_t);

/* Parse an exact integer id ("-?(0|[1-9][0-9]*)", at most 19 digits) into
 * a canonical copy; -1 when it is not one. */
int tg_id_canon(const char *s, char *out, size_t outlen);
/* 1 when two ids name the same number (leading zeros in a config allowed). */
int tg_id_equal(const char *a, const char *b);

/*
 * Split text into Telegram messages of at most max_units UTF-16 code units
 * each (TG_TEXT_MAX_UNITS). Invalid UTF-8 becomes U+FFFD first; a cut never
 * falls inside a character, and prefers a newline, then a space, in the
 * second half of a part. Parts that would be only whitespace (Telegram
 * rejects them) are dropped. At most max_parts parts: when more would be
 * needed, the last part says how much was left out. Appends copies to parts.
 */
void tg_split(const char *text, size_t max_units, size_t max_parts,
    struct strlist *parts);

/* UTF-16 code units of valid UTF-8 text. */
size_t tg_utf16_len(const char *s, size_t len);

#endif
