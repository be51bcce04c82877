/* read_file: bytes of a regular file the read axis granted. The engine checked
 * the path and resolved every symlink; this tool opens only that resolved path,
 * through perm_open, so a symlink swapped in after the check is refused rather
 * than followed. Directories, devices, FIFOs and sockets are refused: only a
 * regular file has bytes to read that cannot block the loop. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tool.h"
#include "util.h"

#define RF_MAX_LIMIT	(16L << 20)		/* bytes one call may read */
#define RF_MAX_OFFSET	(1LL << 53)		/* exact in a JSON number */
#define RF_FIRST_ALLOC	((size_t)64 << 10)	/* grown as the file delivers */

static int
rf_exists(const struct cfg *cfg)
{
	return cfg->perm.read.n > 0;
}

/* An optional non-negative whole number no larger than max. -1 with a reason
 * for the model when it is there but is not one. */
static int
get_uint(const cJSON *v, const char *name, long long max, long long *out,
    char *why, size_t whylen)
{
	double d;

	if (v == NULL)
		return 0;
	if (!cJSON_IsNumber(v)) {
		snprintf(why, whylen, "\"%s\" must be a number", name);
		return -1;
	}
	d = v->valuedouble;
	if (!isfinite(d) || d != floor(d)) {
		snprintf(why, whylen, "\"%s\" must be a whole number", name);
		return -1;
	}
	if (d < 0 || d > (double)max) {
		snprintf(why, whylen, "\"%s\" must be between 0 and %lld", name,
		    max);
		return -1;
	}
	*out = (long long)d;
	return 1;
}

static const char *
open_error(int e)
{
	switch (e) {
	case ELOOP:
	case ENOTDIR:
	case EXDEV:
		return "a symbolic link appeared in the path after the "
		    "permission check; refused";
	case EACCES:
		return "permission denied by the file system";
	default:
		return strerror(e);
	}
}

static void
rf_call(struct tool_call *tc)
{
	static const char *const fields[] = { "path", "offset", "limit" };
	const cJSON *f[3], *path, *off, *lim;
	const char *resolved = tc->perm.resolved;
	long long offset = 0, limit;
	char why[128];
	struct stat st;
	struct buf b;
	size_t want, got = 0;
	ssize_t r;
	int fd, more;

	if (tool_input(tc, fields, nitems(fields), f) == -1)
		return;
	path = f[0];
	off = f[1];
	lim = f[2];
	if (!cJSON_IsString(path)) {
		tool_fail(tc, "read_file: \"path\" must be a string");
		return;
	}
	limit = tc->cfg->limits.tool_output > 0 ?
	    tc->cfg->limits.tool_output : 8192;
	if (get_uint(off, "offset", RF_MAX_OFFSET, &offset, why,
	    sizeof(why)) == -1 ||
	    get_uint(lim, "limit", RF_MAX_LIMIT, &limit, why, sizeof(why)) ==
	    -1) {
		tool_fail(tc, "read_file: %s", why);
		return;
	}
	if (!tc->perm.allowed || resolved[0] != '/') {
		tool_fail(tc, "read_file: the path was not authorized");
		return;
	}

	/* O_NONBLOCK: opening a FIFO must not wait for a writer. */
	fd = perm_open(&tc->cfg->perm, PERM_READ, resolved,
	    O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	if (fd == -1) {
		tool_fail(tc, "read_file: cannot open \"%s\": %s", resolved,
		    open_error(errno));
		return;
	}
	if (fstat(fd, &st) == -1) {
		tool_fail(tc, "read_file: cannot stat \"%s\": %s", resolved,
		    strerror(errno));
		close(fd);
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		tool_fail(tc, "read_file: \"%s\" is %s, not a regular file",
		    resolved, S_ISDIR(st.st_mode) ? "a directory" :
		    S_ISFIFO(st.st_mode) ? "a FIFO" :
		    S_ISSOCK(st.st_mode) ? "a socket" :
		    S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" :
		    "something else");
		close(fd);
		return;
	}
	(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);

	/* Read one byte past the limit to learn whether more follows (files
	 * in /proc report a size of 0, so st_size cannot tell). */
	want = (size_t)limit + 1;
	buf_init(&b);
	b.cap = want < RF_FIRST_ALLOC ? want + 1 : RF_FIRST_ALLOC;
	b.data = xmalloc(b.cap);
	while (got < want) {
		if (got + 1 == b.cap) {
			b.cap = b.cap * 2 > want + 1 ? want + 1 : b.cap * 2;
			b.data = xrealloc(b.data, b.cap);
		}
		r = pread(fd, b.data + got, b.cap - 1 - got, (off_t)offset +
		    (off_t)got);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			tool_fail(tc, "read_file: reading \"%s\": %s", resolved,
			    strerror(errno));
			close(fd);
			buf_free(&b);
			return;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	more = got > (size_t)limit;
	b.len = more ? (size_t)limit : got;
	b.data[b.len] = '\0';
	if (more && st.st_size > 0)
		buf_addf(&b, "\n[read_file: bytes %lld-%lld of %lld shown; read "
		    "on with offset %lld]", offset, offset + limit,
		    (long long)st.st_size, offset + limit);
	else if (more)
		buf_addf(&b, "\n[read_file: bytes %lld-%lld shown, more "
		    "follows; read on with offset %lld]", offset,
		    offset + limit, offset + limit);
	else if (got == 0 && offset > 0 && offset >= st.st_size)
		buf_addf(&b, "[read_file: offset %lld is at or past the end of "
		    "the file (%lld bytes)]", offset, (long long)st.st_size);
	tool_done(tc, b.data, b.len, 0);
	buf_free(&b);
}

const struct tool_def tool_read_file = {
	.name = "read_file",
	.description = "Read a file the agent may read. Returns its bytes "
	    "from offset (default 0), at most limit bytes (default: the tool "
	    "output cap); a note at the end says when more follows. Only "
	    "regular files; paths must be absolute.",
	.input_schema = "{\"type\":\"object\",\"properties\":{"
	    "\"path\":{\"type\":\"string\",\"description\":\"Absolute path\"},"
	    "\"offset\":{\"type\":\"integer\",\"minimum\":0,"
	    "\"description\":\"First byte to read\"},"
	    "\"limit\":{\"type\":\"integer\",\"minimum\":0,"
	    "\"maximum\":16777216,\"description\":\"Bytes to read at most\"}},"
	    "\"required\":[\"path\"],\"additionalProperties\":false}",
	.axis = PERM_READ,
	.target_key = "path",
	.exists = rf_exists,
	.call = rf_call,
};
