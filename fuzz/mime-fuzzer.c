/* libFuzzer target for the IMAP trigger's mail parser: any bytes go through
 * mime_parse and mime_prompt, and what they promise is checked: every string
 * is valid UTF-8 without control characters (so it can go into JSON and a
 * prompt), the text stays within its bound, headers within theirs, the
 * reply address is one plain address, and the prompt's end marker is there. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "triggers/mime.h"
#include "util.h"

#define FUZZ_TEXT_MAX	4096

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Valid UTF-8 without control characters but newline and tab: what can go
 * into JSON and a prompt. */
static int
clean_text(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 && s[i] != '\n' && s[i] != '\t')
			return 0;
	return fuzz_utf8_ok((const unsigned char *)s, n);
}

static void
check_str(const char *s, size_t max, int oneline)
{
	size_t n;

	fuzz_check(s != NULL);
	n = strlen(s);
	fuzz_check(n <= max);
	fuzz_check(clean_text(s, n));
	if (oneline)
		fuzz_check(strchr(s, '\n') == NULL);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mime_msg m;
	char *p, *h;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	mime_parse((const char *)data, size, FUZZ_TEXT_MAX, &m);
	check_str(m.text, FUZZ_TEXT_MAX, 0);
	check_str(m.subject, MIME_HEADER_MAX, 1);
	check_str(m.from, MIME_HEADER_MAX, 1);
	check_str(m.to, MIME_HEADER_MAX, 1);
	check_str(m.date, MIME_HEADER_MAX, 1);
	if (m.from_addr != NULL) {
		check_str(m.from_addr, MIME_ADDR_MAX, 1);
		fuzz_check(strpbrk(m.from_addr, " <>,;\r\n\"") == NULL);
		fuzz_check(strchr(m.from_addr, '@') != NULL);
	}
	if (m.message_id != NULL)
		fuzz_check(strpbrk(m.message_id, " \r\n") == NULL &&
		    strlen(m.message_id) <= MIME_ID_MAX);
	if (m.references != NULL)
		fuzz_check(strpbrk(m.references, "\r\n") == NULL);
	fuzz_check(m.natt <= MIME_MAX_ATTACH && m.natt <= m.natt_total);
	for (size_t i = 0; i < m.natt; i++) {
		check_str(m.att[i].name, MIME_HEADER_MAX, 1);
		check_str(m.att[i].type, 256, 1);
	}
	p = mime_prompt(&m, "INBOX", "f-0", NULL);
	fuzz_check(strstr(p, "----- END UNTRUSTED EMAIL f-0 -----") != NULL);
	fuzz_check(clean_text(p, strlen(p)));
	free(p);
	mime_msg_free(&m);

	/* The same bytes as a header value and as HTML. */
	h = mime_decode_header((const char *)data, size);
	check_str(h, MIME_HEADER_MAX, 1);
	free(h);
	h = mime_html_text((const char *)data, size, FUZZ_TEXT_MAX);
	fuzz_check(strlen(h) <= FUZZ_TEXT_MAX);
	free(h);
	return 0;
}
