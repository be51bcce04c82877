/* Replies by mail: the message smtp_build makes (threading headers, the Re:
 * subject, quoted-printable body) and that nothing from the mail or the
 * model can add a header or a recipient. */
#include <stdlib.h>
#include <string.h>

#include "tt.h"
#include "triggers/smtp.h"
#include "util.h"

#define NOW	1767348000000LL		/* 2026-01-02 10:00:00 UTC */

/* The header block (up to the blank line) of a built message. */
static char *
headers_of(const char *msg)
{
	const char *end = strstr(msg, "\r\n\r\n");

	return xstrndup(msg, end != NULL ? (size_t)(end - msg) + 2 :
	    strlen(msg));
}

static int
count_lines_starting(const char *h, const char *prefix)
{
	int n = 0;
	size_t pl = strlen(prefix);

	for (const char *p = h; p != NULL && *p != '\0';) {
		if (strncmp(p, prefix, pl) == 0)
			n++;
		p = strstr(p, "\r\n");
		if (p != NULL)
			p += 2;
	}
	return n;
}

static void
test_threading_headers(void)
{
	struct smtp_reply r = { "bot@example.test", "alice@example.test",
	    "Question", "<q1@example.test>", "<r0@x> <r1@x>", NULL,
	    "Thanks.\n" };
	struct buf b;
	char err[128], *h = NULL;

	buf_init(&b);
	tt_int_op(smtp_build(&r, NOW, &b, err, sizeof(err)), ==, 0);
	h = headers_of(b.data);
	tt_assert(strstr(h, "From: <bot@example.test>\r\n") != NULL);
	tt_assert(strstr(h, "To: <alice@example.test>\r\n") != NULL);
	tt_assert(strstr(h, "Subject: Re: Question\r\n") != NULL);
	tt_assert(strstr(h, "Date: Fri, 02 Jan 2026 10:00:00 +0000\r\n")
	    != NULL);
	tt_assert(strstr(h, "In-Reply-To: <q1@example.test>\r\n") != NULL);
	tt_assert(strstr(h, "References: <r0@x>\r\n <r1@x>\r\n "
	    "<q1@example.test>\r\n") != NULL);
	tt_assert(strstr(h, "Message-ID: <af.") != NULL);
	tt_assert(strstr(h, "@example.test>\r\n") != NULL);
	tt_assert(strstr(h, "Auto-Submitted: auto-replied\r\n") != NULL);
	tt_assert(strstr(b.data, "\r\n\r\nThanks.\r\n") != NULL);
end:
	free(h);
	buf_free(&b);
}

static void
test_re_not_doubled(void)
{
	char *s;

	s = smtp_re_subject("Re: hello");
	tt_str_op(s, ==, "Re: hello");
	free(s);
	s = smtp_re_subject("RE:hello");
	tt_str_op(s, ==, "RE:hello");
	free(s);
	s = smtp_re_subject("");
	tt_str_op(s, ==, "Re: ");
	free(s);
	s = smtp_re_subject("a\r\nBcc: x@y");
	tt_str_op(s, ==, "Re: a Bcc: x@y");
end:
	free(s);
}

/* Line breaks in anything that reaches a header stay out of the headers;
 * a body cannot end the data or start a header. */
static void
test_no_header_injection(void)
{
	struct smtp_reply r = { "bot@example.test", "alice@example.test",
	    "x\r\nBcc: victim@example.org", "<a@b>\r\nBcc: v@e",
	    "<r@x>\r\nX-Evil: 1 <s@x>", "<m@x>\r\nBcc: w@e",
	    "text\r\n.\r\nMAIL FROM:<x@y>\r\nFrom a line\n\nBcc: no@x\n" };
	struct buf b;
	char err[128], *h = NULL;

	buf_init(&b);
	tt_int_op(smtp_build(&r, NOW, &b, err, sizeof(err)), ==, 0);
	h = headers_of(b.data);
	tt_int_op(count_lines_starting(h, "Bcc"), ==, 0);
	tt_int_op(count_lines_starting(h, "X-Evil"), ==, 0);
	tt_assert(strstr(h, "In-Reply-To") == NULL);	/* not one id */
	tt_assert(strstr(h, "<m@x>") == NULL);		/* nor this */
	tt_int_op(count_lines_starting(h, "Message-ID: <af."), ==, 1);
	tt_assert(strstr(b.data, "\r\n.\r\n") == NULL);
	tt_assert(strstr(b.data, "\r\n=2E\r\n") != NULL);
	tt_assert(strstr(b.data, "\r\n=46rom a line") != NULL);
	/* An address that is not one plain address is refused outright. */
	r.to = "alice@example.test>\r\nRCPT TO:<v@e";
	buf_reset(&b);
	tt_int_op(smtp_build(&r, NOW, &b, err, sizeof(err)), ==, -1);
	r.to = "a@b.example, c@d.example";
	tt_int_op(smtp_build(&r, NOW, &b, err, sizeof(err)), ==, -1);
	tt_int_op(smtp_addr_ok("a@b.example"), ==, 1);
	tt_int_op(smtp_addr_ok("a b@c"), ==, 0);
	tt_int_op(smtp_addr_ok("a@b@c"), ==, 0);
	tt_int_op(smtp_addr_ok("\xc3\xa9@c"), ==, 0);
end:
	free(h);
	buf_free(&b);
}

