/* Reading the audit trail backwards (audit/audit_read.c): lines that straddle
 * chunk boundaries, a torn record at the end, an over-long line, filters and
 * paging, against files written here. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/audit_read.h"
#include "tt.h"
#include "util.h"

static char path[] = "/tmp/af-test-audit-XXXXXX";

static int
write_trail(struct buf *b)
{
	int fd = mkstemp(path);

	if (fd == -1)
		return -1;
	if (write(fd, b->data, b->len) != (ssize_t)b->len) {
		close(fd);
		return -1;
	}
	return close(fd);
}

/* n records; record i has run r-(i % 3), a padding of a length that moves
 * the line ends across chunk boundaries, and decision deny on every 7th. */
static void
make_records(struct buf *b, int n)
{
	for (int i = 0; i < n; i++) {
		buf_addf(b, "{\"ts\":\"t\",\"run\":\"r-%d\",\"event\":\"tool\","
		    "\"tool\":\"t%d\",\"decision\":\"%s\",\"seq\":%d,"
		    "\"pad\":\"", i % 3, i % 2, i % 7 == 0 ? "deny" : "allow", i);
		for (int k = 0; k < (i * 37) % 3000; k++)
			buf_addc(b, 'p');
		buf_adds(b, "\"}\n");
	}
}

static int
seq_of(const cJSON *rec)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(rec, "seq");

	return cJSON_IsNumber(s) ? s->valueint : -1;
}

static void
t_all_newest_first(void)
{
	struct audit_filter f = { NULL, NULL, NULL, NULL };
	struct audit_page page = { 0 };
	struct buf b;
	int n = 400, i = 0;
	const cJSON *r;

	buf_init(&b);
	make_records(&b, n);
	tt_assert(b.len > 3 * AUDIT_READ_CHUNK);
	tt_int_op(write_trail(&b), ==, 0);
	tt_int_op(audit_read(path, &f, 0, 1000, &page), ==, 0);
	tt_int_op(cJSON_GetArraySize(page.records), ==, n);
	tt_int_op(page.partial, ==, 0);
	tt_int_op(page.scanned, ==, b.len);
	cJSON_ArrayForEach(r, page.records) {
		tt_int_op(seq_of(r), ==, n - 1 - i);
		i++;
	}
end:
	cJSON_Delete(page.records);
	unlink(path);
	strcpy(path, "/tmp/af-test-audit-XXXXXX");
	buf_free(&b);
}

static void
t_filters_and_paging(void)
{
	struct audit_filter f = { "r-1", "deny", NULL, "tool" };
	struct audit_page page = { 0 };
	struct buf b;
	int want[8], nw = 0;

	buf_init(&b);
	make_records(&b, 300);
	tt_int_op(write_trail(&b), ==, 0);
	for (int i = 299; i >= 0 && nw < 8; i--)
		if (i % 3 == 1 && i % 7 == 0)
			want[nw++] = i;
	tt_int_op(nw, ==, 8);
	tt_int_op(audit_read(path, &f, 2, 3, &page), ==, 0);
	tt_int_op(cJSON_GetArraySize(page.records), ==, 3);
	for (int i = 0; i < 3; i++)
		tt_int_op(seq_of(cJSON_GetArrayItem(page.records, i)), ==,
		    want[2 + i]);
	cJSON_Delete(page.records);
	page.records = NULL;
	/* A value that is only part of a field does not match. */
	f.run = "r-";
	tt_int_op(audit_read(path, &f, 0, 10, &page), ==, 0);
	tt_int_op(cJSON_GetArraySize(page.records), ==, 0);
	cJSON_Delete(page.records);
	page.records = NULL;
	f.run = NULL;
	f.decision = NULL;
	f.tool = "t1";
	tt_int_op(audit_read(path, &f, 0, 500, &page), ==, 0);
	tt_int_op(cJSON_GetArraySize(page.records), ==, 150);
end:
	cJSON_Delete(page.records);
	unlink(path);
	strcpy(path, "/tmp/af-test-audit-XXXXXX");
	buf_free(&b);
}

/* A record being appended (no newline yet), an over-long line and a line
 * that is not JSON are skipped; the first line of the file is read. */
static void
t_torn_and_overlong(void)
{
	struct audit_filter f = { NULL, NULL, NULL, NULL };
	struct audit_page page = { 0 };
	struct buf b;

	buf_init(&b);
	buf_adds(&b, "{\"seq\":1}\n");
	buf_adds(&b, "{\"seq\":2,\"big\":\"");
	for (int i = 0; i < AUDIT_READ_LINE_MAX + 100; i++)
		buf_addc(&b, 'x');
	buf_adds(&b, "\"}\n");
	buf_adds(&b, "not json\n\n");
	buf_adds(&b, "{\"seq\":3}\n");
	buf_adds(&b, "{\"seq\":4,\"half\":");
	tt_int_op(write_trail(&b), ==, 0);
	tt_int_op(audit_read(path, &f, 0, 10, &page), ==, 0);
	tt_int_op(cJSON_GetArraySize(page.records), ==, 2);
	tt_int_op(seq_of(cJSON_GetArrayItem(page.records, 0)), ==, 3);
	tt_int_op(seq_of(cJSON_GetArrayItem(page.records, 1)), ==, 1);
end:
	cJSON_Delete(page.records);
	unlink(path);
	strcpy(path, "/tmp/af-test-audit-XXXXXX");
	buf_free(&b);
}

static void
t_missing_and_empty(void)
{
	struct audit_filter f = { NULL, NULL, NULL, NULL };
	struct audit_page page = { 0 };
	struct buf b;

	buf_init(&b);
	tt_int_op(audit_read("/tmp/af-test-no-such-trail", &f, 0, 10, &page),
	    ==, 0);
	tt_int_op(cJSON_GetArraySize(page.records), ==, 0);
	cJSON_Delete(page.records);
	page.records = NULL;
	tt_int_op(write_trail(&b), ==, 0);
	tt_int_op(audit_read(path, &f, 0, 10, &page), ==, 0);
	tt_int_op(cJSON_GetArraySize(page.records), ==, 0);
end:
	cJSON_Delete(page.records);
	unlink(path);
	strcpy(path, "/tmp/af-test-audit-XXXXXX");
	buf_free(&b);
}

static const struct tt_case cases[] = {
	{ "all_newest_first", t_all_newest_first },
	{ "filters_and_paging", t_filters_and_paging },
	{ "torn_and_overlong", t_torn_and_overlong },
	{ "missing_and_empty", t_missing_and_empty },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return tt_main(argc, argv, cases);
}
