/* The audit trail writer (audit/audit.c): every record is one whole JSON line,
 * however long the values the model chose, with secrets redacted before any
 * value is cut. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/audit.h"
#include "tt.h"
#include "util.h"

static char dir[64];
static char path[PATH_MAX];
static struct strlist secrets;

static int
open_trail(void)
{
	snprintf(dir, sizeof(dir), "/tmp/af-test-auditw-XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(path, sizeof(path), "%s/audit.jsonl", dir);
	strlist_add(&secrets, "s3cret-value-42");
	return audit_open(path, "t", &secrets, NULL, 0);
}

static void
close_trail(void)
{
	audit_close();
	unlink(path);
	rmdir(dir);
	strlist_free(&secrets);
}

/* The trail's last record, parsed; NULL unless every record ends its line
 * and the last one is JSON. text: the whole trail, to free. */
static cJSON *
last_record(char **text)
{
	struct buf b;
	char *nl;

	buf_init(&b);
	if (read_file_max(path, 64 << 20, &b) == -1 || b.data == NULL)
		return NULL;
	*text = buf_steal(&b);
	nl = strrchr(*text, '\n');
	if (nl == NULL || nl[1] != '\0')
		return NULL;	/* every record ends its line */
	*nl = '\0';
	nl = strrchr(*text, '\n');
	return cJSON_Parse(nl != NULL ? nl + 1 : *text);
}

static const char *
field(const cJSON *r, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, k);

	return cJSON_IsString(v) ? v->valuestring : "";
}

/* A command line of 300,000 bytes, denied: the record stays whole, keeps
 * its decision and says how much of the target was cut. */
static void
t_long_target_is_cut_not_torn(void)
{
	size_t n = 300000;
	char *target = xmalloc(n + 1), *text = NULL;
	cJSON *r = NULL;

	tt_int_op(open_trail(), ==, 0);
	memcpy(target, "gh ", 3);
	memset(target + 3, 'a', n - 3);
	target[n] = '\0';
	tt_int_op(audit_decision("r-1", "run_bash", "run", target, 0,
	    "too long"), ==, 0);
	r = last_record(&text);
	tt_assert(r != NULL);
	tt_str_op(field(r, "decision"), ==, "deny");
	tt_str_op(field(r, "reason"), ==, "too long");
	tt_assert(strncmp(field(r, "target"), "gh aaa", 6) == 0);
	tt_assert(strstr(field(r, "target"), "... [291808 bytes cut]") != NULL);
	tt_int_op(strlen(text), <, 9000);
end:
	cJSON_Delete(r);
	free(text);
	free(target);
	close_trail();
}

/* A tool name the model made up, long and multi-byte: cut between
 * characters, so the record is still valid UTF-8 JSON. */
static void
t_cut_keeps_utf8_whole(void)
{
	struct buf b;
	char *text = NULL;
	cJSON *r = NULL;
	const char *t;
	size_t len;

	buf_init(&b);
	tt_int_op(open_trail(), ==, 0);
	buf_adds(&b, "x");
	for (int i = 0; i < 5000; i++)
		buf_adds(&b, "\xc3\xa9");	/* é: the cut lands inside one */
	tt_int_op(audit_decision("r-1", b.data, NULL, b.data, 0, "no"), ==, 0);
	r = last_record(&text);
	tt_assert(r != NULL);
	t = field(r, "tool");
	len = strstr(t, "... [") - t;
	tt_int_op(len, ==, 8191);	/* "x" and 4095 whole characters */
	tt_assert(((unsigned char)t[len - 1] & 0xc0) == 0x80);
end:
	cJSON_Delete(r);
	free(text);
	buf_free(&b);
	close_trail();
}

/* A secret that straddles the cut is redacted first, so no head of it is
 * left at the end of the cut value. */
static void
t_secret_across_the_cut(void)
{
	struct buf b;
	char *text = NULL;
	cJSON *r = NULL;

	buf_init(&b);
	tt_int_op(open_trail(), ==, 0);
	for (int i = 0; i < 8190; i++)
		buf_addc(&b, 'a');
	buf_adds(&b, "s3cret-value-42 and more after it");
	for (int i = 0; i < 100; i++)
		buf_addc(&b, 'b');
	tt_int_op(audit_decision("r-1", "run_bash", "run", b.data, 1, NULL),
	    ==, 0);
	r = last_record(&text);
	tt_assert(r != NULL);
	tt_assert(strstr(text, "s3") == NULL);
	tt_assert(strstr(field(r, "target"), "aa[R... [") != NULL);
end:
	cJSON_Delete(r);
	free(text);
	buf_free(&b);
	close_trail();
}

/* A secret that holds another, or overlaps it, is redacted whole, whatever
 * order the config named them in; a secret that occurs in the replacement
 * text itself does not make redaction loop, in the trail or in a log line. */
static void
t_redaction_overlaps_and_termination(void)
{
	struct strlist l = { NULL, 0 };
	char *r = NULL;

	strlist_add(&l, "abc");
	strlist_add(&l, "xxabcxx");
	strlist_add(&l, "DACT");
	strlist_add(&l, "12");
	strlist_add(&l, "2345");
	r = redact_secrets("1 xxabcxx 2 abc 3 DACT 012345 abcxx", &l);
	tt_str_op(r, ==, "1 [REDACTED] 2 [REDACTED] 3 [REDACTED] 0[REDACTED] "
	    "[REDACTED]xx");
	log_redact_add("DACT");
	log_redact_add("EDACTED]");
	log_warnx("a line with DACT in it");	/* returns */
end:
	free(r);
	strlist_free(&l);
}

static const struct tt_case cases[] = {
	{ "long_target_is_cut_not_torn", t_long_target_is_cut_not_torn },
	{ "cut_keeps_utf8_whole", t_cut_keeps_utf8_whole },
	{ "secret_across_the_cut", t_secret_across_the_cut },
	{ "redaction_overlaps_and_termination",
	    t_redaction_overlaps_and_termination },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return tt_main(argc, argv, cases);
}
