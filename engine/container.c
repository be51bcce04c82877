/* Are we in a container? af runs agents unattended and leans on the container
 * for what Landlock and seccomp do not do (its own file system, user and
 * network namespace), so `af run` refuses to start outside one unless told
 * otherwise. Every check reads files under a root, so tests use temp folders. */
#include "sandbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CT_READ_MAX	(64 << 10)

/* PID 1 names of an ordinary host. */
static const char *const host_inits[] = {
	"systemd", "init", "openrc-init", "runit", "runit-init", "s6-svscan",
	"dinit", "upstart",
};

static const char *const cgroup_marks[] = {
	"docker", "kubepods", "containerd", "lxc", "podman", "libpod",
};

static void
add_looked(char *looked, size_t len, const char *what)
{
	size_t n = strlen(looked);

	if (n + 1 >= len)
		return;
	snprintf(looked + n, len - n, "%s%s", n > 0 ? ", " : "", what);
}

static int
path_exists(const char *root, const char *rel)
{
	char p[4096];
	struct stat st;

	snprintf(p, sizeof(p), "%s%s", strcmp(root, "/") == 0 ? "" : root, rel);
	return lstat(p, &st) == 0;
}

/* The first line of a file under root, without its newline; -1 if absent. */
static int
read_small(const char *root, const char *rel, struct buf *b)
{
	char p[4096];

	snprintf(p, sizeof(p), "%s%s", strcmp(root, "/") == 0 ? "" : root, rel);
	buf_reset(b);
	return read_file_max(p, CT_READ_MAX, b);
}

static void
first_line(struct buf *b, char *out, size_t outlen)
{
	size_t n = strcspn(b->data != NULL ? b->data : "", "\n");

	snprintf(out, outlen, "%.*s", (int)n, b->data != NULL ? b->data : "");
}

int
container_detect_env(const char *root, const char *env, char *found,
    size_t foundlen, char *looked, size_t lookedlen)
{
	struct buf b;
	char line[256];
	int ret = 1;

	buf_init(&b);
	if (lookedlen > 0)
		*looked = '\0';
	if (foundlen > 0)
		*found = '\0';

	add_looked(looked, lookedlen, "/.dockerenv");
	if (path_exists(root, "/.dockerenv")) {
		snprintf(found, foundlen, "/.dockerenv exists");
		goto out;
	}
	add_looked(looked, lookedlen, "/run/.containerenv");
	if (path_exists(root, "/run/.containerenv")) {
		snprintf(found, foundlen, "/run/.containerenv exists");
		goto out;
	}
	add_looked(looked, lookedlen, "/run/systemd/container");
	if (read_small(root, "/run/systemd/container", &b) == 0) {
		first_line(&b, line, sizeof(line));
		if (*line != '\0') {
			snprintf(found, foundlen, "/run/systemd/container "
			    "says %s", line);
			goto out;
		}
	}
	add_looked(looked, lookedlen, "the container environment variable");
	if (env != NULL && *env != '\0') {
		snprintf(found, foundlen, "container=%s", env);
		goto out;
	}
	add_looked(looked, lookedlen, "/proc/1/cgroup");
	if (read_small(root, "/proc/1/cgroup", &b) == 0 && b.data != NULL)
		for (size_t i = 0; i < nitems(cgroup_marks); i++)
			if (strstr(b.data, cgroup_marks[i]) != NULL) {
				snprintf(found, foundlen, "/proc/1/cgroup "
				    "names %s", cgroup_marks[i]);
				goto out;
			}
	/* Kernels before PID namespaces were reflected here showed the
	 * host's PID of our PID 1 in its sched file. */
	add_looked(looked, lookedlen, "/proc/1/sched");
	if (read_small(root, "/proc/1/sched", &b) == 0) {
		const char *par;
		long pid;

		first_line(&b, line, sizeof(line));
		if ((par = strrchr(line, '(')) != NULL &&
		    sscanf(par, "(%ld,", &pid) == 1 && pid != 1) {
			snprintf(found, foundlen, "/proc/1/sched shows PID 1 "
			    "as %ld", pid);
			goto out;
		}
	}
	add_looked(looked, lookedlen, "/proc/1/comm");
	if (read_small(root, "/proc/1/comm", &b) == 0) {
		int init = 0;

		first_line(&b, line, sizeof(line));
		for (size_t i = 0; i < nitems(host_inits); i++)
			if (strcmp(line, host_inits[i]) == 0)
				init = 1;
		if (*line != '\0' && !init) {
			snprintf(found, foundlen, "PID 1 is %s, not an init "
			    "(/proc/1/comm)", line);
			goto out;
		}
	}
	ret = 0;
out:
	buf_free(&b);
	return ret;
}

int
container_detect(const char *root, char *found, size_t foundlen,
    char *looked, size_t lookedlen)
{
	return container_detect_env(root, getenv("container"), found, foundlen,
	    looked, lookedlen);
}
