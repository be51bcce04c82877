/* The permission engine's dispatcher and the net and path axes. The run axis
 * lives in perm_run.c (it needs the shell parser); both are one module. */
#include "perm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "url.h"

#define PERM_SHOW_MAX		160	/* bytes of a value quoted in a reason */
#define PERM_MAXSYMLINKS	40	/* as the kernel's path walk */
#define PERM_EAGAIN_TRIES	64	/* openat2 retries on a racing rename */

static const char *axis_names[] = { "net", "run", "read", "write" };

const char *
perm_axis_name(enum perm_axis a)
{
	if ((unsigned)a >= nitems(axis_names))
		return "unknown";
	return axis_names[a];
}

int
perm_axis_parse(const char *s, enum perm_axis *out)
{
	for (size_t i = 0; i < nitems(axis_names); i++)
		if (strcmp(s, axis_names[i]) == 0) {
			*out = (enum perm_axis)i;
			return 0;
		}
	return -1;
}

int
perm_check(const struct cfg_perms *p, enum perm_axis axis, const char *value,
    struct perm_result *res)
{
	memset(res, 0, sizeof(*res));
	switch (axis) {
	case PERM_NET:
		return perm_check_net(p, value, res);
	case PERM_RUN:
		return perm_check_run(p, value, res);
	case PERM_READ:
	case PERM_WRITE:
		return perm_check_path(p, axis, value, res);
	}
	return 0;
}


/* Quote a value for a reason: printable ASCII as is, '"' and '\' escaped,
 * any other byte as \xNN (a reason is one line of plain text), and a long
 * value cut with "...". out must hold PERM_SHOW_MAX + 4 bytes. */
static void
show(char *out, const char *s, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char t[8];
		int tl;

		if (c == '"' || c == '\\')
			tl = snprintf(t, sizeof(t), "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			tl = snprintf(t, sizeof(t), "\\x%02x", c);
		else
			tl = snprintf(t, sizeof(t), "%c", c);
		if (o + (size_t)tl > PERM_SHOW_MAX) {
			memcpy(out + o, "...", 3);
			o += 3;
			break;
		}
		memcpy(out + o, t, (size_t)tl);
		o += (size_t)tl;
	}
	out[o] = '\0';
}

static void
result_reset(struct perm_result *res)
{
	res->allowed = 0;
	res->reason[0] = '\0';
	res->resolved[0] = '\0';
}

/*
 * Whether a net grant is already in the loader's form as far as matching
 * goes: lowercase letters, digits, '-', '.', '*', no trailing dot. Such a
 * grant is compared as it is; it can only equal a host (or a suffix of
 * one) that url_parse validated, so a malformed one never matches. Other
 * grants (IPv6, upper case) are normalized first.
 */
static int
canonical(const char *g)
{
	const char *s = g;

	for (; *s != '\0'; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
		    *s == '-' || *s == '.' || *s == '*'))
			return 0;
	return s != g && s[-1] != '.';
}

/*
 * The net axis. The value is parsed the way curl will read it (url.c), and
 * only the host is matched: exactly, or under a "*." pattern for names. An
 * IP literal in any spelling matches only the same literal in the list.
 */
int
perm_check_net_n(const struct cfg_perms *p, const char *value, size_t len,
    struct perm_result *res)
{
	char why[128], shown[PERM_SHOW_MAX + 4], g[URL_HOST_MAX + 3];
	size_t hl;
	struct url u;

	result_reset(res);
	if (url_parse(value, len, &u, why, sizeof(why)) == -1) {
		show(shown, value, len);
		snprintf(res->reason, sizeof(res->reason),
		    "net access to \"%s\" is denied: %s", shown, why);
		return 0;
	}
	hl = strlen(u.host);
	/* Exact grants first: a host that has one is pinned, even where a
	 * wildcard covers it too. */
	for (int wild = 0; wild < 2; wild++)
		for (size_t i = 0; i < p->net.n; i++) {
			const char *gr = p->net.v[i], *m = gr;
			size_t gl;

			if (!canonical(gr)) {
				if (url_host_normalize(gr, strlen(gr), 1, g,
				    sizeof(g)) == -1)
					continue;
				m = g;
			}
			if (!wild && strcmp(m, u.host) == 0)
				goto allow;
			if (!wild || u.host_kind != URL_HOST_NAME ||
			    m[0] != '*' || m[1] != '.')
				continue;
			gl = strlen(m + 1);	/* ".example.com" */
			if (hl > gl && memcmp(u.host + hl - gl, m + 1, gl) ==
			    0) {
				res->url.by_wildcard = 1;
				goto allow;
			}
		}
	snprintf(res->reason, sizeof(res->reason), "net access to \"%s\" is "
	    "not in the agent's permissions.net allowlist", u.host);
	return 0;

allow:
	res->allowed = 1;
	memcpy(res->url.scheme, u.scheme, sizeof(res->url.scheme));
	memcpy(res->url.host, u.host, hl + 1);
	res->url.port = u.port;
	res->url.host_is_ip = u.host_kind != URL_HOST_NAME;
	res->url.port_explicit = u.port_explicit;
	res->url.bare = u.bare;
	res->url.rest_off = u.rest_off;
	return 1;
}

