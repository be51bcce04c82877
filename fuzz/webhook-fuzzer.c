/* libFuzzer target for the webhook body path: the signature check, the UTF-8
 * cleaning and the prompt rendering, with what each promises checked against
 * an independent model of it.
 *
 * Input: byte 0 picks the template (a fixed one, or the header line itself
 * when its high bit is set); then a header line up to the first '\n'; the
 * rest is the body. The header is checked as an X-Hub-Signature-256 value
 * under a fixed secret; the body is cleaned and rendered (a template
 * taken from the header can pass WH_MAX_PROMPT, which must give E2BIG). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fuzz/fuzz_util.h"
#include "triggers/webhook.h"
#include "util.h"

#define FUZZ_MAX_HEADER	512
#define FUZZ_SECRET	"fuzz-secret"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static const char *const templates[] = {
	"{{body}}",
	"Event: {{body}}",
	"{{{body}}}",
	"{{body}}{{body}}",
	"a {{body}} b {{ body }} c {{bod",
	"{{{{body}}}}",
	"no variable here",
	"",
	"{{event}} {{body}}",
	"\xc3\xa9t\xc3\xa9 {{body}} \xe2\x82\xac",
};
#define NTEMPLATES	(sizeof(templates) / sizeof(templates[0]))

/* Valid UTF-8 (fuzz_util.h) without NUL bytes: what the cleaner promises. */
static int
valid_utf8(const unsigned char *s, size_t n)
{
	return memchr(s, '\0', n) == NULL && fuzz_utf8_ok(s, n);
}

/* The cleaned body: every byte is either copied or becomes U+FFFD, so the
 * length is len + 2 * (replaced bytes); valid input comes back unchanged. */
static void
check_sanitize(const unsigned char *body, size_t len, struct buf *clean)
{
	size_t fffd = 0;

	buf_init(clean);
	wh_utf8_sanitize(clean, body, len);
	fuzz_check(clean->len >= len && clean->len <= 3 * len);
	fuzz_check((clean->len - len) % 2 == 0);
	fuzz_check(valid_utf8((const unsigned char *)clean->data, clean->len));
	for (size_t i = 0; i + 3 <= clean->len; i++)
		if (memcmp(clean->data + i, "\xef\xbf\xbd", 3) == 0)
			fffd++;
	/* Each replaced byte adds one U+FFFD (the body may carry its own). */
	fuzz_check(fffd >= (clean->len - len) / 2);
	if (valid_utf8(body, len))
		fuzz_check(clean->len == len && (len == 0 ||
		    memcmp(clean->data, body, len) == 0));
}

/* Expand tmpl the plain way: left to right, each "{{NAME}}" replaced by its
 * cleaned value and the scan going on after it, never into it. */
static void
expand(struct buf *out, const char *tmpl, const char *const *names,
    const struct buf *vals, size_t n)
{
	size_t i = 0, tl = strlen(tmpl);

	buf_init(out);
	while (i < tl) {
		size_t k;

		for (k = 0; k < n; k++) {
			size_t nl = strlen(names[k]);

			if (tl - i >= nl + 4 && memcmp(tmpl + i, "{{", 2) == 0 &&
			    memcmp(tmpl + i + 2, names[k], nl) == 0 &&
			    memcmp(tmpl + i + 2 + nl, "}}", 2) == 0)
				break;
		}
		if (k < n) {
			buf_add(out, vals[k].data, vals[k].len);
			i += strlen(names[k]) + 4;
		} else
			buf_addc(out, tmpl[i++]);
	}
}

