/* Replies of the IMAP trigger: an RFC 5322 message built from the original
 * mail's headers and the model's text (smtp_build, pure, unit-tested), and
 * its delivery with libcurl's SMTP (smtp_send, blocking: the IMAP worker
 * thread calls it, never the loop). */
#ifndef AF_SMTP_H
#define AF_SMTP_H

#include <stdatomic.h>
#include <stdint.h>

#include "config.h"
#include "util.h"

#define SMTP_TIMEOUT_MS		60000	/* one whole send */
#define SMTP_CONNECT_TIMEOUT_MS	20000
#define SMTP_SUBJECT_MAX	900	/* bytes of the subject kept */
#define SMTP_TOKEN_BYTES	16	/* random bytes in a Message-ID */
#define SMTP_TOKEN_LEN		(2 * SMTP_TOKEN_BYTES + 1)	/* hex, NUL */

/* What a reply is made of; every string is the caller's. */
struct smtp_reply {
	const char	*from;		/* our address */
	const char	*to;		/* the original sender */
	const char	*subject;	/* the original subject, UTF-8 */
	const char	*in_reply_to;	/* "<id>" of the original, or NULL */
	const char	*references;	/* its "<a> <b>", or NULL */
	const char	*message_id;	/* "<id>" of this reply, or NULL */
	const char	*body;		/* the model's text, UTF-8 */
};

/* SMTP_TOKEN_BYTES from the CSPRNG as lowercase hex: the part of a
 * Message-ID nobody who has not seen the message can name. */
void smtp_token(char out[SMTP_TOKEN_LEN]);

/* 1 when s is one plain address (local@domain, printable ASCII, nothing
 * that quotes, lists or breaks a header). */
int smtp_addr_ok(const char *s);
/* "Re: " + subject, not doubled, on one line. Caller frees. */
char *smtp_re_subject(const char *subject);
/* The whole message with CRLF line ends: headers (no value can carry a line
 * break), then the body as quoted-printable UTF-8. now_ms stamps the Date.
 * The Message-ID is r->message_id when that is one well-formed id, else a
 * fresh "<af.TOKEN@domain of from>". -1 when from or to is not a plain
 * address. */
int smtp_build(const struct smtp_reply *, int64_t now_ms, struct buf *out,
    char *err, size_t errlen);
/* Send msg from `from` to `to` over TLS (implicit, or STARTTLS required),
 * verified against the system trust plus s->ca_file (capath: the system
 * CA folder, so the file adds to it). *abort becoming nonzero stops the
 * transfer. Blocking: worker threads only. */
int smtp_send(const struct cfg_smtp *s, const char *capath, const char *from,
    const char *to, const char *msg, size_t len, const atomic_int *abort,
    char *err, size_t errlen);

#endif
