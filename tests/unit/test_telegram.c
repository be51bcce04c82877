/* The Telegram trigger's pure parts: exact ids from getUpdates (past 2^53,
 * negative), the error envelope, and the reply splitter's limit, character
 * boundaries and preference for line breaks. */
#include <stdlib.h>
#include <string.h>

#include "triggers/telegram.h"
#include "tt.h"
#include "util.h"

static int
parse(const char *json, struct tg_reply *rep, struct tg_update **v,
    size_t *n)
{
	return tg_parse_updates(json, strlen(json), TG_MAX_UPDATES, rep, v, n);
}

static void
test_text_message(void)
{
	const char *j = "{\"ok\":true,\"result\":[{\"update_id\":512345678,"
	    "\"message\":{\"message_id\":17,\"from\":{\"id\":99,\"is_bot\":false,"
	    "\"first_name\":\"Ada\"},\"chat\":{\"id\":123456789,\"type\":"
	    "\"private\"},\"date\":1764644400,\"text\":\"hello 42\"}}]}";
	struct tg_update *v = NULL;
	struct tg_reply rep;
	size_t n = 0;

	tt_int_op(parse(j, &rep, &v, &n), ==, 0);
	tt_int_op(n, ==, 1);
	tt_int_op(v[0].update_id, ==, 512345678);
	tt_int_op(v[0].kind, ==, TG_TEXT);
	tt_str_op(v[0].chat_id, ==, "123456789");
	tt_str_op(v[0].message_id, ==, "17");
	tt_str_op(v[0].chat_type, ==, "private");
	tt_str_op(v[0].text, ==, "hello 42");
end:
	tg_updates_free(v, n);
}

/* Ids past 2^53 would change in a double; they must come back as sent. */
static void
test_exact_ids(void)
{
	const char *j = "{\"ok\":true,\"result\":[{\"update_id\":"
	    "9007199254740993,\"message\":{\"message_id\":9007199254740995,"
	    "\"chat\":{\"id\":-1009007199254740993,\"type\":\"supergroup\"},"
	    "\"date\":1,\"text\":\"x\"}}]}";
	struct tg_update *v = NULL;
	struct tg_reply rep;
	size_t n = 0;

	tt_int_op(parse(j, &rep, &v, &n), ==, 0);
	tt_int_op(n, ==, 1);
	tt_int_op(v[0].update_id, ==, 9007199254740993LL);
	tt_str_op(v[0].chat_id, ==, "-1009007199254740993");
	tt_str_op(v[0].message_id, ==, "9007199254740995");
end:
	tg_updates_free(v, n);
}

/* Numbers inside strings, other updates and non-text messages: each id is
 * still read from its own token. */
static void
test_mixed(void)
{
	const char *j = "{\"ok\":true,\"result\":[{\"update_id\":1,"
	    "\"edited_message\":{\"message_id\":3,\"chat\":{\"id\":5,"
	    "\"type\":\"private\"},\"text\":\"7\"}},{\"update_id\":2,"
	    "\"message\":{\"message_id\":4,\"chat\":{\"id\":-6,\"type\":"
	    "\"group\"},\"caption\":\"1e5 \\\"9\\\"\",\"photo\":[{\"width\":"
	    "90}]}},{\"update_id\":\"8\"},{\"update_id\":1.5},{\"update_id\":"
	    "-1},{\"update_id\":30,\"message\":{\"message_id\":31,\"chat\":"
	    "{\"id\":1e3},\"text\":\"t\"}}]}";
	struct tg_update *v = NULL;
	struct tg_reply rep;
	size_t n = 0;

	tt_int_op(parse(j, &rep, &v, &n), ==, 0);
	tt_int_op(n, ==, 3);
	tt_int_op(v[0].update_id, ==, 1);
	tt_int_op(v[0].kind, ==, TG_OTHER);
	tt_int_op(v[1].update_id, ==, 2);
	tt_int_op(v[1].kind, ==, TG_NONTEXT);
	tt_str_op(v[1].chat_id, ==, "-6");
	tt_str_op(v[1].message_id, ==, "4");
	tt_int_op(v[2].update_id, ==, 30);
	tt_int_op(v[2].kind, ==, TG_OTHER);	/* 1e3 is not an id */
end:
	tg_updates_free(v, n);
}

static void
test_errors(void)
{
	const char *j = "{\"ok\":false,\"error_code\":429,\"description\":"
	    "\"Too Many Requests: retry after 3\",\"parameters\":"
	    "{\"retry_after\":3}}";
	struct tg_update *v = NULL;
	struct tg_reply rep;
	size_t n = 0;

	tt_int_op(parse(j, &rep, &v, &n), ==, -1);
	tt_int_op(rep.parsed, ==, 1);
	tt_int_op(rep.ok, ==, 0);
	tt_int_op(rep.error_code, ==, 429);
	tt_int_op(rep.retry_after, ==, 3);
	tt_str_op(rep.description, ==, "Too Many Requests: retry after 3");
	tt_int_op(parse("<html>502</html>", &rep, &v, &n), ==, -1);
	tt_int_op(rep.parsed, ==, 0);
	tt_int_op(parse("{\"ok\":true,\"result\":{}}", &rep, &v, &n), ==, -1);
	tt_int_op(rep.parsed, ==, 0);
	j = "{\"ok\":false,\"error_code\":401,\"description\":"
	    "\"Unauthorized\"}";
	tt_int_op(tg_parse_reply(j, strlen(j), &rep), ==, 0);
	tt_int_op(rep.error_code, ==, 401);
	tt_int_op(rep.retry_after, ==, -1);
end:
	tg_updates_free(v, n);
}

