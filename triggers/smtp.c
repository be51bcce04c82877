/*
 * Replies by mail (smtp.h). The model writes the body and nothing else: the
 * recipient is the original sender's checked address, every header value is
 * made here from checked parts and can carry no line break, and the body is
 * quoted-printable, so no text the model or the sender chose can add a
 * header, a recipient or end the SMTP data early.
 */
#include "triggers/smtp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "triggers/mime.h"

#define SMTP_QP_LINE	76	/* RFC 2045 6.7 */
#define SMTP_EW_BYTES	42	/* raw bytes in one encoded word: 56 base64 */

int
smtp_addr_ok(const char *s)
{
	const char *at;
	size_t n;

	if (s == NULL || (n = strlen(s)) == 0 || n > MIME_ADDR_MAX)
		return 0;
	at = strchr(s, '@');
	if (at == NULL || at == s || at[1] == '\0' || strchr(at + 1, '@'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= ' ' || s[i] >= 0x7f ||
		    strchr("<>()[],;:\\\"", s[i]) != NULL)
			return 0;
	return 1;
}

void
smtp_token(char out[SMTP_TOKEN_LEN])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char r[SMTP_TOKEN_BYTES];

	random_bytes(r, sizeof(r));
	for (size_t i = 0; i < sizeof(r); i++) {
		out[2 * i] = hex[r[i] >> 4];
		out[2 * i + 1] = hex[r[i] & 15];
	}
	out[2 * sizeof(r)] = '\0';
}

/* One line: control characters (CR and LF among them) become spaces. */
static char *
one_line(const char *s, size_t max)
{
	char *c = mime_utf8_clean(s, strlen(s)), *p;
	size_t n;

	for (p = c; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20)
			*p = ' ';
	n = strlen(c);
	if (n > max) {
		while (max > 0 && ((unsigned char)c[max] & 0xc0) == 0x80)
			max--;
		c[max] = '\0';
	}
	return c;
}

char *
smtp_re_subject(const char *subject)
{
	char *s = one_line(subject != NULL ? subject : "", SMTP_SUBJECT_MAX);
	const char *p = s;
	char *out;

	while (*p == ' ')
		p++;
	if (strncasecmp(p, "re:", 3) == 0)
		out = xstrdup(p);
	else
		out = xasprintf("Re: %s", p);
	free(s);
	return out;
}

static int
needs_encoding(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s >= 0x7f || *s == '\r' || *s == '\n')
			return 1;
	return 0;
}

static void
base64(struct buf *b, const unsigned char *s, size_t n)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop"
	    "qrstuvwxyz0123456789+/";

	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)s[i] << 16;

		if (i + 1 < n)
			v |= (unsigned)s[i + 1] << 8;
		if (i + 2 < n)
			v |= s[i + 2];
		buf_addc(b, tab[(v >> 18) & 63]);
		buf_addc(b, tab[(v >> 12) & 63]);
		buf_addc(b, i + 1 < n ? tab[(v >> 6) & 63] : '=');
		buf_addc(b, i + 2 < n ? tab[v & 63] : '=');
	}
}

/* A subject header: plain when it is short ASCII, else RFC 2047 encoded
 * words of whole UTF-8 characters, one per folded line. */
static void
add_subject(struct buf *b, const char *subject)
{
	const unsigned char *s = (const unsigned char *)subject;
	size_t n = strlen(subject), i = 0, k;

	if (!needs_encoding(subject) && n <= 70) {
		buf_addf(b, "Subject: %s\r\n", subject);
		return;
	}
	buf_adds(b, "Subject:");
	while (i < n) {
		k = n - i < SMTP_EW_BYTES ? n - i : SMTP_EW_BYTES;
		while (k > 0 && i + k < n && (s[i + k] & 0xc0) == 0x80)
			k--;
		if (k == 0)
			k = 1;
		buf_adds(b, i == 0 ? " =?UTF-8?B?" : "\r\n =?UTF-8?B?");
		base64(b, s + i, k);
		buf_adds(b, "?=");
		i += k;
	}
	buf_adds(b, "\r\n");
}

/* One "<...>" message id in printable ASCII, nothing inside that breaks a
 * header or opens another id. */
