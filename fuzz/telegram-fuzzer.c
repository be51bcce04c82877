/* libFuzzer target for the Telegram trigger's parser and splitter: the same
 * bytes go to tg_parse_updates, tg_parse_reply and tg_split, and what each
 * promises is checked: ids exact and canonical, every part within the limit
 * and valid UTF-8, and no visible character of a reply lost. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "triggers/telegram.h"
#include "util.h"

/* What tg_split counts as whitespace when it drops a cut's edges. */
#define TG_SPACE	" \t\r\n"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
check_id(const char *id)
{
	char c[TG_ID_MAX];

	fuzz_check(tg_id_canon(id, c, sizeof(c)) == 0);
	fuzz_check(strcmp(c, id) == 0);
	fuzz_check(tg_id_equal(id, id));
}

static void
fuzz_updates(const char *data, size_t len)
{
	struct tg_update *v;
	struct tg_reply rep;
	size_t n;

	if (tg_parse_updates(data, len, TG_MAX_UPDATES, &rep, &v, &n) == -1) {
		fuzz_check(v == NULL && n == 0);
		return;
	}
	fuzz_check(rep.parsed && rep.ok && n <= TG_MAX_UPDATES);
	for (size_t i = 0; i < n; i++) {
		fuzz_check(v[i].update_id >= 0);
		if (v[i].kind == TG_OTHER) {
			fuzz_check(v[i].text == NULL);
			continue;
		}
		check_id(v[i].chat_id);
		check_id(v[i].message_id);
		fuzz_check((v[i].kind == TG_TEXT) == (v[i].text != NULL));
	}
	tg_updates_free(v, n);
	if (tg_parse_reply(data, len, &rep) == 0)
		fuzz_check(rep.retry_after >= -1 && strlen(rep.description) <
		    sizeof(rep.description));
}

static void
fuzz_split(const char *text, size_t max_units, size_t max_parts)
{
	struct strlist parts = { 0 };
	size_t units;

	tg_split(text, max_units, max_parts, &parts);
	fuzz_check_split(text, &parts, max_parts, TG_SPACE);
	for (size_t i = 0; i < parts.n; i++) {
		units = tg_utf16_len(parts.v[i], strlen(parts.v[i]));
		/* One character is sent whole even past a tiny limit. */
		fuzz_check(units <= max_units || units <= 2);
	}
	strlist_free(&parts);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	char *text;
	size_t max_units;

	if (len > FUZZ_MAX_INPUT)
		return 0;
	fuzz_updates((const char *)data, len);

	/* The splitter takes a C string; the first two bytes pick a limit so
	 * that small limits, where the edge cases live, come up often. */
	if (len < 2)
		return 0;
	max_units = 1 + (((size_t)data[0] << 8 | data[1]) % TG_TEXT_MAX_UNITS);
	text = xstrndup((const char *)data + 2, len - 2);
	fuzz_split(text, max_units, 1 + data[0] % TG_MAX_PARTS);
	fuzz_split(text, TG_TEXT_MAX_UNITS, TG_MAX_PARTS);
	free(text);
	return 0;
}
