/* The webhook trigger's pure parts: HMAC-SHA256, the X-Hub-Signature-256
 * check, UTF-8 clean-up and prompt rendering. Expected digests were computed
 * with Python's hmac module; the first is GitHub's documented example and
 * the RFC 4231 case 1 is there too. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "triggers/webhook.h"
#include "tt.h"
#include "util.h"

static void
hex(const unsigned char *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

static const struct {
	const char	*key;
	size_t		 keylen;
	const char	*msg;
	const char	*want;
} kat[] = {
	{ "It's a Secret to Everybody", 26, "Hello, World!",
	  "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17" },
	{ "key", 3, "The quick brown fox jumps over the lazy dog",
	  "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8" },
	{ "", 0, "",
	  "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad" },
	{ "s3cret", 6, "{\"action\":\"opened\"}",
	  "3ef76f8f67c2839504b3534592c6f42cabaa13dca21ed349ad19be2f2124b158" },
	{ "\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b"
	  "\x0b\x0b\x0b\x0b", 20, "Hi There",
	  "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7" },
};

static void
test_hmac_kat(void)
{
	unsigned char d[WH_SHA256_LEN];
	char h[2 * WH_SHA256_LEN + 1];

	for (size_t i = 0; i < nitems(kat); i++) {
		tt_int_op(wh_hmac_sha256(kat[i].key, kat[i].keylen, kat[i].msg,
		    strlen(kat[i].msg), d), ==, 0);
		hex(d, sizeof(d), h);
		tt_str_op(h, ==, kat[i].want);
	}
end:;
}

#define GH_SECRET	"It's a Secret to Everybody"
#define GH_BODY		"Hello, World!"
#define GH_SIG	"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

static int
verify(const char *header)
{
	return wh_verify_signature(GH_SECRET, GH_BODY, strlen(GH_BODY), header);
}

static void
test_sig_good(void)
{
	tt_int_op(verify(GH_SIG), ==, WH_SIG_OK);
	/* Hex case carries no secret: uppercase digits are accepted. */
	tt_int_op(verify("sha256=757107EA0EB2509FC211221CCE984B8A37570B6D7586"
	    "C22C46F4379C8B043E17"), ==, WH_SIG_OK);
	/* An empty body is signed like any other. */
	tt_int_op(wh_verify_signature("s", "", 0, "sha256="
	    "64eca07cce67929c357d63d0a4aec207"
	    "e774800403298914fc04e88ce02ac49f"), ==, WH_SIG_OK);
end:;
}

static void
test_sig_bad(void)
{
	/* One digit off, at the start and at the end. */
	tt_int_op(verify("sha256=857107ea0eb2509fc211221cce984b8a37570b6d7586c22"
	    "c46f4379c8b043e17"), ==, WH_SIG_MISMATCH);
	tt_int_op(verify("sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22"
	    "c46f4379c8b043e18"), ==, WH_SIG_MISMATCH);
	/* Right signature, other body or other secret. */
	tt_int_op(wh_verify_signature(GH_SECRET, "Hello, World?", 13, GH_SIG), ==,
	    WH_SIG_MISMATCH);
	tt_int_op(wh_verify_signature("another secret", GH_BODY,
	    strlen(GH_BODY), GH_SIG), ==, WH_SIG_MISMATCH);
	/* The length given counts, not the NUL. */
	tt_int_op(wh_verify_signature(GH_SECRET, GH_BODY "\0x",
	    strlen(GH_BODY) + 2, GH_SIG), ==, WH_SIG_MISMATCH);
end:;
}

static void
test_sig_missing(void)
{
	tt_int_op(verify(NULL), ==, WH_SIG_MISSING);
	tt_int_op(verify(""), ==, WH_SIG_MISSING);
end:;
}

static void
test_sig_malformed(void)
{
	static const char *const bad[] = {
		/* wrong or missing prefix */
		"757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
		"sha1=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b0"
		    "43e17",
		"SHA256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8"
		    "b043e17",
		"sha256:757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8"
		    "b043e17",
		" sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c"
		    "8b043e17",
		"sha256=",
		"sha256",
		/* odd length, short, long */
		"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8"
		    "b043e1",
		"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8"
		    "b043e",
		"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8"
		    "b043e1700",
		"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8"
		    "b043e17 ",
		/* not hex */
		"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8"
		    "b043e1g",
		"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8"
		    "b043e-7",
		"sha256=+57107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8"
		    "b043e17",
		"sha256=757107ea0eb2509fc211221cce984b8a 7570b6d7586c22c46f4379c8"
		    "b043e17",
		/* two values */
		"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8"
		    "b043e17,sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c"
		    "22c46f4379c8b043e17",
	};

	for (size_t i = 0; i < nitems(bad); i++) {
		if (verify(bad[i]) != WH_SIG_MALFORMED)
			tt_fail_msg("case %zu \"%s\": %d", i, bad[i],
			    verify(bad[i]));
	}
	tt_assert(strstr(wh_sig_reason(WH_SIG_MALFORMED), "malformed") != NULL);
	tt_assert(strstr(wh_sig_reason(WH_SIG_MISSING), "missing") != NULL);
end:;
}

static void
check_render(const char *tmpl, const char *body, size_t len, const char *want)
{
	char *got = wh_render(tmpl, body, len);

	if (got == NULL || strcmp(got, want) != 0)
		tt_fail_msg("render(\"%s\", \"%.*s\"): \"%s\", want \"%s\"",
		    tmpl, (int)len, body, got ? got : "(null)", want);
end:
	free(got);
}

#define RENDER(t, b, w) check_render(t, b, sizeof(b) - 1, w)