static int
id_ok(const char *id)
{
	size_t n = id != NULL ? strlen(id) : 0;

	if (n < 3 || n > MIME_ID_MAX || id[0] != '<' || id[n - 1] != '>')
		return 0;
	for (size_t i = 1; i + 1 < n; i++)
		if (id[i] <= ' ' || id[i] >= 0x7f || id[i] == '<' ||
		    id[i] == '>')
			return 0;
	return 1;
}

/* Message ids checked again: one "<...>" each, nothing that breaks. */
static void
add_ids(struct buf *b, const char *name, const char *refs, const char *last)
{
	char *copy = xstrdup(refs != NULL ? refs : ""), *tok, *save = NULL;
	int n = 0;

	for (tok = strtok_r(copy, " \t", &save); tok != NULL;
	    tok = strtok_r(NULL, " \t", &save)) {
		if (!id_ok(tok))
			continue;
		buf_addf(b, "%s%s", n++ ? "\r\n " : name, tok);
	}
	free(copy);
	if (last != NULL)
		buf_addf(b, "%s%s", n++ ? "\r\n " : name, last);
	if (n > 0)
		buf_adds(b, "\r\n");
}

static void
qp_byte(struct buf *b, unsigned char c, size_t *col)
{
	static const char hex[] = "0123456789ABCDEF";

	if (*col + 3 > SMTP_QP_LINE - 1) {
		buf_adds(b, "=\r\n");
		*col = 0;
	}
	buf_addc(b, '=');
	buf_addc(b, hex[c >> 4]);
	buf_addc(b, hex[c & 15]);
	*col += 3;
}

/* Quoted-printable (RFC 2045 6.7) with CRLF line ends. A line's leading dot
 * and "From " are encoded too, so neither SMTP nor an mbox reader can take
 * a line of the body for anything but text. */
static void
add_qp(struct buf *b, const char *text)
{
	const unsigned char *s = (const unsigned char *)text;
	size_t col = 0;

	for (size_t i = 0; s[i] != '\0'; i++) {
		unsigned char c = s[i];
		int eol = s[i + 1] == '\0' || s[i + 1] == '\n';

		if (c == '\r')
			continue;
		if (c == '\n') {
			buf_adds(b, "\r\n");
			col = 0;
			continue;
		}
		if ((c == '.' && col == 0) || (c == 'F' && col == 0 &&
		    strncmp((const char *)s + i, "From ", 5) == 0) ||
		    c == '=' || c >= 0x7f || (c < ' ' && c != '\t') ||
		    ((c == ' ' || c == '\t') && eol)) {
			qp_byte(b, c, &col);
			continue;
		}
		if (col + 1 > SMTP_QP_LINE - 1) {
			buf_adds(b, "=\r\n");
			col = 0;
		}
		buf_addc(b, (char)c);
		col++;
	}
	buf_adds(b, "\r\n");
}