static void
test_ids(void)
{
	char out[TG_ID_MAX];

	tt_int_op(tg_id_canon("-1001234567890", out, sizeof(out)), ==, 0);
	tt_str_op(out, ==, "-1001234567890");
	tt_int_op(tg_id_canon("007", out, sizeof(out)), ==, 0);
	tt_str_op(out, ==, "7");
	tt_int_op(tg_id_canon("-0", out, sizeof(out)), ==, 0);
	tt_str_op(out, ==, "0");
	tt_int_op(tg_id_canon("", out, sizeof(out)), ==, -1);
	tt_int_op(tg_id_canon("-", out, sizeof(out)), ==, -1);
	tt_int_op(tg_id_canon("1e3", out, sizeof(out)), ==, -1);
	tt_int_op(tg_id_canon("12345678901234567890", out, sizeof(out)), ==,
	    -1);
	tt_assert(tg_id_equal("0123", "123"));
	tt_assert(!tg_id_equal("-123", "123"));
end:
	;
}

static void
test_split_limit(void)
{
	struct strlist parts = { 0 };
	struct buf b, joined;

	buf_init(&b);
	buf_init(&joined);
	for (int i = 0; i < 5000; i++)
		buf_addc(&b, 'a' + i % 26);
	tg_split(b.data, TG_TEXT_MAX_UNITS, TG_MAX_PARTS, &parts);
	tt_int_op(parts.n, ==, 2);
	tt_int_op(strlen(parts.v[0]), ==, 4096);
	tt_int_op(strlen(parts.v[1]), ==, 904);
	buf_adds(&joined, parts.v[0]);
	buf_adds(&joined, parts.v[1]);
	tt_str_op(joined.data, ==, b.data);
end:
	strlist_free(&parts);
	buf_free(&b);
	buf_free(&joined);
}

/* A character outside the BMP is two UTF-16 units: 2049 of them do not fit
 * in 4096 units, and no part may end inside one. */
static void
test_split_surrogates(void)
{
	struct strlist parts = { 0 };
	struct buf b;

	buf_init(&b);
	for (int i = 0; i < 2049; i++)
		buf_adds(&b, "\xf0\x9f\x98\x80");
	tg_split(b.data, TG_TEXT_MAX_UNITS, TG_MAX_PARTS, &parts);
	tt_int_op(parts.n, ==, 2);
	tt_int_op(strlen(parts.v[0]), ==, 2048 * 4);
	tt_int_op(tg_utf16_len(parts.v[0], strlen(parts.v[0])), ==, 4096);
	tt_str_op(parts.v[1], ==, "\xf0\x9f\x98\x80");
end:
	strlist_free(&parts);
	buf_free(&b);
}

static void
test_split_lines(void)
{
	struct strlist parts = { 0 };
	struct buf b;

	buf_init(&b);
	for (int i = 0; i < 100; i++)
		buf_addf(&b, "line %03d of the answer, long enough\n", i);
	tg_split(b.data, 1000, TG_MAX_PARTS, &parts);
	tt_assert(parts.n > 1);
	for (size_t i = 0; i + 1 < parts.n; i++) {
		size_t l = strlen(parts.v[i]);

		tt_int_op(parts.v[i][l - 1], ==, '\n');
		tt_int_op(strncmp(parts.v[i + 1], "line ", 5), ==, 0);
	}
end:
	strlist_free(&parts);
	buf_free(&b);
}

static void
test_split_edges(void)
{
	struct strlist parts = { 0 };
	struct buf b;

	buf_init(&b);
	tg_split("", TG_TEXT_MAX_UNITS, TG_MAX_PARTS, &parts);
	tt_int_op(parts.n, ==, 0);
	tg_split(" \n\t ", TG_TEXT_MAX_UNITS, TG_MAX_PARTS, &parts);
	tt_int_op(parts.n, ==, 0);
	tg_split("bad \xff\xc0 utf8", TG_TEXT_MAX_UNITS, TG_MAX_PARTS, &parts);
	tt_int_op(parts.n, ==, 1);
	tt_str_op(parts.v[0], ==, "bad \xef\xbf\xbd\xef\xbf\xbd utf8");
	strlist_free(&parts);
	/* Too long for TG_MAX_PARTS: the last part says it was cut. */
	for (int i = 0; i < 3 * 4096; i++)
		buf_addc(&b, 'x');
	tg_split(b.data, TG_TEXT_MAX_UNITS, 2, &parts);
	tt_int_op(parts.n, ==, 2);
	tt_assert(strstr(parts.v[1], "too long") != NULL);
	tt_assert(tg_utf16_len(parts.v[1], strlen(parts.v[1])) <= 4096);
end:
	strlist_free(&parts);
	buf_free(&b);
}

static const struct tt_case cases[] = {
	{ "text_message", test_text_message },
	{ "exact_ids", test_exact_ids },
	{ "mixed", test_mixed },
	{ "errors", test_errors },
	{ "ids", test_ids },
	{ "split_limit", test_split_limit },
	{ "split_surrogates", test_split_surrogates },
	{ "split_lines", test_split_lines },
	{ "split_edges", test_split_edges },
	{ NULL, NULL },
};

int
main(int argc, char **argv)
{
	return tt_main(argc, argv, cases);
}