static void
check_render(const char *tmpl, const unsigned char *body, size_t len,
    const struct buf *clean, const char *event, size_t evlen)
{
	static const char *const names[] = { "body", "event" };
	struct wh_var vars[2] = {
		{ "body", body, len },
		{ "event", event, evlen },
	};
	struct buf vals[2], want;
	char *got;

	/* wh_render: the body only. A template from the input may repeat
	 * {{body}} enough to pass the bound: then NULL and E2BIG, nothing
	 * cut short. */
	errno = 0;
	got = wh_render(tmpl, body, len);
	expand(&want, tmpl, names, clean, 1);
	if (want.len > WH_MAX_PROMPT) {
		fuzz_check(got == NULL && errno == E2BIG);
		buf_free(&want);
		return;
	}
	fuzz_check(got != NULL);
	fuzz_check(strlen(got) == want.len);
	fuzz_check(want.len == 0 || memcmp(got, want.data, want.len) == 0);
	if (valid_utf8((const unsigned char *)tmpl, strlen(tmpl)))
		fuzz_check(valid_utf8((const unsigned char *)got, strlen(got)));
	free(got);
	buf_free(&want);

	/* wh_render_vars: two variables, each inserted as data. */
	vals[0] = *clean;
	buf_init(&vals[1]);
	wh_utf8_sanitize(&vals[1], event, evlen);
	errno = 0;
	got = wh_render_vars(tmpl, vars, 2);
	expand(&want, tmpl, names, vals, 2);
	if (want.len > WH_MAX_PROMPT)
		fuzz_check(got == NULL && errno == E2BIG);
	else {
		fuzz_check(got != NULL && strlen(got) == want.len);
		fuzz_check(want.len == 0 || memcmp(got, want.data, want.len) == 0);
	}
	free(got);
	buf_free(&want);
	buf_free(&vals[1]);
}

static void
hex(char *out, const unsigned char *d, size_t n)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 0xf];
	}
	out[2 * n] = '\0';
}

/* The verdict on the fuzzed header, predicted independently, and a correct
 * signature of the body (either hex case) that must pass while any one
 * changed digit must not. */
static void
check_signature(const char *header, const unsigned char *body, size_t len)
{
	unsigned char mac[WH_SHA256_LEN];
	char good[sizeof(WH_SIG_PREFIX) + 2 * WH_SHA256_LEN];
	size_t plen = strlen(WH_SIG_PREFIX), hl = strlen(header);
	int r, want;

	fuzz_check(wh_hmac_sha256(FUZZ_SECRET, strlen(FUZZ_SECRET), body, len,
	    mac) == 0);
	memcpy(good, WH_SIG_PREFIX, plen);
	hex(good + plen, mac, sizeof(mac));

	if (hl == 0)
		want = WH_SIG_MISSING;
	else if (hl != plen + 2 * WH_SHA256_LEN ||
	    memcmp(header, WH_SIG_PREFIX, plen) != 0 ||
	    strspn(header + plen, "0123456789abcdefABCDEF") !=
	    2 * WH_SHA256_LEN)
		want = WH_SIG_MALFORMED;
	else if (strcasecmp(header + plen, good + plen) == 0)
		want = WH_SIG_OK;
	else
		want = WH_SIG_MISMATCH;
	r = wh_verify_signature(FUZZ_SECRET, body, len, header);
	fuzz_check(r == want);
	fuzz_check(wh_sig_reason(r) != NULL);

	fuzz_check(wh_verify_signature(FUZZ_SECRET, body, len, good) == WH_SIG_OK);
	for (size_t i = plen; good[i] != '\0'; i++)
		if (good[i] >= 'a' && good[i] <= 'f')
			good[i] = (char)(good[i] - 'a' + 'A');
	fuzz_check(wh_verify_signature(FUZZ_SECRET, body, len, good) == WH_SIG_OK);
	if (len > 0) {
		size_t at = plen + body[0] % (2 * WH_SHA256_LEN);

		good[at] = good[at] == '0' ? '1' : '0';
		fuzz_check(wh_verify_signature(FUZZ_SECRET, body, len, good) ==
		    WH_SIG_MISMATCH);
	}
	if (want == WH_SIG_OK)
		fuzz_check(wh_verify_signature("another secret", body, len,
		    header) == WH_SIG_MISMATCH);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const unsigned char *nl, *body;
	char header[FUZZ_MAX_HEADER + 1];
	const char *tmpl;
	struct buf clean;
	size_t hl, len;
	uint8_t pick;

	if (size < 1 || size > FUZZ_MAX_INPUT)
		return 0;
	pick = data[0];
	data++;
	size--;
	nl = memchr(data, '\n', size < FUZZ_MAX_HEADER ? size :
	    FUZZ_MAX_HEADER);
	hl = nl != NULL ? (size_t)(nl - data) : 0;
	memcpy(header, data, hl);
	header[hl] = '\0';		/* a NUL inside ends the header early */
	body = nl != NULL ? nl + 1 : data;
	len = size - (size_t)(body - data);
	tmpl = pick & 0x80 ? header : templates[pick % NTEMPLATES];

	check_signature(header, body, len);
	check_sanitize(body, len, &clean);
	check_render(tmpl, body, len, &clean, header, strlen(header));
	buf_free(&clean);
	return 0;
}
