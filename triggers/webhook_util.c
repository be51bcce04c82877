/* The webhook trigger's pure helpers: HMAC signature check and prompt
 * rendering (see webhook.h). Kept apart from webhook.c so they can be tested
 * without the loop and the engine. */
#include "triggers/webhook.h"

#include <errno.h>
#include <gnutls/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

int
wh_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len,
    unsigned char out[WH_SHA256_LEN])
{
	static const char empty[1];

	/* gnutls wants real pointers even for empty inputs. */
	if (key == NULL || keylen == 0)
		key = empty;
	if (data == NULL || len == 0)
		data = empty;
	if (gnutls_hmac_fast(GNUTLS_MAC_SHA256, key, keylen, data, len,
	    out) < 0)
		return -1;
	return 0;
}

static int
hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Decode the header before comparing, so the comparison is of two fixed-size
 * digests and takes the same time whatever the sender put there. Hex case is
 * not significant: some senders print uppercase, and it carries no secret.
 */
int
wh_verify_signature(const char *secret, const void *body, size_t len,
    const char *header)
{
	unsigned char want[WH_SHA256_LEN], got[WH_SHA256_LEN];
	size_t plen = strlen(WH_SIG_PREFIX);
	const char *hex;
	int ok;

	if (header == NULL || *header == '\0')
		return WH_SIG_MISSING;
	if (strncmp(header, WH_SIG_PREFIX, plen) != 0)
		return WH_SIG_MALFORMED;
	hex = header + plen;
	if (strlen(hex) != 2 * WH_SHA256_LEN)
		return WH_SIG_MALFORMED;
	for (size_t i = 0; i < WH_SHA256_LEN; i++) {
		int hi = hexval((unsigned char)hex[2 * i]);
		int lo = hexval((unsigned char)hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return WH_SIG_MALFORMED;
		got[i] = (unsigned char)(hi << 4 | lo);
	}
	if (wh_hmac_sha256(secret, secret ? strlen(secret) : 0, body, len,
	    want) == -1)
		return WH_SIG_ERROR;
	ok = ct_equal(want, got, sizeof(want));
	explicit_bzero(want, sizeof(want));
	return ok ? WH_SIG_OK : WH_SIG_MISMATCH;
}

const char *
wh_sig_reason(int r)
{
	switch (r) {
	case WH_SIG_OK:
		return "signature valid";
	case WH_SIG_MISSING:
		return "missing " WH_SIG_HEADER " header";
	case WH_SIG_MALFORMED:
		return "malformed " WH_SIG_HEADER " header (want sha256= "
		    "and 64 hex digits)";
	case WH_SIG_MISMATCH:
		return "signature does not match the body";
	default:
		return "signature could not be checked";
	}
}

/* Length of the valid UTF-8 sequence at p (n bytes left), or 0 when the byte
 * at p does not start one. Overlong forms, surrogates and code points past
 * U+10FFFF are invalid (RFC 3629). */
static size_t
utf8_seq(const unsigned char *p, size_t n)
{
	unsigned char c = p[0];
	unsigned char lo = 0x80, hi = 0xbf;
	size_t need;

	if (c >= 0x01 && c <= 0x7f)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		need = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		need = 3;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		need = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else
		return 0;	/* NUL, stray continuation, c0, c1, f5..ff */
	if (n < need)
		return 0;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < need; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return need;
}

void
wh_utf8_sanitize(struct buf *out, const void *body, size_t len)
{
	const unsigned char *p = body;
	size_t i = 0, run = 0;

	while (i < len) {
		size_t k = utf8_seq(p + i, len - i);

		if (k == 0) {
			buf_add(out, p + i - run, run);
			run = 0;
			buf_adds(out, "\xef\xbf\xbd");	/* U+FFFD */
			i++;
			continue;
		}
		i += k;
		run += k;
	}
	if (run > 0)
		buf_add(out, p + len - run, run);
}

/*
 * Values are cleaned once, then inserted wherever their name appears; the
 * text inserted is never scanned again, so a value holding "{{body}}" stays
 * as it is. A "{{" that names no variable is copied through.
 */
char *
wh_render_vars(const char *tmpl, const struct wh_var *vars, size_t n)
{
	struct buf *text = xcalloc(n ? n : 1, sizeof(*text));
	struct buf out;
	const char *p = tmpl, *hit;
	char *res = NULL;

	buf_init(&out);
	for (size_t i = 0; i < n; i++) {
		buf_init(&text[i]);
		wh_utf8_sanitize(&text[i], vars[i].value, vars[i].len);
	}
	while ((hit = strstr(p, "{{")) != NULL) {
		size_t i, nl = 0;

		for (i = 0; i < n; i++) {
			nl = strlen(vars[i].name);
			if (strncmp(hit + 2, vars[i].name, nl) == 0 &&
			    strncmp(hit + 2 + nl, "}}", 2) == 0)
				break;
		}
		if (i == n) {
			/* One brace only: "{{{body}}}" holds a variable. */
			if (out.len + (size_t)(hit - p) + 1 > WH_MAX_PROMPT)
				goto toobig;
			buf_add(&out, p, (size_t)(hit - p) + 1);
			p = hit + 1;
			continue;
		}
		if (out.len + (size_t)(hit - p) + text[i].len > WH_MAX_PROMPT)
			goto toobig;
		buf_add(&out, p, (size_t)(hit - p));
		buf_add(&out, text[i].data, text[i].len);
		p = hit + 2 + nl + 2;
	}
	if (out.len + strlen(p) > WH_MAX_PROMPT)
		goto toobig;
	buf_adds(&out, p);
	res = buf_steal(&out);
	goto done;
toobig:
	errno = E2BIG;
done:
	buf_free(&out);
	for (size_t i = 0; i < n; i++)
		buf_free(&text[i]);
	free(text);
	return res;
}

char *
wh_render(const char *tmpl, const void *body, size_t len)
{
	struct wh_var v = { "body", body, len };

	return wh_render_vars(tmpl, &v, 1);
}

/*
 * "Authorization: Bearer TOKEN" (the scheme in any case, RFC 7235). Both
 * tokens are hashed before the comparison so that it takes the same time
 * whatever their lengths and contents.
 */
int
wh_check_bearer(const char *token, const char *header)
{
	unsigned char want[WH_SHA256_LEN], got[WH_SHA256_LEN];
	const char *p;
	size_t len;
	int ok;

	if (header == NULL || *header == '\0')
		return WH_AUTH_MISSING;
	if (strncasecmp(header, "Bearer ", 7) != 0)
		return WH_AUTH_MALFORMED;
	for (p = header + 7; *p == ' '; p++)
		;
	len = strlen(p);
	while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
		len--;
	if (len == 0 || memchr(p, ' ', len) != NULL)
		return WH_AUTH_MALFORMED;
	if (gnutls_hash_fast(GNUTLS_DIG_SHA256, token, strlen(token), want) < 0 ||
	    gnutls_hash_fast(GNUTLS_DIG_SHA256, p, len, got) < 0)
		return WH_AUTH_MISMATCH;
	ok = ct_equal(want, got, sizeof(want));
	explicit_bzero(want, sizeof(want));
	return ok ? WH_AUTH_OK : WH_AUTH_MISMATCH;
}

const char *
wh_auth_reason(int r)
{
	switch (r) {
	case WH_AUTH_OK:
		return "token valid";
	case WH_AUTH_MISSING:
		return "missing Authorization header";
	case WH_AUTH_MALFORMED:
		return "malformed Authorization header (want Bearer TOKEN)";
	default:
		return "wrong bearer token";
	}
}