int
perm_check_net(const struct cfg_perms *p, const char *value,
    struct perm_result *res)
{
	return perm_check_net_n(p, value, strlen(value), res);
}

int
perm_url_format(const struct perm_url *u, const char *value, char *out,
    size_t outlen)
{
	const char *rest = value + u->rest_off, *hash = strchr(rest, '#');
	int rl = hash != NULL ? (int)(hash - rest) : (int)strlen(rest), n;
	char port[8] = "";

	if (u->port_explicit)
		snprintf(port, sizeof(port), ":%d", u->port);
	if (strchr(u->host, ':') != NULL)
		n = snprintf(out, outlen, "%s://[%s]%s%.*s", u->scheme,
		    u->host, port, rl, rest);
	else
		n = snprintf(out, outlen, "%s://%s%s%.*s", u->scheme, u->host,
		    port, rl, rest);
	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

int
perm_net_grant_normalize(const char *in, char *out, size_t outlen)
{
	return url_host_normalize(in, strlen(in), 1, out, outlen) == -1 ?
	    -1 : 0;
}

/*
 * Normalize an absolute path lexically into out (PERM_PATH_MAX bytes): no
 * ".", no "..", no duplicate or trailing slash; ".." at the root stays
 * there. This is the path the model named; symlinks come next.
 */
static int
path_normalize(const char *s, size_t n, char *out, const char **why)
{
	size_t o = 0, i = 0;

	if (n == 0 || s[0] != '/') {
		*why = "relative paths are not allowed (tools have no "
		    "working directory)";
		return -1;
	}
	while (i < n) {
		size_t st, cl;

		while (i < n && s[i] == '/')
			i++;
		st = i;
		while (i < n && s[i] != '/')
			i++;
		cl = i - st;
		if (cl == 0 || (cl == 1 && s[st] == '.'))
			continue;
		if (cl > NAME_MAX) {
			*why = "a path component is longer than 255 bytes";
			return -1;
		}
		if (cl == 2 && s[st] == '.' && s[st + 1] == '.') {
			/* The kernel reads "/.." as "/", but no honest path
			 * climbs above the root: it is a probe. */
			if (o == 0) {
				*why = "the path climbs above /";
				return -1;
			}
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
			continue;
		}
		if (o + 1 + cl >= PERM_PATH_MAX) {
			*why = "the path is longer than 4095 bytes";
			return -1;
		}
		out[o++] = '/';
		memcpy(out + o, s + st, cl);
		o += cl;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return 0;
}

static int
sys_openat2(int dirfd, const char *path, struct open_how *how)
{
	return (int)syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
}

/* openat2 is missing (old kernel) or filtered (a container's seccomp
 * profile): the callers fall back to plain syscalls. */
static int
openat2_unavailable(int e)
{
	return e == ENOSYS || e == EPERM || e == E2BIG;
}

/* Whether PATH exists with no symlink anywhere in it, in one syscall: the
 * common case, where the normalized path is already the resolved one. */
static int
exists_without_symlinks(const char *path, int flags)
{
	struct open_how how;
	int fd;

	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)(O_PATH | O_CLOEXEC | flags);
	how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
	if ((fd = sys_openat2(AT_FDCWD, path, &how)) == -1)
		return 0;
	close(fd);
	return 1;
}

/*
 * Resolve every symlink in a normalized absolute path, like realpath(3),
 * except that components that do not exist (yet) are kept as they are: the
 * deepest existing ancestor is resolved and the rest appended, and a
 * dangling symlink resolves to its target. A link's ".." applies to the
 * link's real parent, as in the kernel. Returns 0, or -1 with errno
 * (ELOOP, ENAMETOOLONG, ENOTDIR, EACCES...).
 */
static int
resolve_slow(const char *norm, char *out)
{
	char rest[PERM_PATH_MAX], tmp[PERM_PATH_MAX], link[PERM_PATH_MAX];
	size_t o = 0, rl;
	const char *p;
	int missing = 0, nlinks = 0;
	ssize_t r;

	rl = strlen(norm);
	memcpy(rest, norm, rl + 1);
	p = rest;
	out[0] = '\0';
	for (;;) {
		const char *st;
		size_t cl;

		while (*p == '/')
			p++;
		if (*p == '\0')
			break;
		st = p;
		while (*p != '\0' && *p != '/')
			p++;
		cl = (size_t)(p - st);
		if (cl == 1 && st[0] == '.')
			continue;
		if (cl > NAME_MAX) {
			errno = ENAMETOOLONG;
			return -1;
		}
		if (cl == 2 && st[0] == '.' && st[1] == '.') {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
			out[o] = '\0';
			if (missing > 0)
				missing--;
			continue;
		}
		if (o + 1 + cl >= PERM_PATH_MAX) {
			errno = ENAMETOOLONG;
			return -1;
		}
		out[o] = '/';
		memcpy(out + o + 1, st, cl);
		o += 1 + cl;
		out[o] = '\0';
		if (missing > 0) {
			missing++;
			continue;
		}
		if ((r = readlink(out, link, sizeof(link))) == -1) {
			if (errno == EINVAL)
				continue;		/* not a symlink */
			if (errno == ENOENT) {
				missing = 1;
				continue;
			}
			return -1;
		}
		if ((size_t)r >= sizeof(link)) {
			errno = ENAMETOOLONG;
			return -1;
		}
		if (r == 0) {
			errno = ENOENT;
			return -1;
		}
		if (++nlinks > PERM_MAXSYMLINKS) {
			errno = ELOOP;
			return -1;
		}
		link[r] = '\0';
		/* Drop the link itself, then walk its target before the rest. */
		o -= 1 + cl;
		if (link[0] == '/')
			o = 0;
		out[o] = '\0';
		rl = strlen(p);
		if ((size_t)r + 1 + rl + 1 > sizeof(tmp)) {
			errno = ENAMETOOLONG;
			return -1;
		}
		memcpy(tmp, link, (size_t)r);
		tmp[r] = '/';
		memcpy(tmp + r + 1, p, rl + 1);
		memcpy(rest, tmp, (size_t)r + 1 + rl + 1);
		p = rest;
	}
	if (o == 0) {
		out[0] = '/';
		out[1] = '\0';
	}
	return 0;
}

/* Resolve a normalized absolute path (see resolve_slow). The fast path
 * needs one or two syscalls when no symlink is involved: the whole path, or
 * its parent when only the last component does not exist yet. */
static int
resolve(const char *norm, char *out)
{
	size_t n = strlen(norm);

	if (exists_without_symlinks(norm, 0)) {
		memcpy(out, norm, n + 1);
		return 0;
	}
	if (errno == ENOENT && n > 1) {
		char parent[PERM_PATH_MAX];
		size_t pl = n;

		while (pl > 0 && norm[pl - 1] != '/')
			pl--;
		if (pl > 1)
			pl--;
		memcpy(parent, norm, pl);
		parent[pl] = '\0';
		if (exists_without_symlinks(parent, O_DIRECTORY)) {
			memcpy(out, norm, n + 1);
			return 0;
		}
	}
	return resolve_slow(norm, out);
}

/* Whether PATH is ROOT or beneath it, by whole components. */
static int
beneath(const char *path, const char *root)
{
	size_t rl = strlen(root);

	if (rl == 1 && root[0] == '/')
		return 1;
	return strncmp(path, root, rl) == 0 &&
	    (path[rl] == '\0' || path[rl] == '/');
}

static const struct strlist *
axis_list(const struct cfg_perms *p, enum perm_axis axis)
{
	return axis == PERM_WRITE ? &p->write : &p->read;
}

/*
 * The read and write axes. The path is normalized, then resolved (every
 * symlink, the grants' too), and the resolved path must sit beneath a
 * resolved grant. The tool acts on res->resolved, through perm_open.
 */
int
perm_check_path_n(const struct cfg_perms *p, enum perm_axis axis,
    const char *value, size_t len, struct perm_result *res)
{
	const struct strlist *l = axis_list(p, axis);
	const char *an = perm_axis_name(axis), *why = NULL;
	char norm[PERM_PATH_MAX], g[PERM_PATH_MAX], rg[PERM_PATH_MAX];
	char shown[PERM_SHOW_MAX + 4], shown2[PERM_SHOW_MAX + 4];
	char *resolved = res->resolved;
	int inside = 0, rerr = 0;

	result_reset(res);
	if (axis != PERM_READ && axis != PERM_WRITE)
		why = "not a path axis";
	else if (len == 0)
		why = "the path is empty";
	else if (memchr(value, '\0', len) != NULL)
		why = "the path contains a NUL byte";
	else if (len >= PERM_PATH_MAX)
		why = "the path is longer than 4095 bytes";
	else {
		for (size_t i = 0; i < len && why == NULL; i++)
			if ((unsigned char)value[i] < 0x20 ||
			    value[i] == 0x7f)
				why = "the path contains control characters";
	}
	if (why != NULL || path_normalize(value, len, norm, &why) == -1) {
		show(shown, value, len);
		snprintf(res->reason, sizeof(res->reason),
		    "%s access to \"%s\" is denied: %s", an, shown, why);
		return 0;
	}

	if (resolve(norm, resolved) == -1) {
		rerr = errno;
		resolved[0] = '\0';
	}
	/* A grant as written: the resolved path has no symlink in it, so a
	 * grant it lies beneath has none either and is its own resolution. */
	for (size_t i = 0; i < l->n; i++) {
		const char *gr = l->v[i];

		if (path_normalize(gr, strlen(gr), g, &why) == -1)
			continue;
		if (rerr == 0 && beneath(resolved, g)) {
			res->allowed = 1;
			return 1;
		}
		inside |= beneath(norm, g);
	}
	/* A grant that is itself a symlink (/tmp on some systems). */
	for (size_t i = 0; i < l->n; i++) {
		const char *gr = l->v[i];

		if (path_normalize(gr, strlen(gr), g, &why) == -1 ||
		    resolve(g, rg) == -1)
			continue;
		if (rerr == 0 && beneath(resolved, rg)) {
			res->allowed = 1;
			return 1;
		}
		inside |= beneath(norm, rg);
	}

	show(shown, norm, strlen(norm));
	if (rerr != 0 && inside) {
		switch (rerr) {
		case ELOOP:
			why = "too many levels of symbolic links (a loop?)";
			break;
		case ENAMETOOLONG:
			why = "it is too long once symbolic links are resolved";
			break;
		case ENOTDIR:
			why = "a component of the path is not a directory";
			break;
		default:
			why = strerror(rerr);
			break;
		}
		snprintf(res->reason, sizeof(res->reason),
		    "%s access to \"%s\" is denied: %s", an, shown, why);
	} else if (rerr == 0 && inside && strcmp(norm, resolved) != 0) {
		show(shown2, resolved, strlen(resolved));
		snprintf(res->reason, sizeof(res->reason),
		    "%s access to \"%s\" is denied: it resolves to \"%s\", "
		    "outside the agent's permissions.%s allowlist", an, shown,
		    shown2, an);
	} else
		snprintf(res->reason, sizeof(res->reason), "%s access to "
		    "\"%s\" is not in the agent's permissions.%s allowlist",
		    an, shown, an);
	resolved[0] = '\0';
	return 0;
}

int
perm_check_path(const struct cfg_perms *p, enum perm_axis axis,
    const char *value, struct perm_result *res)
{
	return perm_check_path_n(p, axis, value, strlen(value), res);
}

/*
 * Open REL (relative, normalized: no ".", "..", empty component) beneath
 * DIRFD following no symlink at all: every directory with O_PATH |
 * O_DIRECTORY | O_NOFOLLOW (a symlink there fails with ENOTDIR), the last
 * component with flags | O_NOFOLLOW (ELOOP). The fallback for openat2.
 */
static int
walk_nofollow(int dirfd, const char *rel, int flags, mode_t mode)
{
	char comp[NAME_MAX + 1];
	int cur = dirfd, fd, e;

	for (;;) {
		const char *sl = strchr(rel, '/');
		size_t cl = sl != NULL ? (size_t)(sl - rel) : strlen(rel);

		if (cl == 0 || cl > NAME_MAX) {
			errno = EINVAL;
			fd = -1;
			break;
		}
		memcpy(comp, rel, cl);
		comp[cl] = '\0';
		if (sl == NULL) {
			fd = openat(cur, comp, flags | O_NOFOLLOW | O_CLOEXEC,
			    mode);
			break;
		}
		fd = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
		if (cur != dirfd)
			close(cur);
		if (fd == -1)
			return -1;
		cur = fd;
		rel = sl + 1;
	}
	e = errno;
	if (cur != dirfd)
		close(cur);
	errno = e;
	return fd;
}

/* Open a granted root (absolute, normalized) as an O_PATH directory,
 * refusing a symlink anywhere in it: a root swapped for a link after the
 * check must not carry the open elsewhere. */
static int
open_root(const char *root)
{
	struct open_how how;
	int fd, slash;

	memset(&how, 0, sizeof(how));
	how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
	how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
	for (int i = 0; i < PERM_EAGAIN_TRIES; i++) {
		fd = sys_openat2(AT_FDCWD, root, &how);
		if (fd != -1 || errno != EAGAIN)
			break;
	}
	if (fd != -1 || !openat2_unavailable(errno))
		return fd;
	if ((slash = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1)
		return -1;
	if (root[1] == '\0')
		return slash;
	fd = walk_nofollow(slash, root + 1, O_PATH | O_DIRECTORY, 0);
	close(slash);
	return fd;
}

/* Open resolved beneath ROOT (which holds it) from a fresh root fd. */
static int
open_beneath(const char *root, const char *resolved, int flags,
    mode_t mode)
{
	const char *rel = resolved + strlen(root);
	struct open_how how;
	int rootfd, fd = -1, e;

	if ((rootfd = open_root(root)) == -1)
		return -1;
	while (*rel == '/')
		rel++;
	if (*rel == '\0')
		rel = ".";
	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC);
	if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
		how.mode = mode;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
	    RESOLVE_NO_MAGICLINKS;
	for (int i = 0; i < PERM_EAGAIN_TRIES; i++) {
		fd = sys_openat2(rootfd, rel, &how);
		if (fd != -1 || errno != EAGAIN)
			break;
	}
	if (fd == -1 && openat2_unavailable(errno))
		fd = strcmp(rel, ".") == 0 ?
		    openat(rootfd, ".", flags | O_NOFOLLOW | O_CLOEXEC, mode) :
		    walk_nofollow(rootfd, rel, flags, mode);
	e = errno;
	close(rootfd);
	errno = e;
	return fd;
}

int
perm_open(const struct cfg_perms *p, enum perm_axis axis,
    const char *resolved, int flags, mode_t mode)
{
	const struct strlist *l;
	char norm[PERM_PATH_MAX], g[PERM_PATH_MAX], rg[PERM_PATH_MAX];
	const char *why;
	size_t n;
	int fd, err = EACCES;

	if ((axis != PERM_READ && axis != PERM_WRITE) ||
	    (n = strnlen(resolved, PERM_PATH_MAX)) == PERM_PATH_MAX ||
	    path_normalize(resolved, n, norm, &why) == -1 ||
	    strcmp(norm, resolved) != 0) {
		errno = EINVAL;
		return -1;
	}
	if (axis == PERM_READ && ((flags & O_ACCMODE) != O_RDONLY ||
	    (flags & (O_CREAT | O_TRUNC | O_APPEND)) != 0 ||
	    (flags & O_TMPFILE) == O_TMPFILE)) {
		errno = EACCES;
		return -1;
	}
	l = axis_list(p, axis);
	for (size_t i = 0; i < l->n; i++) {
		if (path_normalize(l->v[i], strlen(l->v[i]), g, &why) == -1)
			continue;
		if (beneath(resolved, g))
			fd = open_beneath(g, resolved, flags, mode);
		else if (resolve(g, rg) == 0 && beneath(resolved, rg))
			fd = open_beneath(rg, resolved, flags, mode);
		else
			continue;
		if (fd != -1)
			return fd;
		err = errno;
	}
	errno = err;
	return -1;
}