static void
test_utf8_subject_and_qp(void)
{
	struct smtp_reply r = { "bot@example.test", "alice@example.test",
	    "Caf\xc3\xa9 \xe2\x82\xac", NULL, NULL, NULL, NULL };
	struct buf b, body;
	char err[128], *h = NULL;
	const char *p;

	buf_init(&b);
	buf_init(&body);
	for (int i = 0; i < 300; i++)
		buf_adds(&body, "\xc3\xa9");
	buf_adds(&body, " trailing \nx=y\n");
	r.body = body.data;
	tt_int_op(smtp_build(&r, NOW, &b, err, sizeof(err)), ==, 0);
	h = headers_of(b.data);
	/* "Re: Café €" in UTF-8, base64. */
	tt_assert(strstr(h, "Subject: =?UTF-8?B?UmU6IENhZsOpIOKCrA==?=\r\n")
	    != NULL);
	tt_assert(strstr(h, "References") == NULL);
	/* Every line within 76 characters plus CRLF. */
	for (p = b.data; *p != '\0';) {
		const char *e = strstr(p, "\r\n");

		tt_assert(e != NULL);
		tt_assert(e - p <= 76);
		p = e + 2;
	}
	tt_assert(strstr(b.data, "trailing=20\r\n") != NULL);
	tt_assert(strstr(b.data, "x=3Dy\r\n") != NULL);
	tt_assert(strstr(b.data, "=C3=A9=C3=A9") != NULL);
end:
	free(h);
	buf_free(&b);
	buf_free(&body);
}

static void
test_long_subject_folded(void)
{
	struct smtp_reply r = { "bot@example.test", "alice@example.test",
	    NULL, NULL, NULL, NULL, "b" };
	struct buf b, s;
	char err[128], *h = NULL;

	buf_init(&b);
	buf_init(&s);
	for (int i = 0; i < 2000; i++)
		buf_adds(&s, "\xe2\x82\xac");
	r.subject = s.data;
	tt_int_op(smtp_build(&r, NOW, &b, err, sizeof(err)), ==, 0);
	h = headers_of(b.data);
	for (const char *p = h; *p != '\0';) {
		const char *e = strstr(p, "\r\n");

		tt_assert(e != NULL && e - p <= 78);
		p = e + 2;
	}
end:
	free(h);
	buf_free(&b);
	buf_free(&s);
}

/* The token of a fresh Message-ID: "<af." + 32 lowercase hex digits + "@". */
static int
token_of(const char *msg, char *out)
{
	const char *p = strstr(msg, "\r\nMessage-ID: <af.");

	if (p == NULL)
		return -1;
	p += strlen("\r\nMessage-ID: <af.");
	if (strspn(p, "0123456789abcdef") != SMTP_TOKEN_LEN - 1 ||
	    p[SMTP_TOKEN_LEN - 1] != '@')
		return -1;
	memcpy(out, p, SMTP_TOKEN_LEN - 1);
	out[SMTP_TOKEN_LEN - 1] = '\0';
	return 0;
}

/* A reply's Message-ID is what a mail must name to continue a conversation
 * (imap.c), so it is 128 random bits, never made from the mail answered:
 * two replies to the same mail at the same instant get unrelated ids. The
 * caller's id is used when it is one well-formed id. */
static void
test_message_id(void)
{
	struct smtp_reply r = { "bot@example.test", "alice@example.test",
	    "Question", "<q1@example.test>", NULL, NULL, "x" };
	char t1[SMTP_TOKEN_LEN], t2[SMTP_TOKEN_LEN], err[128];
	struct buf a, b;
	int same = 0;

	buf_init(&a);
	buf_init(&b);
	tt_int_op(smtp_build(&r, NOW, &a, err, sizeof(err)), ==, 0);
	tt_int_op(smtp_build(&r, NOW, &b, err, sizeof(err)), ==, 0);
	tt_int_op(token_of(a.data, t1), ==, 0);
	tt_int_op(token_of(b.data, t2), ==, 0);
	tt_assert(strcmp(t1, t2) != 0);
	for (size_t i = 0; i + 1 < SMTP_TOKEN_LEN; i++)
		same += t1[i] == t2[i];
	tt_assert(same < 16);		/* not a counter either */
	smtp_token(t1);
	smtp_token(t2);
	tt_int_op(strlen(t1), ==, SMTP_TOKEN_LEN - 1);
	tt_assert(strcmp(t1, t2) != 0);

	r.message_id = "<af.7.0123456789abcdef0123456789abcdef@example.test>";
	buf_reset(&a);
	tt_int_op(smtp_build(&r, NOW, &a, err, sizeof(err)), ==, 0);
	tt_assert(strstr(a.data, "\r\nMessage-ID: <af.7.0123456789abcdef"
	    "0123456789abcdef@example.test>\r\n") != NULL);
	tt_int_op(count_lines_starting(a.data, "Message-ID:"), ==, 1);
	/* One that is not an id is replaced, never pasted. */
	r.message_id = "<a@b> <c@d>";
	buf_reset(&a);
	tt_int_op(smtp_build(&r, NOW, &a, err, sizeof(err)), ==, 0);
	tt_int_op(token_of(a.data, t1), ==, 0);
	tt_assert(strstr(a.data, "<c@d>") == NULL);
end:
	buf_free(&a);
	buf_free(&b);
}

static const struct tt_case cases[] = {
	{ "threading_headers", test_threading_headers },
	{ "re_not_doubled", test_re_not_doubled },
	{ "no_header_injection", test_no_header_injection },
	{ "utf8_subject_and_qp", test_utf8_subject_and_qp },
	{ "long_subject_folded", test_long_subject_folded },
	{ "message_id", test_message_id },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return tt_main(argc, argv, cases);
}
