/*
 * The audit trail, read backwards. Each chunk is joined with the fragment
 * left over from the chunk after it, and complete lines are taken from its
 * end, so memory stays at a chunk plus one line however large the trail is.
 * The segment after the trail's last newline is skipped: it is empty, or a
 * record being appended right now.
 */
#include "audit/audit_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

struct scan {
	const struct audit_filter	*f;
	long				 skip;	/* matches still to pass over */
	long				 want;	/* records still to collect */
	cJSON				*out;
	int				 first;	/* the segment at the end */
	int				 overlong;	/* carry is cut */
};

static int
field_is(const cJSON *rec, const char *key, const char *want)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(rec, key);

	return want == NULL || (cJSON_IsString(v) &&
	    strcmp(v->valuestring, want) == 0);
}

/* A filter value that is not in the line at all cannot match: most lines
 * are rejected without parsing them. */
static int
may_match(const char *line, size_t len, const struct audit_filter *f)
{
	const char *const v[] = { f->run, f->decision, f->tool, f->event };

	for (size_t i = 0; i < nitems(v); i++)
		if (v[i] != NULL && memmem(line, len, v[i], strlen(v[i])) ==
		    NULL)
			return 0;
	return 1;
}

static void
take_line(struct scan *s, const char *line, size_t len)
{
	cJSON *rec;

	if (s->first) {
		s->first = 0;
		return;
	}
	if (len == 0 || len > AUDIT_READ_LINE_MAX || s->want == 0 ||
	    !may_match(line, len, s->f))
		return;
	if ((rec = cJSON_ParseWithLength(line, len)) == NULL)
		return;
	if (!cJSON_IsObject(rec) || !field_is(rec, "run", s->f->run) ||
	    !field_is(rec, "decision", s->f->decision) ||
	    !field_is(rec, "tool", s->f->tool) ||
	    !field_is(rec, "event", s->f->event)) {
		cJSON_Delete(rec);
		return;
	}
	if (s->skip > 0) {
		s->skip--;
		cJSON_Delete(rec);
		return;
	}
	cJSON_AddItemToArray(s->out, rec);
	s->want--;
}

/* Take every complete line of data from its end; what precedes the first
 * newline stays in carry for the next (earlier) chunk. */
static void
take_lines(struct scan *s, struct buf *data, struct buf *carry)
{
	size_t end = data->len;

	for (size_t i = data->len; i > 0 && s->want > 0; i--) {
		if (data->data[i - 1] != '\n')
			continue;
		if (s->overlong) {
			s->overlong = 0;	/* the rest of a cut line */
			s->first = 0;
		} else
			take_line(s, data->data + i, end - i);
		end = i - 1;
	}
	buf_reset(carry);
	if (end > AUDIT_READ_LINE_MAX)
		s->overlong = 1;
	else
		buf_add(carry, data->data, end);
}

int
audit_read(const char *path, const struct audit_filter *f, long offset,
    long limit, struct audit_page *out)
{
	struct scan s = { f, offset, limit, NULL, 1, 0 };
	struct buf data, carry;
	struct stat sb;
	char *chunk;
	off_t pos;
	ssize_t n;
	int fd, rc = 0;

	memset(out, 0, sizeof(*out));
	out->records = s.out = cJSON_CreateArray();
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return errno == ENOENT ? 0 : -1;
	if (fstat(fd, &sb) == -1) {
		close(fd);
		return -1;
	}
	chunk = xmalloc(AUDIT_READ_CHUNK);
	buf_init(&data);
	buf_init(&carry);
	pos = sb.st_size;
	while (pos > 0 && s.want > 0) {
		size_t len = pos < AUDIT_READ_CHUNK ? (size_t)pos :
		    AUDIT_READ_CHUNK;

		if (out->scanned >= AUDIT_READ_SCAN_MAX) {
			out->partial = 1;
			break;
		}
		pos -= (off_t)len;
		do
			n = pread(fd, chunk, len, pos);
		while (n == -1 && errno == EINTR);
		if (n != (ssize_t)len) {
			rc = -1;
			if (n >= 0)
				errno = EIO;	/* the trail shrank under us */
			break;
		}
		buf_reset(&data);
		buf_add(&data, chunk, len);
		buf_add(&data, carry.data, carry.len);
		out->scanned += len;
		take_lines(&s, &data, &carry);
	}
	/* The trail's first line has no newline before it. */
	if (rc == 0 && pos == 0 && s.want > 0 && !s.overlong)
		take_line(&s, carry.data, carry.len);
	free(chunk);
	buf_free(&data);
	buf_free(&carry);
	close(fd);
	return rc;
}
