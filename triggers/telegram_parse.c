/* The Telegram trigger's pure helpers (see telegram.h): the Bot API parser,
 * which keeps every id as the exact text Telegram sent, and the splitter that
 * turns a reply into messages Telegram accepts. No loop, no engine, so the
 * fuzzer links this file alone. */
#include "triggers/telegram.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define NUM_CHARS	"0123456789+-.eE"
#define NUM_RAW_MAX	64	/* cJSON reads at most 63 characters of one */
#define TG_CUT_NOTE	"\n\n[The reply was cut here: it was too long to send.]"
#define TG_RETRY_AFTER_CAP	86400L	/* seconds; larger values are clamped */

/* Where each number of a JSON text starts, in document order. */
struct numtab {
	const char	*base;
	size_t		*off;
	size_t		*len;
	size_t		 n;
	size_t		 cap;
};

static void
numtab_add(struct numtab *t, size_t off, size_t len)
{
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 64;
		t->off = xreallocarray(t->off, t->cap, sizeof(*t->off));
		t->len = xreallocarray(t->len, t->cap, sizeof(*t->len));
	}
	t->off[t->n] = off;
	t->len[t->n] = len;
	t->n++;
}

static void
numtab_free(struct numtab *t)
{
	free(t->off);
	free(t->len);
	memset(t, 0, sizeof(*t));
}

/*
 * Record every number token outside strings, in document order, the way
 * cJSON tokenizes them: a number starts at '-' or a digit and runs over
 * [0-9+-.eE]; a string runs to the next unescaped quote. In a text cJSON
 * parsed, nothing else holds a digit or a '-', so the k-th token here is the
 * k-th number cJSON met (number_walk checks that rather than trusting it).
 */
static void
scan_numbers(const char *s, size_t len, struct numtab *t)
{
	size_t i = 0, start;

	t->base = s;
	while (i < len) {
		if (s[i] == '"') {
			for (i++; i < len && s[i] != '"'; i++)
				if (s[i] == '\\')
					i++;
			i++;
			continue;
		}
		if (s[i] == '-' || isdigit((unsigned char)s[i])) {
			start = i;
			while (i < len && s[i] != '\0' &&
			    strchr(NUM_CHARS, s[i]) != NULL)
				i++;
			numtab_add(t, start, i - start);
			continue;
		}
		i++;
	}
}

/*
 * Pair cJSON's number nodes with the raw tokens: the node's ordinal goes in
 * valueint, a field cJSON only fills for old callers and af never reads.
 * Each pairing is verified by converting the raw text again; one mismatch
 * rejects the whole document, so an id can never be read from the wrong
 * token.
 */
static int
number_walk(cJSON *item, const struct numtab *t, size_t *next)
{
	char raw[NUM_RAW_MAX];
	double v;

	for (; item != NULL; item = item->next) {
		if (cJSON_IsNumber(item)) {
			if (*next >= t->n || t->len[*next] >= sizeof(raw))
				return -1;
			memcpy(raw, t->base + t->off[*next], t->len[*next]);
			raw[t->len[*next]] = '\0';
			v = strtod(raw, NULL);
			if (v != item->valuedouble)
				return -1;
			item->valueint = (int)*next;
			(*next)++;
		} else if (item->child != NULL &&
		    number_walk(item->child, t, next) == -1)
			return -1;
	}
	return 0;
}

int
tg_id_canon(const char *s, char *out, size_t outlen)
{
	const char *p = s;
	size_t digits;
	int neg = 0, n;

	if (*p == '-') {
		neg = 1;
		p++;
	}
	if (!isdigit((unsigned char)*p))
		return -1;
	while (*p == '0' && isdigit((unsigned char)p[1]))
		p++;
	digits = strspn(p, "0123456789");
	if (p[digits] != '\0' || digits > 19)
		return -1;
	if (strcmp(p, "0") == 0)
		neg = 0;
	n = snprintf(out, outlen, "%s%s", neg ? "-" : "", p);
	if (n < 0 || (size_t)n >= outlen)
		return -1;
	return 0;
}

int
tg_id_equal(const char *a, const char *b)
{
	char ca[TG_ID_MAX], cb[TG_ID_MAX];

	if (tg_id_canon(a, ca, sizeof(ca)) == -1 ||
	    tg_id_canon(b, cb, sizeof(cb)) == -1)
		return 0;
	return strcmp(ca, cb) == 0;
}

/* The exact integer text of a number node, canonical. */
static int
raw_id(const cJSON *item, const struct numtab *t, char *out, size_t outlen)
{
	char raw[NUM_RAW_MAX];
	size_t k;

	if (!cJSON_IsNumber(item) || item->valueint < 0)
		return -1;
	k = (size_t)item->valueint;
	if (k >= t->n || t->len[k] >= sizeof(raw))
		return -1;
	memcpy(raw, t->base + t->off[k], t->len[k]);
	raw[t->len[k]] = '\0';
	return tg_id_canon(raw, out, outlen);
}

