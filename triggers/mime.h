/* Mail parsing for the IMAP trigger, with no server and no loop: one message
 * in, its headers decoded to UTF-8, its readable text and a list of its
 * attachments out, every part bounded. Kept apart from imap.c so that the
 * unit tests and the fuzzer can drive it alone. */
#ifndef AF_MIME_H
#define AF_MIME_H

#include <stddef.h>

#define MIME_TEXT_MAX		(64 << 10)	/* body text kept for the prompt */
#define MIME_HEADER_MAX		1000		/* one decoded header value */
#define MIME_MAX_PARTS		256		/* parts walked in one message */
#define MIME_MAX_DEPTH		16		/* nested multiparts */
#define MIME_MAX_ATTACH		50		/* attachments listed */
#define MIME_REFS_MAX		20		/* References kept (the last ones) */
#define MIME_ID_MAX		250		/* one message id, with <> */
#define MIME_ADDR_MAX		254		/* one address (RFC 5321) */

struct mime_attachment {
	char	*name;		/* decoded file name, or "" */
	char	*type;		/* "image/png" */
	size_t	 size;		/* decoded bytes */
};

/* Every string is valid UTF-8 without NUL, owned by the message. */
struct mime_msg {
	char			*from;		/* "Name <addr>" as shown */
	char			*from_addr;	/* bare address, or NULL */
	char			*to;
	char			*subject;
	char			*date;		/* "2026-01-02 10:00:00 +0100" */
	char			*message_id;	/* "<id@host>", or NULL */
	char			*references;	/* "<a> <b>", or NULL */
	char			*in_reply_to;	/* "<a>" (rarely more), or NULL */
	char			*text;		/* the readable body */
	size_t			 text_total;	/* bytes before the cut */
	int			 text_cut;	/* text hit the bound */
	int			 from_html;	/* text was reduced from HTML */
	int			 auto_submitted; /* bulk, list or auto reply */
	int			 malformed;	/* parts could not be read */
	struct mime_attachment	*att;
	size_t			 natt;
	size_t			 natt_total;	/* before MIME_MAX_ATTACH */
};

/* Parse one whole message (or just its header block). Never fails on bad
 * input: what cannot be read is left empty and malformed is set. text_max
 * 0 means MIME_TEXT_MAX. */
void mime_parse(const char *data, size_t len, size_t text_max,
    struct mime_msg *out);
void mime_msg_free(struct mime_msg *);

/* A header value with RFC 2047 words decoded, unfolded, control characters
 * dropped, at most MIME_HEADER_MAX bytes. Caller frees. */
char *mime_decode_header(const char *raw, size_t len);
/* Bytes in charset to UTF-8; unknown charsets and bad bytes come out as
 * U+FFFD rather than failing. Caller frees. */
char *mime_to_utf8(const char *charset, const char *in, size_t len);
/* Readable text from HTML: tags stripped, script, style and comments
 * dropped, common entities decoded, blank runs collapsed; at most max
 * bytes. Input must be UTF-8. Caller frees. */
char *mime_html_text(const char *html, size_t len, size_t max);
/* Copy of s with invalid UTF-8 replaced by U+FFFD and NUL and control
 * characters other than \n and \t dropped. Caller frees. */
char *mime_utf8_clean(const char *s, size_t len);

/* The run's prompt: the message's headers and text between markers that
 * carry nonce, which the mail cannot guess, with a preamble saying it is
 * untrusted data. note, when not NULL, follows the markers (e.g. that the
 * body was too large to read). Caller frees. */
char *mime_prompt(const struct mime_msg *, const char *mailbox,
    const char *nonce, const char *note);

#endif
