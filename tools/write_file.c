/* write_file: replace a file the write axis granted, atomically. The content
 * goes to a new temporary file beside the target, is synced, and is renamed
 * over the target, then the folder is synced: a reader sees the old file or
 * the new one, never a half-written one, and a crash leaves at worst a stray
 * temporary file. Everything happens through a folder fd that perm_open
 * obtained beneath the granted root, so a symlink swapped into the path after
 * the check is refused. Renaming also means a hard link to a file outside the
 * grant is replaced, never written through.
 *
 * Missing parent folders are not created: the model must name a folder that
 * exists, and a typo does not grow a tree of folders.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tool.h"
#include "util.h"

#define WF_MAX_CONTENT	(10 << 20)	/* bytes one call may write */
#define WF_TMP_TRIES	8

static int
wf_exists(const struct cfg *cfg)
{
	return cfg->perm.write.n > 0;
}

static const char *
open_error(int e)
{
	switch (e) {
	case ELOOP:
	case ENOTDIR:
	case EXDEV:
		return "a symbolic link or non-folder appeared in the path "
		    "after the permission check; refused";
	case ENOENT:
		return "the folder does not exist (write_file does not create "
		    "folders)";
	case EACCES:
		return "permission denied (it must lie beneath a granted "
		    "folder; a granted folder itself cannot be replaced)";
	default:
		return strerror(e);
	}
}

/* Write all of len bytes; -1 with errno. */
static int
write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t r = write(fd, p, len);

		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1)
			return -1;
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

/* Create a fresh temporary file in dirfd; its name goes to tmp. */
static int
create_temp(int dirfd, const char *base, char *tmp, size_t tmplen)
{
	unsigned char rnd[6];
	int fd = -1;

	for (int i = 0; i < WF_TMP_TRIES; i++) {
		random_bytes(rnd, sizeof(rnd));
		/* Keep the name within NAME_MAX whatever the target's is. */
		snprintf(tmp, tmplen, ".%.200s.af-%02x%02x%02x%02x%02x%02x.tmp",
		    base, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
		fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL |
		    O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
		if (fd != -1 || errno != EEXIST)
			break;
	}
	return fd;
}

static void
wf_call(struct tool_call *tc)
{
	static const char *const fields[] = { "path", "content" };
	const cJSON *f[2], *path, *content;
	const char *resolved = tc->perm.resolved, *data, *base;
	char parent[PERM_PATH_MAX], tmp[NAME_MAX + 1];
	struct stat st;
	mode_t mode = 0644;
	size_t len, pl;
	int dirfd, fd, have_old = 0, e;

	if (tool_input(tc, fields, nitems(fields), f) == -1)
		return;
	path = f[0];
	content = f[1];
	if (!cJSON_IsString(path)) {
		tool_fail(tc, "write_file: \"path\" must be a string");
		return;
	}
	if (!cJSON_IsString(content) || content->valuestring == NULL) {
		tool_fail(tc, "write_file: \"content\" must be a string");
		return;
	}
	data = content->valuestring;
	if ((len = strlen(data)) > WF_MAX_CONTENT) {
		tool_fail(tc, "write_file: \"content\" is larger than 10 MiB");
		return;
	}
	if (!tc->perm.allowed || resolved[0] != '/') {
		tool_fail(tc, "write_file: the path was not authorized");
		return;
	}

	/* Split the resolved path (absolute, normalized) into its folder and
	 * its last component. */
	base = strrchr(resolved, '/') + 1;
	if (*base == '\0' || strlen(base) > NAME_MAX) {
		tool_fail(tc, "write_file: \"%s\" does not name a file",
		    resolved);
		return;
	}
	pl = (size_t)(base - resolved) - 1;
	if (pl == 0)
		pl = 1;
	memcpy(parent, resolved, pl);
	parent[pl] = '\0';

	dirfd = perm_open(&tc->cfg->perm, PERM_WRITE, parent,
	    O_RDONLY | O_DIRECTORY, 0);
	if (dirfd == -1) {
		tool_fail(tc, "write_file: cannot open the folder \"%s\": %s",
		    parent, open_error(errno));
		return;
	}
	if (fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (!S_ISREG(st.st_mode)) {
			tool_fail(tc, "write_file: \"%s\" exists and is not a "
			    "regular file", resolved);
			goto out;
		}
		have_old = 1;
		mode = st.st_mode & 0777;	/* never set-id bits */
	} else if (errno != ENOENT) {
		tool_fail(tc, "write_file: \"%s\": %s", resolved,
		    strerror(errno));
		goto out;
	}

	if ((fd = create_temp(dirfd, base, tmp, sizeof(tmp))) == -1) {
		tool_fail(tc, "write_file: cannot create a temporary file in "
		    "\"%s\": %s", parent, strerror(errno));
		goto out;
	}
	/* The old file's owner keeps it when we may give it (root). */
	if (have_old)
		(void)fchown(fd, st.st_uid, st.st_gid);
	if (write_all(fd, data, len) == -1 || fchmod(fd, mode) == -1 ||
	    fsync(fd) == -1) {
		e = errno;
		close(fd);
		(void)unlinkat(dirfd, tmp, 0);
		tool_fail(tc, "write_file: writing \"%s\": %s", resolved,
		    strerror(e));
		goto out;
	}
	if (close(fd) == -1 || renameat(dirfd, tmp, dirfd, base) == -1) {
		e = errno;
		(void)unlinkat(dirfd, tmp, 0);
		tool_fail(tc, "write_file: replacing \"%s\": %s", resolved,
		    strerror(e));
		goto out;
	}
	/* The rename is durable only once the folder is. The file is in
	 * place by now, so a failure here is reported but not undone. */
	if (fsync(dirfd) == -1) {
		tool_fail(tc, "write_file: wrote \"%s\" but syncing its folder "
		    "failed: %s", resolved, strerror(errno));
		goto out;
	}
	{
		char msg[PERM_PATH_MAX + 64];
		int n = snprintf(msg, sizeof(msg), "wrote %zu bytes to %s", len,
		    resolved);

		tool_done(tc, msg, n < 0 ? 0 : (size_t)n >= sizeof(msg) ?
		    sizeof(msg) - 1 : (size_t)n, 0);
	}
out:
	close(dirfd);
}

const struct tool_def tool_write_file = {
	.name = "write_file",
	.description = "Create or replace a file the agent may write, with "
	    "the given content (atomically: readers see the old file or the "
	    "new one). The folder must already exist. Paths must be absolute.",
	.input_schema = "{\"type\":\"object\",\"properties\":{"
	    "\"path\":{\"type\":\"string\",\"description\":\"Absolute path\"},"
	    "\"content\":{\"type\":\"string\",\"description\":\"The whole new "
	    "content\"}},\"required\":[\"path\",\"content\"],"
	    "\"additionalProperties\":false}",
	.axis = PERM_WRITE,
	.target_key = "path",
	.exists = wf_exists,
	.call = wf_call,
};
