/* Checks the fuzz targets share. The Makefile builds each fuzzer source
 * alone against the library, so everything here is static inline. The UTF-8
 * check is written apart from the library's on purpose: a target must not
 * judge the code under test by that code's own rules. */
#ifndef AF_FUZZ_UTIL_H
#define AF_FUZZ_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define FUZZ_MAX_INPUT	(1 << 16)

/* A broken promise: abort, so libFuzzer keeps the input. */
static inline void
fuzz_check(int cond)
{
	if (!cond)
		abort();
}

/* 1 when s holds n bytes of valid UTF-8 (RFC 3629): shortest forms only, no
 * surrogates, nothing past U+10FFFF. */
static inline int
fuzz_utf8_ok(const unsigned char *s, size_t n)
{
	size_t i = 0, k;
	uint32_t cp;

	while (i < n) {
		if (s[i] < 0x80) {
			i++;
			continue;
		}
		if ((s[i] & 0xe0) == 0xc0) {
			k = 2;
			cp = s[i] & 0x1f;
		} else if ((s[i] & 0xf0) == 0xe0) {
			k = 3;
			cp = s[i] & 0x0f;
		} else if ((s[i] & 0xf8) == 0xf0) {
			k = 4;
			cp = s[i] & 0x07;
		} else
			return 0;
		if (i + k > n)
			return 0;
		for (size_t j = 1; j < k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return 0;
			cp = (cp << 6) | (s[i + j] & 0x3f);
		}
		if ((k == 2 && cp < 0x80) || (k == 3 && cp < 0x800) ||
		    (k == 4 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += k;
	}
	return 1;
}

/* Append s to out without the bytes in space: what a split may not lose. */
static inline void
fuzz_strip(const char *s, const char *space, struct buf *out)
{
	for (; *s != '\0'; s++)
		if (strchr(space, *s) == NULL)
			buf_addc(out, *s);
}

/*
 * What every reply splitter promises about the parts it made of text: at
 * most max_parts, none empty, each valid UTF-8, and, when the input was
 * valid and nothing had to be cut off (fewer parts than the cap), every
 * byte but the splitter's whitespace (space) kept, in order. The limit on
 * each part's length is the caller's to check, in its API's own units.
 */
static inline void
fuzz_check_split(const char *text, const struct strlist *parts,
    size_t max_parts, const char *space)
{
	struct buf all, want;

	fuzz_check(parts->n <= max_parts);
	buf_init(&all);
	buf_init(&want);
	for (size_t i = 0; i < parts->n; i++) {
		const char *p = parts->v[i];

		fuzz_check(p[0] != '\0');
		fuzz_check(fuzz_utf8_ok((const unsigned char *)p, strlen(p)));
		fuzz_strip(p, space, &all);
	}
	if (parts->n < max_parts && fuzz_utf8_ok((const unsigned char *)text,
	    strlen(text))) {
		fuzz_strip(text, space, &want);
		fuzz_check(all.len == want.len);
		fuzz_check(all.len == 0 ||
		    memcmp(all.data, want.data, all.len) == 0);
	}
	buf_free(&all);
	buf_free(&want);
}

#endif