int
smtp_build(const struct smtp_reply *r, int64_t now, struct buf *out,
    char *err, size_t errlen)
{
	char date[64], tok[SMTP_TOKEN_LEN], *subject, *body;
	const char *domain;
	time_t t = (time_t)(now / 1000);
	struct tm tm;

	if (!smtp_addr_ok(r->from) || !smtp_addr_ok(r->to)) {
		snprintf(err, errlen, "not a plain address: %s",
		    smtp_addr_ok(r->from) ? "the recipient" : "the sender");
		return -1;
	}
	gmtime_r(&t, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S +0000", &tm);
	domain = strchr(r->from, '@') + 1;
	subject = smtp_re_subject(r->subject);
	buf_addf(out, "From: <%s>\r\n", r->from);
	buf_addf(out, "To: <%s>\r\n", r->to);
	add_subject(out, subject);
	buf_addf(out, "Date: %s\r\n", date);
	/* Random, never derived from the mail answered: a reply to this
	 * one continues the conversation only by naming it (imap.c). */
	if (id_ok(r->message_id))
		buf_addf(out, "Message-ID: %s\r\n", r->message_id);
	else {
		smtp_token(tok);
		buf_addf(out, "Message-ID: <af.%s@%s>\r\n", tok, domain);
	}
	if (id_ok(r->in_reply_to)) {
		buf_addf(out, "In-Reply-To: %s\r\n", r->in_reply_to);
		add_ids(out, "References: ", r->references, r->in_reply_to);
	} else
		add_ids(out, "References: ", r->references, NULL);
	/* RFC 3834: other responders must not answer this one, which keeps
	 * two bots from mailing each other forever. */
	buf_adds(out, "Auto-Submitted: auto-replied\r\n");
	buf_adds(out, "MIME-Version: 1.0\r\n");
	buf_adds(out, "Content-Type: text/plain; charset=utf-8\r\n");
	buf_adds(out, "Content-Transfer-Encoding: quoted-printable\r\n\r\n");
	body = mime_utf8_clean(r->body, strlen(r->body));
	add_qp(out, body);
	free(body);
	free(subject);
	return 0;
}

struct upload {
	const char		*data;
	size_t			 len;
	size_t			 off;
};

static size_t
read_cb(char *dst, size_t size, size_t n, void *arg)
{
	struct upload *u = arg;
	size_t want = size * n, left = u->len - u->off;

	if (want > left)
		want = left;
	memcpy(dst, u->data + u->off, want);
	u->off += want;
	return want;
}

static int
progress_cb(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut,
    curl_off_t un)
{
	const atomic_int *abort_flag = arg;

	return abort_flag != NULL && atomic_load(abort_flag) ? 1 : 0;
}

/* smtps:// for implicit TLS; smtp:// with STARTTLS required (never a
 * plaintext fallback). An IPv6 literal goes in brackets. */
static char *
smtp_url(const struct cfg_smtp *s)
{
	const char *scheme = s->tls == TLS_IMPLICIT ? "smtps" : "smtp";

	if (strchr(s->host, ':') != NULL)
		return xasprintf("%s://[%s]:%ld", scheme, s->host, s->port);
	return xasprintf("%s://%s:%ld", scheme, s->host, s->port);
}

int
smtp_send(const struct cfg_smtp *s, const char *capath, const char *from,
    const char *to, const char *msg, size_t len, const atomic_int *abort,
    char *err, size_t errlen)
{
	char ebuf[CURL_ERROR_SIZE], *url, *mfrom, *rcpt;
	struct curl_slist *rcpts = NULL;
	struct upload u = { msg, len, 0 };
	CURLcode rc;
	CURL *e;

	if (!smtp_addr_ok(from) || !smtp_addr_ok(to)) {
		snprintf(err, errlen, "not a plain address");
		return -1;
	}
	if ((e = curl_easy_init()) == NULL) {
		snprintf(err, errlen, "curl_easy_init failed");
		return -1;
	}
	url = smtp_url(s);
	mfrom = xasprintf("<%s>", from);
	rcpt = xasprintf("<%s>", to);
	rcpts = curl_slist_append(rcpts, rcpt);
	ebuf[0] = '\0';
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, ebuf);
	curl_easy_setopt(e, CURLOPT_MAIL_FROM, mfrom);
	curl_easy_setopt(e, CURLOPT_MAIL_RCPT, rcpts);
	curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(e, CURLOPT_READFUNCTION, read_cb);
	curl_easy_setopt(e, CURLOPT_READDATA, &u);
	curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(e, CURLOPT_USE_SSL, (long)CURLUSESSL_ALL);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(e, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	/* As in http.c: libcurl with GnuTLS loads both, so the file adds to
	 * the system trust rather than replace it. */
	if (s->ca_file != NULL) {
		curl_easy_setopt(e, CURLOPT_CAINFO, s->ca_file);
		if (capath != NULL)
			curl_easy_setopt(e, CURLOPT_CAPATH, capath);
	}
	if (s->username != NULL) {
		curl_easy_setopt(e, CURLOPT_USERNAME, s->username);
		curl_easy_setopt(e, CURLOPT_PASSWORD, s->password != NULL ?
		    s->password : "");
	}
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
	    (long)SMTP_CONNECT_TIMEOUT_MS);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)SMTP_TIMEOUT_MS);
	curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, progress_cb);
	curl_easy_setopt(e, CURLOPT_XFERINFODATA, (void *)abort);
	rc = curl_easy_perform(e);
	if (rc != CURLE_OK)
		snprintf(err, errlen, "%s", ebuf[0] ? ebuf :
		    curl_easy_strerror(rc));
	curl_slist_free_all(rcpts);
	curl_easy_cleanup(e);
	free(url);
	free(mfrom);
	free(rcpt);
	return rc == CURLE_OK ? 0 : -1;
}
