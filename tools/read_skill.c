/* read_skill: the SKILL.md of one of the agent's skills. The permission is the
 * config's skills list itself: only a listed name is read, and only the file
 * {skills}/{name}/SKILL.md, opened without following any symlink so that a
 * link planted in the skills folder cannot carry the read elsewhere. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tool.h"
#include "util.h"

#define SKILL_MAX	(256 << 10)	/* bytes of one SKILL.md */
#define SKILL_NAME_MAX	128

static int
rs_exists(const struct cfg *cfg)
{
	return cfg->skills.n > 0;
}

/* Open {skills_dir}/{name}/SKILL.md: the skills folder is the operator's and
 * may itself be a link (a mount), but beneath it nothing is followed. */
static int
open_skill(const char *skills_dir, const char *name)
{
	int root, dir, fd, e;

	if ((root = open(skills_dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1)
		return -1;
	dir = openat(root, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	e = errno;
	close(root);
	if (dir == -1) {
		errno = e;
		return -1;
	}
	fd = openat(dir, "SKILL.md", O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
	    O_NOCTTY | O_CLOEXEC);
	e = errno;
	close(dir);
	errno = e;
	return fd;
}

/* The skills list is read_skill's grant: a name outside it is a denial,
 * decided before the call and recorded as one. A name that is not a string
 * is left to rs_call to fail. */
static int
rs_refuse(const struct tool_call *tc, char *reason, size_t reasonlen)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(tc->input, "name");

	if (!cJSON_IsString(name) || name->valuestring == NULL ||
	    strlist_has(&tc->cfg->skills, name->valuestring))
		return 0;
	snprintf(reason, reasonlen, "skill \"%.64s\" is not in the agent's "
	    "skills list", name->valuestring);
	return 1;
}

static void
rs_call(struct tool_call *tc)
{
	static const char *const fields[] = { "name" };
	const cJSON *name;
	const char *n;
	struct stat st;
	struct buf b;
	char chunk[8192], why[PERM_REASON_MAX];
	ssize_t r;
	int fd;

	if (tool_input(tc, fields, nitems(fields), &name) == -1)
		return;
	if (!cJSON_IsString(name) || name->valuestring == NULL) {
		tool_fail(tc, "read_skill: \"name\" must be a string");
		return;
	}
	n = name->valuestring;
	/* The list decides (tool_invoke asked rs_refuse already; a direct
	 * call asks again); the path checks only keep a bad config (or a
	 * future loader bug) from turning a name into a path. */
	if (rs_refuse(tc, why, sizeof(why))) {
		tool_fail(tc, "permission denied: %s", why);
		return;
	}
	if (strlen(n) > SKILL_NAME_MAX) {
		tool_fail(tc, "read_skill: the name is longer than %d bytes",
		    SKILL_NAME_MAX);
		return;
	}
	if (*n == '\0' || *n == '.' || strchr(n, '/') != NULL) {
		tool_fail(tc, "read_skill: \"%.64s\" is not a valid skill name",
		    n);
		return;
	}
	if (tc->cfg->skills_dir == NULL ||
	    (fd = open_skill(tc->cfg->skills_dir, n)) == -1) {
		tool_fail(tc, "read_skill: cannot open SKILL.md of \"%s\": %s", n,
		    errno == ELOOP || errno == ENOTDIR ?
		    "a symbolic link is in the way" : strerror(errno));
		return;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		close(fd);
		tool_fail(tc, "read_skill: SKILL.md of \"%s\" is not a regular "
		    "file", n);
		return;
	}
	(void)fcntl(fd, F_SETFL, 0);
	buf_init(&b);
	for (;;) {
		r = read(fd, chunk, sizeof(chunk));
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (b.len + (size_t)r > SKILL_MAX) {
			r = -1;
			errno = EFBIG;
			break;
		}
		buf_add(&b, chunk, (size_t)r);
	}
	close(fd);
	if (r == -1) {
		tool_fail(tc, "read_skill: reading SKILL.md of \"%s\": %s", n,
		    errno == EFBIG ? "larger than 256 KiB" : strerror(errno));
		buf_free(&b);
		return;
	}
	tool_done(tc, b.data != NULL ? b.data : "", b.len, 0);
	buf_free(&b);
}

const struct tool_def tool_read_skill = {
	.name = "read_skill",
	.description = "Read the instructions (SKILL.md) of one of your skills, "
	    "by name.",
	.input_schema = "{\"type\":\"object\",\"properties\":{\"name\":"
	    "{\"type\":\"string\",\"description\":\"The skill's name\"}},"
	    "\"required\":[\"name\"],\"additionalProperties\":false}",
	.axis = TOOL_NO_AXIS,
	.target_key = "name",
	.exists = rs_exists,
	.refuse = rs_refuse,
	.call = rs_call,
};