/* A description goes to logs and the status port: one line, bounded. */
static void
copy_desc(char *out, size_t outlen, const char *s)
{
	size_t i;

	for (i = 0; s[i] != '\0' && i + 1 < outlen; i++)
		out[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? ' ' :
		    s[i];
	out[i] = '\0';
}

static void
envelope(const cJSON *root, struct tg_reply *rep)
{
	const cJSON *ok, *code, *desc, *params, *ra;

	memset(rep, 0, sizeof(*rep));
	rep->retry_after = -1;
	if (!cJSON_IsObject(root))
		return;
	ok = cJSON_GetObjectItemCaseSensitive(root, "ok");
	if (!cJSON_IsBool(ok))
		return;
	rep->parsed = 1;
	rep->ok = cJSON_IsTrue(ok);
	code = cJSON_GetObjectItemCaseSensitive(root, "error_code");
	if (cJSON_IsNumber(code) && code->valuedouble >= 0 &&
	    code->valuedouble < 1000)
		rep->error_code = (long)code->valuedouble;
	desc = cJSON_GetObjectItemCaseSensitive(root, "description");
	if (cJSON_IsString(desc))
		copy_desc(rep->description, sizeof(rep->description),
		    desc->valuestring);
	params = cJSON_GetObjectItemCaseSensitive(root, "parameters");
	ra = cJSON_GetObjectItemCaseSensitive(params, "retry_after");
	if (cJSON_IsNumber(ra) && ra->valuedouble >= 0) {
		if (ra->valuedouble > (double)TG_RETRY_AFTER_CAP)
			rep->retry_after = TG_RETRY_AFTER_CAP;
		else
			rep->retry_after = (long)ra->valuedouble;
	}
}

int
tg_parse_reply(const char *json, size_t len, struct tg_reply *rep)
{
	cJSON *root = cJSON_ParseWithLength(json, len);

	envelope(root, rep);
	cJSON_Delete(root);
	return rep->parsed ? 0 : -1;
}

static void
copy_str(char *out, size_t outlen, const cJSON *s)
{
	out[0] = '\0';
	if (cJSON_IsString(s))
		copy_desc(out, outlen, s->valuestring);
}

/* One Update object. -1 when it has no usable update_id; a message that
 * cannot be answered (no chat or message id) is TG_OTHER. */
static int
parse_update(const cJSON *u, const struct numtab *t, struct tg_update *out)
{
	const cJSON *msg, *chat, *text;
	char id[TG_ID_MAX];
	long long v;

	memset(out, 0, sizeof(*out));
	if (raw_id(cJSON_GetObjectItemCaseSensitive(u, "update_id"), t, id,
	    sizeof(id)) == -1 || id[0] == '-')
		return -1;
	errno = 0;
	v = strtoll(id, NULL, 10);
	if (errno == ERANGE || v == LLONG_MAX)	/* the next offset must fit */
		return -1;
	out->update_id = v;
	out->kind = TG_OTHER;
	msg = cJSON_GetObjectItemCaseSensitive(u, "message");
	if (!cJSON_IsObject(msg))
		return 0;
	chat = cJSON_GetObjectItemCaseSensitive(msg, "chat");
	if (raw_id(cJSON_GetObjectItemCaseSensitive(msg, "message_id"), t,
	    out->message_id, sizeof(out->message_id)) == -1 ||
	    !cJSON_IsObject(chat) ||
	    raw_id(cJSON_GetObjectItemCaseSensitive(chat, "id"), t,
	    out->chat_id, sizeof(out->chat_id)) == -1) {
		out->message_id[0] = out->chat_id[0] = '\0';
		return 0;
	}
	copy_str(out->chat_type, sizeof(out->chat_type),
	    cJSON_GetObjectItemCaseSensitive(chat, "type"));
	text = cJSON_GetObjectItemCaseSensitive(msg, "text");
	if (cJSON_IsString(text) && text->valuestring != NULL) {
		out->kind = TG_TEXT;
		out->text = xstrdup(text->valuestring);
	} else
		out->kind = TG_NONTEXT;
	return 0;
}

void
tg_updates_free(struct tg_update *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].text);
	free(v);
}

int
tg_parse_updates(const char *json, size_t len, size_t max,
    struct tg_reply *rep, struct tg_update **out, size_t *nout)
{
	struct numtab t = { 0 };
	const char *end = NULL;
	cJSON *root, *result, *u;
	size_t next = 0, n = 0;
	int rc = -1;