static void
test_render(void)
{
	RENDER("{{body}}", "hello", "hello");
	RENDER("A GitHub event arrived:\n{{body}}", "{\"a\":1}",
	    "A GitHub event arrived:\n{\"a\":1}");
	RENDER("{{body}} and {{body}}{{body}}", "x", "x and xx");
	RENDER("no placeholder here", "ignored", "no placeholder here");
	RENDER("", "ignored", "");
	RENDER("[{{body}}]", "", "[]");
	/* Near misses are left alone. */
	RENDER("{{ body }} {body} {{Body}} {{body", "x",
	    "{{ body }} {body} {{Body}} {{body");
	RENDER("{{{body}}}", "x", "{x}");
}

/* The body is data: a template inside it is not expanded again, and it is
 * not mistaken for part of the configured template. */
static void
test_render_no_reexpansion(void)
{
	RENDER("<{{body}}>", "{{body}}", "<{{body}}>");
	RENDER("{{body}}|{{body}}", "{{body}}{{body}}",
	    "{{body}}{{body}}|{{body}}{{body}}");
	RENDER("{{bo{{body}}dy}}", "X", "{{boXdy}}");
	RENDER("{{body}}", "{{", "{{");
	RENDER("{{body}}body}}", "{{", "{{body}}");
}

static void
test_render_utf8(void)
{
	/* Valid UTF-8 passes through untouched. */
	RENDER("{{body}}", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
	    "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	/* Each bad byte becomes U+FFFD. */
	RENDER("{{body}}", "a\xff" "b", "a\xef\xbf\xbd" "b");
	RENDER("{{body}}", "\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd");
	/* Overlong, surrogate, past U+10FFFF, truncated at the end. */
	RENDER("{{body}}", "\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd");
	RENDER("{{body}}", "\xe0\x80\xaf",
	    "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	RENDER("{{body}}", "\xed\xa0\x80",
	    "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	RENDER("{{body}}", "\xf4\x90\x80\x80",
	    "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	RENDER("{{body}}", "x\xe2\x82", "x\xef\xbf\xbd\xef\xbf\xbd");
	/* Boundaries that are valid. */
	RENDER("{{body}}", "\xed\x9f\xbf\xf4\x8f\xbf\xbf\xc2\x80",
	    "\xed\x9f\xbf\xf4\x8f\xbf\xbf\xc2\x80");
	/* A NUL would cut the prompt short: it becomes U+FFFD too. */
	RENDER("{{body}}", "a\0b", "a\xef\xbf\xbd" "b");
}

static void
test_render_limit(void)
{
	size_t n = WH_MAX_PROMPT / 2 + 1;
	char *big = xmalloc(n), *got = NULL;

	memset(big, 'a', n);
	got = wh_render("{{body}}", big, n);
	tt_assert(got != NULL);
	tt_int_op(strlen(got), ==, n);
	free(got);
	errno = 0;
	got = wh_render("{{body}}{{body}}", big, n);
	tt_assert(got == NULL);
	tt_int_op(errno, ==, E2BIG);
end:
	free(got);
	free(big);
}

static void
test_bearer(void)
{
	tt_int_op(wh_check_bearer("t0k", "Bearer t0k"), ==, WH_AUTH_OK);
	tt_int_op(wh_check_bearer("t0k", "bearer t0k"), ==, WH_AUTH_OK);
	tt_int_op(wh_check_bearer("t0k", "Bearer  t0k "), ==, WH_AUTH_OK);
	tt_int_op(wh_check_bearer("t0k", NULL), ==, WH_AUTH_MISSING);
	tt_int_op(wh_check_bearer("t0k", ""), ==, WH_AUTH_MISSING);
	tt_int_op(wh_check_bearer("t0k", "Basic t0k"), ==, WH_AUTH_MALFORMED);
	tt_int_op(wh_check_bearer("t0k", "Bearer"), ==, WH_AUTH_MALFORMED);
	tt_int_op(wh_check_bearer("t0k", "Bearer "), ==, WH_AUTH_MALFORMED);
	tt_int_op(wh_check_bearer("t0k", "Bearer t0k x"), ==,
	    WH_AUTH_MALFORMED);
	tt_int_op(wh_check_bearer("t0k", "Bearer t0"), ==, WH_AUTH_MISMATCH);
	tt_int_op(wh_check_bearer("t0k", "Bearer t0kk"), ==, WH_AUTH_MISMATCH);
	tt_int_op(wh_check_bearer("t0k", "Bearer T0K"), ==, WH_AUTH_MISMATCH);
end:;
}

static void
test_render_vars(void)
{
	struct wh_var v[] = {
		{ "event", "push", 4 },
		{ "repo", "a/{{event}}", 11 },
		{ "body", "x\0y", 3 },
	};
	char *got;

	got = wh_render_vars("{{event}} {{repo}} {{body}} {{nope}} {{{event}}}",
	    v, nitems(v));
	tt_assert(got != NULL);
	tt_str_op(got, ==, "push a/{{event}} x\xef\xbf\xbdy {{nope}} {push}");
	free(got);
	got = wh_render_vars("plain", NULL, 0);
	tt_str_op(got, ==, "plain");
	free(got);
	got = NULL;
end:
	free(got);
}

static const struct tt_case cases[] = {
	{ "hmac_kat", test_hmac_kat },
	{ "sig_good", test_sig_good },
	{ "sig_bad", test_sig_bad },
	{ "sig_missing", test_sig_missing },
	{ "sig_malformed", test_sig_malformed },
	{ "render", test_render },
	{ "render_no_reexpansion", test_render_no_reexpansion },
	{ "render_utf8", test_render_utf8 },
	{ "render_limit", test_render_limit },
	{ "bearer", test_bearer },
	{ "render_vars", test_render_vars },
	{ NULL, NULL },
};

int
main(int argc, char **argv)
{
	return tt_main(argc, argv, cases);
}