	*out = NULL;
	*nout = 0;
	root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
	envelope(root, rep);
	if (root == NULL || !rep->parsed || !rep->ok)
		goto done;
	result = cJSON_GetObjectItemCaseSensitive(root, "result");
	if (!cJSON_IsArray(result))
		goto done;
	/* Only the part cJSON consumed: trailing bytes are not the tree's. */
	scan_numbers(json, end != NULL && end >= json ? (size_t)(end - json) :
	    len, &t);
	if (number_walk(root, &t, &next) == -1 || next != t.n)
		goto done;
	*out = xcalloc(max ? max : 1, sizeof(**out));
	cJSON_ArrayForEach(u, result) {
		if (n == max)
			break;
		if (parse_update(u, &t, &(*out)[n]) == 0)
			n++;
	}
	*nout = n;
	rc = 0;
done:
	if (rc == -1 && rep->parsed && rep->ok)
		rep->parsed = 0;	/* ok, but not a getUpdates answer */
	numtab_free(&t);
	cJSON_Delete(root);
	return rc;
}

static int
is_cont(unsigned char c)
{
	return (c & 0xc0) == 0x80;
}

/* Length of the valid UTF-8 sequence at s, or 0 (overlong forms,
 * surrogates and values past U+10FFFF are invalid). */
static size_t
u8_seq(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return n >= 2 && is_cont(s[1]) ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		if (n < 3 || !is_cont(s[1]) || !is_cont(s[2]))
			return 0;
		if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f))
			return 0;
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		if (n < 4 || !is_cont(s[1]) || !is_cont(s[2]) ||
		    !is_cont(s[3]))
			return 0;
		if ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))
			return 0;
		return 4;
	}
	return 0;
}

/* Characters past the Basic Multilingual Plane take a surrogate pair. */
static size_t
u16_units(size_t seqlen)
{
	return seqlen == 4 ? 2 : 1;
}

size_t
tg_utf16_len(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, units = 0, k;

	while (i < len) {
		k = u8_seq(p + i, len - i);
		if (k == 0)
			k = 1;
		units += u16_units(k);
		i += k;
	}
	return units;
}

static void
sanitize(struct buf *out, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, k;

	while (i < len) {
		k = u8_seq(p + i, len - i);
		if (k == 0) {
			buf_adds(out, "\xef\xbf\xbd");
			i++;
			continue;
		}
		buf_add(out, p + i, k);
		i += k;
	}
}

static int
all_space(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' &&
		    s[i] != '\n')
			return 0;
	return 1;
}

/*
 * Where the part starting at s should end: as many whole characters as fit
 * in max_units, then back to just after the last newline (or else space)
 * when that keeps at least half the part, so words and lines stay whole.
 */
static size_t
part_end(const char *s, size_t len, size_t max_units)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, units = 0, k, u;
	size_t nl = 0, nl_units = 0, sp = 0, sp_units = 0;

	while (i < len) {
		k = u8_seq(p + i, len - i);
		if (k == 0)
			k = 1;
		u = u16_units(k);
		if (units + u > max_units)
			break;
		units += u;
		i += k;
		if (s[i - 1] == '\n') {
			nl = i;
			nl_units = units;
		} else if (s[i - 1] == ' ') {
			sp = i;
			sp_units = units;
		}
	}
	if (i == 0 && len > 0) {
		/* max_units is below one character: send it whole anyway. */
		k = u8_seq(p, len);
		return k == 0 ? 1 : k;
	}
	if (i == len)
		return i;
	if (nl > 0 && nl_units * 2 >= max_units)
		return nl;
	if (sp > 0 && sp_units * 2 >= max_units)
		return sp;
	return i;
}

void
tg_split(const char *text, size_t max_units, size_t max_parts,
    struct strlist *parts)
{
	size_t note_units = strlen(TG_CUT_NOTE), pos = 0, end, nparts = 0;
	struct buf clean, part;

	if (max_parts == 0)
		return;
	buf_init(&clean);
	buf_init(&part);
	sanitize(&clean, text, strlen(text));
	while (pos < clean.len) {
		end = pos + part_end(clean.data + pos, clean.len - pos,
		    max_units);
		if (nparts + 1 == max_parts && end < clean.len) {
			/* The last part allowed: cut shorter and say so. */
			if (max_units > 2 * note_units)
				end = pos + part_end(clean.data + pos,
				    clean.len - pos, max_units - note_units);
			buf_reset(&part);
			buf_add(&part, clean.data + pos, end - pos);
			if (max_units > 2 * note_units)
				buf_adds(&part, TG_CUT_NOTE);
			strlist_add(parts, part.data);
			break;
		}
		if (!all_space(clean.data + pos, end - pos)) {
			buf_reset(&part);
			buf_add(&part, clean.data + pos, end - pos);
			strlist_add(parts, part.data);
			nparts++;
		}
		pos = end;
	}
	buf_free(&part);
	buf_free(&clean);
}
