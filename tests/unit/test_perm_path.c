/* Attack tests for the read and write axes and for perm_open. Each row
 * builds its files in a fresh mkdtemp folder T (its realpath stands for %T
 * everywhere), states the grants (comma separated), the axis, the input, the
 * expected decision and what we expect to read: for a denial a substring of
 * the reason, for an approval the resolved path. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perm.h"
#include "tt.h"

#define ALLOW	1
#define DENY	0
#define R	PERM_READ
#define W	PERM_WRITE

/* The tree most rows start from. */
#define BASE	"d:ws;f:ws/a;d:ws/sub;f:ws/sub/b;d:ws2;f:ws2/s;d:out;f:out/s"

#define NOT_IN(ax, p) ax " access to \"" p "\" is not in the agent's " \
	"permissions." ax " allowlist"
#define OUTSIDE(ax, p, t) ax " access to \"" p "\" is denied: it resolves " \
	"to \"" t "\", outside the agent's permissions." ax " allowlist"

#define PATH_CASES(X)							\
	/* Plain paths and lexical normalization. */			\
	X(file_inside, BASE, "%T/ws", R, "%T/ws/a", ALLOW, "%T/ws/a")	\
	X(grant_root_itself, BASE, "%T/ws", R, "%T/ws", ALLOW, "%T/ws")	\
	X(trailing_slash, BASE, "%T/ws", R, "%T/ws/sub/", ALLOW,	\
	    "%T/ws/sub")						\
	X(dot_segments, BASE, "%T/ws", R, "%T/ws/././sub/./b", ALLOW,	\
	    "%T/ws/sub/b")						\
	X(double_slashes, BASE, "%T/ws", R, "%T//ws///sub//b", ALLOW,	\
	    "%T/ws/sub/b")						\
	X(dotdot_inside, BASE, "%T/ws", R, "%T/ws/sub/../a", ALLOW,	\
	    "%T/ws/a")							\
	X(dotdot_escape, BASE, "%T/ws", R, "%T/ws/../out/s", DENY,	\
	    NOT_IN("read", "%T/out/s"))					\
	X(dotdot_to_etc, BASE, "%T/ws", R,				\
	    "%T/ws/../../../../../../../etc/passwd", DENY,		\
	    "is denied: the path climbs above /")			\
	X(dotdot_to_etc_exact, BASE, "%T/ws", R, "%T/ws/../../../etc/passwd",	\
	    DENY, NOT_IN("read", "/etc/passwd"))			\
	X(dotdot_above_root, BASE, "%T/ws", R, "/../../..", DENY,	\
	    "read access to \"/../../..\" is denied: the path climbs "	\
	    "above /")							\
	X(dotdot_above_root_back, BASE, "%T/ws", R, "/../..%T/ws/a",	\
	    DENY, "read access to \"/../..%T/ws/a\" is denied: the path "	\
	    "climbs above /")						\
	X(sibling_prefix, BASE, "%T/ws", R, "%T/ws2/s", DENY,		\
	    NOT_IN("read", "%T/ws2/s"))					\
	X(sibling_prefix_dir, BASE, "%T/ws", R, "%T/ws2", DENY,		\
	    NOT_IN("read", "%T/ws2"))					\
	X(parent_of_grant, BASE, "%T/ws", R, "%T", DENY,		\
	    NOT_IN("read", "%T"))					\
	X(grant_not_normalized, BASE, "%T/ws/./,%T//out/", R, "%T/out/s",\
	    ALLOW, "%T/out/s")						\
	X(root_grant, BASE, "/", R, "%T/out/s", ALLOW, "%T/out/s")	\
	X(read_missing_file, BASE, "%T/ws", R, "%T/ws/nothere", ALLOW,	\
	    "%T/ws/nothere")						\
	/* Inputs refused before any lookup. */				\
	X(relative, BASE, "%T/ws", R, "ws/a", DENY,			\
	    "read access to \"ws/a\" is denied: relative paths are not "	\
	    "allowed")							\
	X(relative_dot, BASE, "%T/ws", R, "./a", DENY,			\
	    "relative paths are not allowed")				\
	X(relative_tilde, BASE, "%T/ws", W, "~/x", DENY,		\
	    "write access to \"~/x\" is denied: relative paths")	\
	X(empty, BASE, "%T/ws", R, "", DENY, "the path is empty")	\
	X(nul_byte, BASE, "%T/ws", R, "%T/ws/a\0/../../../etc/passwd",	\
	    DENY, "the path contains a NUL byte")			\
	X(nul_shown_escaped, BASE, "%T/ws", R, "/x\0y", DENY,		\
	    "read access to \"/x\\x00y\" is denied")			\
	X(newline, BASE, "%T/ws", W, "%T/ws/a\nb", DENY,		\
	    "the path contains control characters")			\
	/* Symlinks. */							\
	X(symlink_in_in, BASE ";l:ws/l=a", "%T/ws", R, "%T/ws/l", ALLOW,	\
	    "%T/ws/a")							\
	X(symlink_abs_in_in, BASE ";l:ws/l=%T/ws/sub/b", "%T/ws", R,	\
	    "%T/ws/l", ALLOW, "%T/ws/sub/b")				\
	X(symlink_dotdot_in_in, BASE ";l:ws/sub/l=../a", "%T/ws", R,	\
	    "%T/ws/sub/l", ALLOW, "%T/ws/a")				\
	X(symlink_in_out, BASE ";l:ws/l=../out/s", "%T/ws", R,		\
	    "%T/ws/l", DENY, OUTSIDE("read", "%T/ws/l", "%T/out/s"))	\
	X(symlink_to_etc, BASE ";l:ws/l=/etc/passwd", "%T/ws", R,	\
	    "%T/ws/l", DENY, OUTSIDE("read", "%T/ws/l", "/etc/passwd"))	\
	X(symlink_dir_out, BASE ";l:ws/d=%T/out", "%T/ws", R,		\
	    "%T/ws/d/s", DENY, OUTSIDE("read", "%T/ws/d/s", "%T/out/s"))	\
	X(symlink_to_root, BASE ";l:ws/r=/", "%T/ws", R,		\
	    "%T/ws/r/etc/shadow", DENY,					\
	    OUTSIDE("read", "%T/ws/r/etc/shadow", "/etc/shadow"))	\
	X(symlink_proc_root, BASE ";l:ws/p=/proc/self/root", "%T/ws", R,	\
	    "%T/ws/p/etc/passwd", DENY, "resolves to \"/etc/passwd\"")	\
	X(symlink_prefix_sibling, BASE ";l:ws/l=../ws2/s", "%T/ws", R,	\
	    "%T/ws/l", DENY, OUTSIDE("read", "%T/ws/l", "%T/ws2/s"))	\
	X(symlink_then_dotdot, BASE ";l:ws/d=%T/out", "%T/ws", R,	\
	    "%T/ws/d/../a", ALLOW, "%T/ws/a")				\
	X(symlink_chain_in, BASE ";l:ws/l1=l2;l:ws/l2=sub/l3;"		\
	    "l:ws/sub/l3=../a", "%T/ws", R, "%T/ws/l1", ALLOW, "%T/ws/a")	\
	X(symlink_chain_out, BASE ";l:ws/l1=l2;l:ws/l2=../out/s",	\
	    "%T/ws", R, "%T/ws/l1", DENY, "resolves to \"%T/out/s\"")	\
	X(symlink_outside_to_in, BASE ";l:out/l=%T/ws/a", "%T/ws", R,	\
	    "%T/out/l", ALLOW, "%T/ws/a")				\
	X(symlink_missing_dotdot, BASE ";l:ws/l=nothere/../../out/s",	\
	    "%T/ws", R, "%T/ws/l", DENY, "resolves to \"%T/out/s\"")	\
	X(link_loop, BASE ";l:ws/a1=a2;l:ws/a2=a1", "%T/ws", R,		\
	    "%T/ws/a1", DENY, "read access to \"%T/ws/a1\" is denied: too "	\
	    "many levels of symbolic links")				\
	X(link_self_loop, BASE ";l:ws/x=x", "%T/ws", W, "%T/ws/x/new",	\
	    DENY, "too many levels of symbolic links")			\
	X(link_loop_outside, BASE ";l:out/x=x", "%T/ws", R, "%T/out/x",	\
	    DENY, NOT_IN("read", "%T/out/x"))				\
	X(not_a_directory, BASE, "%T/ws", R, "%T/ws/a/x", DENY,		\
	    "a component of the path is not a directory")		\
	X(grant_is_symlink, BASE ";l:wsl=ws", "%T/wsl", R, "%T/ws/a",	\
	    ALLOW, "%T/ws/a")						\
	X(grant_is_symlink_via, BASE ";l:wsl=ws", "%T/wsl", R,		\
	    "%T/wsl/sub/b", ALLOW, "%T/ws/sub/b")			\
	X(grant_is_symlink_out, BASE ";l:wsl=ws", "%T/wsl", R, "%T/out/s",\
	    DENY, NOT_IN("read", "%T/out/s"))				\
	/* Dangling links. */						\
	X(dangling_read_inside, BASE ";l:ws/d=nothere", "%T/ws", R,	\
	    "%T/ws/d", ALLOW, "%T/ws/nothere")				\
	X(dangling_write_inside, BASE ";l:ws/d=sub/new", "%T/ws", W,	\
	    "%T/ws/d", ALLOW, "%T/ws/sub/new")				\
	X(dangling_write_outside, BASE ";l:ws/d=%T/out/new", "%T/ws", W,	\
	    "%T/ws/d", DENY, OUTSIDE("write", "%T/ws/d", "%T/out/new"))	\
	X(dangling_write_etc, BASE ";l:ws/d=/etc/cron.d/af-evil",	\
	    "%T/ws", W, "%T/ws/d", DENY,				\
	    "resolves to \"/etc/cron.d/af-evil\"")			\
	X(dangling_dir_write, BASE ";l:ws/d=%T/out/newdir", "%T/ws", W,	\
	    "%T/ws/d/f", DENY, "resolves to \"%T/out/newdir/f\"")	\
	/* Writes. */							\
	X(write_new_file, BASE, "%T/ws", W, "%T/ws/new.txt", ALLOW,	\
	    "%T/ws/new.txt")						\
	X(write_new_deep, BASE, "%T/ws", W, "%T/ws/n1/n2/new.txt", ALLOW,	\
	    "%T/ws/n1/n2/new.txt")					\
	X(write_existing, BASE, "%T/ws", W, "%T/ws/a", ALLOW, "%T/ws/a")	\
	X(write_symlinked_parent_in, BASE ";l:ws/lnk=sub", "%T/ws", W,	\
	    "%T/ws/lnk/new.txt", ALLOW, "%T/ws/sub/new.txt")		\
	X(write_symlinked_parent_out, BASE ";l:ws/lnk=%T/out", "%T/ws",	\
	    W, "%T/ws/lnk/new.txt", DENY,				\
	    OUTSIDE("write", "%T/ws/lnk/new.txt", "%T/out/new.txt"))	\
	X(write_needs_write_grant, BASE, "%T/out", W, "%T/ws/a", DENY,	\
	    NOT_IN("write", "%T/ws/a"))					\
	X(write_dotdot_new, BASE, "%T/ws", W, "%T/ws/n1/../../out/x",	\
	    DENY, NOT_IN("write", "%T/out/x"))				\
	X(write_no_grants, BASE, "", W, "%T/ws/a", DENY,		\
	    NOT_IN("write", "%T/ws/a"))

/* The temporary folder of the current case, as a real path. */
static char T[256];

/* Replace each %T in s (n bytes, NUL bytes allowed) with T. */
static size_t
expand(const char *s, size_t n, char *out, size_t outlen)
{
	size_t o = 0, tl = strlen(T);

	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%' && i + 1 < n && s[i + 1] == 'T') {
			if (o + tl < outlen) {
				memcpy(out + o, T, tl);
				o += tl;
			}
			i++;
		} else if (o + 1 < outlen)
			out[o++] = s[i];
	}
	out[o] = '\0';
	return o;
}

static void
tmp_free(void)
{
	if (T[0] != '\0')
		tt_rmtree(T);
	T[0] = '\0';
}

/* A fresh folder with the files a row describes: "d:dir", "f:file",
 * "l:link=target", separated by ';', relative to T. */
static int
tmp_setup(const char *spec)
{
	char tmpl[] = "/tmp/af-perm-XXXXXX", item[1024], path[PATH_MAX], rp[PATH_MAX];
	const char *s = spec;

	if (mkdtemp(tmpl) == NULL || realpath(tmpl, rp) == NULL ||
	    strlen(rp) >= sizeof(T))
		return -1;
	memcpy(T, rp, strlen(rp) + 1);
	while (*s != '\0') {
		size_t n = strcspn(s, ";");
		char *eq;
		int fd;

		expand(s, n, item, sizeof(item));
		s += n;
		if (*s == ';')
			s++;
		if ((eq = strchr(item, '=')) != NULL)
			*eq++ = '\0';
		snprintf(path, sizeof(path), "%s/%s", T, item + 2);
		switch (item[0]) {
		case 'd':
			if (mkdir(path, 0700) == -1)
				return -1;
			break;
		case 'f':
			if ((fd = open(path, O_CREAT | O_EXCL | O_WRONLY,
			    0600)) == -1)
				return -1;
			if (write(fd, "content\n", 8) != 8) {
				close(fd);
				return -1;
			}
			close(fd);
			break;
		case 'l':
			if (eq == NULL || symlink(eq, path) == -1)
				return -1;
			break;
		default:
			return -1;
		}
	}
	return 0;
}

static void
perms_from(struct cfg_perms *p, const char *csv)
{
	char buf[PATH_MAX];
	const char *s = csv;

	memset(p, 0, sizeof(*p));
	while (*s != '\0') {
		size_t n = strcspn(s, ",");

		expand(s, n, buf, sizeof(buf));
		strlist_add(&p->read, buf);
		strlist_add(&p->write, buf);
		s += n;
		if (*s == ',')
			s++;
	}
}

static void
perms_free(struct cfg_perms *p)
{
	strlist_free(&p->read);
	strlist_free(&p->write);
}

static void
path_case(const char *setup, const char *grants, enum perm_axis axis,
    const char *in, size_t inlen, int expect, const char *want)
{
	struct cfg_perms p;
	struct perm_result res;
	char input[PATH_MAX * 2], w[PATH_MAX * 2];
	size_t n;

	memset(&p, 0, sizeof(p));
	if (tmp_setup(setup) == -1)
		tt_fail_msg("setup \"%s\" failed: %s", setup, strerror(errno));
	perms_from(&p, grants);
	n = expand(in, inlen, input, sizeof(input));
	expand(want, strlen(want), w, sizeof(w));
	tt_int_op(perm_check_path_n(&p, axis, input, n, &res), ==, expect);
	tt_int_op(res.allowed, ==, expect);
	if (expect == ALLOW) {
		tt_str_op(res.resolved, ==, w);
		tt_str_op(res.reason, ==, "");
	} else {
		if (strstr(res.reason, w) == NULL)
			tt_fail_msg("reason \"%s\" lacks \"%s\"", res.reason, w);
		tt_str_op(res.resolved, ==, "");
	}
end:
	perms_free(&p);
	tmp_free();
}

#define X(name, setup, grants, axis, in, expect, want)			\
static void								\
t_##name(void)								\
{									\
	path_case(setup, grants, axis, in, sizeof(in) - 1, expect, want);	\
}
PATH_CASES(X)
#undef X

/* Over-long inputs: denied with a short reason, never truncated. */
static void
t_too_long(void)
{
	struct cfg_perms p;
	struct perm_result res;
	char *s = malloc(PERM_PATH_MAX + 10);

	memset(&p, 0, sizeof(p));
	tt_int_op(tmp_setup(BASE), ==, 0);
	perms_from(&p, "/");
	s[0] = '/';
	for (size_t i = 1; i < PERM_PATH_MAX + 5; i++)
		s[i] = i % 100 == 0 ? '/' : 'a';
	s[PERM_PATH_MAX + 5] = '\0';
	tt_int_op(perm_check_path(&p, R, s, &res), ==, DENY);
	tt_assert(strstr(res.reason, "longer than 4095 bytes") != NULL);
	tt_assert(strlen(res.reason) < 300);
	s[PERM_PATH_MAX - 1] = '\0';
	tt_int_op(perm_check_path(&p, R, s, &res), ==, ALLOW);
end:
	free(s);
	perms_free(&p);
	tmp_free();
}

static void
t_component_too_long(void)
{
	struct cfg_perms p;
	struct perm_result res;
	char s[PATH_MAX];
	size_t tl;

	memset(&p, 0, sizeof(p));
	tt_int_op(tmp_setup(BASE), ==, 0);
	perms_from(&p, "%T/ws");
	tl = (size_t)snprintf(s, sizeof(s), "%s/ws/", T);
	memset(s + tl, 'n', NAME_MAX + 1);
	s[tl + NAME_MAX + 1] = '\0';
	tt_int_op(perm_check_path(&p, W, s, &res), ==, DENY);
	tt_assert(strstr(res.reason, "component is longer than 255") != NULL);
	s[tl + NAME_MAX] = '\0';
	tt_int_op(perm_check_path(&p, W, s, &res), ==, ALLOW);
end:
	perms_free(&p);
	tmp_free();
}

/* A symlink whose target plus the rest of the path overflows the limit. */
static void
t_too_long_after_links(void)
{
	struct cfg_perms p;
	struct perm_result res;
	char target[3000], link[PATH_MAX], s[PATH_MAX];
	size_t n, tl;

	memset(&p, 0, sizeof(p));
	tt_int_op(tmp_setup(BASE), ==, 0);
	perms_from(&p, "%T/ws");
	n = (size_t)snprintf(target, sizeof(target), "%s/ws", T);
	while (n + 10 < sizeof(target))
		n += (size_t)snprintf(target + n, sizeof(target) - n,
		    "/ddddddd");
	snprintf(link, sizeof(link), "%s/ws/l", T);
	tt_int_op(symlink(target, link), ==, 0);
	tl = (size_t)snprintf(s, sizeof(s), "%s/ws/l", T);
	while (tl + 10 < 3000)
		tl += (size_t)snprintf(s + tl, sizeof(s) - tl, "/eeeeeee");
	tt_int_op(perm_check_path(&p, W, s, &res), ==, DENY);
	tt_assert(strstr(res.reason, "too long once symbolic links are "
	    "resolved") != NULL);
end:
	perms_free(&p);
	tmp_free();
}

static int
read_all(int fd, char *buf, size_t len)
{
	ssize_t r = read(fd, buf, len - 1);

	if (r < 0)
		return -1;
	buf[r] = '\0';
	return 0;
}

/*
 * perm_open: the check-then-open race. Each scenario approves a path, then
 * plays the attacker (a link planted or a folder swapped between the check
 * and the open), and expects the open to fail rather than follow.
 */
static void
t_open_race(void)
{
	struct cfg_perms p;
	struct perm_result res;
	char path[PATH_MAX], path2[PATH_MAX], buf[64];
	struct stat st;
	int fd = -1;

	memset(&p, 0, sizeof(p));
	tt_int_op(tmp_setup(BASE ";d:ws/box;f:ws/box/f"), ==, 0);
	perms_from(&p, "%T/ws,%T/ws/box");

	/* A plain read through the approved path. */
	snprintf(path, sizeof(path), "%s/ws/sub/b", T);
	tt_int_op(perm_check_path(&p, R, path, &res), ==, ALLOW);
	fd = perm_open(&p, R, res.resolved, O_RDONLY, 0);
	tt_assert(fd >= 0);
	tt_int_op(read_all(fd, buf, sizeof(buf)), ==, 0);
	tt_str_op(buf, ==, "content\n");
	close(fd);
	fd = -1;

	/* The grant root itself opens as a directory. */
	snprintf(path, sizeof(path), "%s/ws", T);
	fd = perm_open(&p, R, path, O_RDONLY | O_DIRECTORY, 0);
	tt_assert(fd >= 0);
	close(fd);
	fd = -1;

	/* ws/sub swapped for a link to out after the check. */
	snprintf(path, sizeof(path), "%s/ws/sub/s", T);
	tt_int_op(perm_check_path(&p, R, path, &res), ==, ALLOW);
	snprintf(path, sizeof(path), "%s/ws/sub", T);
	snprintf(path2, sizeof(path2), "%s/ws/sub.old", T);
	tt_int_op(rename(path, path2), ==, 0);
	snprintf(path2, sizeof(path2), "%s/out", T);
	tt_int_op(symlink(path2, path), ==, 0);
	fd = perm_open(&p, R, res.resolved, O_RDONLY, 0);
	tt_int_op(fd, ==, -1);
	tt_assert(errno == ELOOP || errno == ENOTDIR || errno == EXDEV);

	/* A link planted where an approved new file was to be created. */
	snprintf(path, sizeof(path), "%s/ws/new", T);
	tt_int_op(perm_check_path(&p, W, path, &res), ==, ALLOW);
	snprintf(path2, sizeof(path2), "%s/out/planted", T);
	tt_int_op(symlink(path2, path), ==, 0);
	fd = perm_open(&p, W, res.resolved, O_WRONLY | O_CREAT | O_TRUNC,
	    0600);
	tt_int_op(fd, ==, -1);
	tt_int_op(errno, ==, ELOOP);
	tt_int_op(lstat(path2, &st), ==, -1);

	/* A granted root swapped for a link: ws/box -> out. */
	snprintf(path, sizeof(path), "%s/ws/box/f", T);
	tt_int_op(perm_check_path(&p, R, path, &res), ==, ALLOW);
	snprintf(path, sizeof(path), "%s/ws/box", T);
	snprintf(path2, sizeof(path2), "%s/ws/box.old", T);
	tt_int_op(rename(path, path2), ==, 0);
	snprintf(path2, sizeof(path2), "%s/out", T);
	tt_int_op(symlink(path2, path), ==, 0);
	snprintf(path2, sizeof(path2), "%s/out/f", T);
	tt_int_op(symlink("s", path2), ==, 0);
	fd = perm_open(&p, R, res.resolved, O_RDONLY, 0);
	tt_int_op(fd, ==, -1);
end:
	if (fd >= 0)
		close(fd);
	perms_free(&p);
	tmp_free();
}

static void
t_open_rules(void)
{
	struct cfg_perms p;
	struct perm_result res;
	char path[PATH_MAX];
	struct stat st;
	int fd = -1;

	memset(&p, 0, sizeof(p));
	tt_int_op(tmp_setup(BASE ";d:wsl-real;l:wsl=wsl-real"), ==, 0);
	perms_from(&p, "%T/ws,%T/wsl");

	/* Creating a new file, exclusively. */
	snprintf(path, sizeof(path), "%s/ws/created", T);
	tt_int_op(perm_check_path(&p, W, path, &res), ==, ALLOW);
	fd = perm_open(&p, W, res.resolved, O_WRONLY | O_CREAT | O_EXCL,
	    0600);
	tt_assert(fd >= 0);
	close(fd);
	fd = -1;
	tt_int_op(lstat(path, &st), ==, 0);
	tt_assert(S_ISREG(st.st_mode));

	/* Beneath a grant that is itself a symlink. */
	snprintf(path, sizeof(path), "%s/wsl/x", T);
	tt_int_op(perm_check_path(&p, W, path, &res), ==, ALLOW);
	fd = perm_open(&p, W, res.resolved, O_WRONLY | O_CREAT | O_EXCL,
	    0600);
	tt_assert(fd >= 0);
	close(fd);
	fd = -1;

	/* Outside every grant, not normalized, write flags on read. */
	tt_int_op(perm_open(&p, R, "/etc/passwd", O_RDONLY, 0), ==, -1);
	tt_int_op(errno, ==, EACCES);
	snprintf(path, sizeof(path), "%s/ws/../out/s", T);
	tt_int_op(perm_open(&p, R, path, O_RDONLY, 0), ==, -1);
	tt_int_op(errno, ==, EINVAL);
	tt_int_op(perm_open(&p, R, "ws/a", O_RDONLY, 0), ==, -1);
	tt_int_op(errno, ==, EINVAL);
	snprintf(path, sizeof(path), "%s/ws/a", T);
	tt_int_op(perm_open(&p, R, path, O_WRONLY, 0), ==, -1);
	tt_int_op(errno, ==, EACCES);
	tt_int_op(perm_open(&p, R, path, O_RDONLY | O_TRUNC, 0), ==, -1);
	tt_int_op(errno, ==, EACCES);
	tt_int_op(perm_open(&p, PERM_NET, path, O_RDONLY, 0), ==, -1);
	tt_int_op(errno, ==, EINVAL);
	/* A missing file is ENOENT, not a permission error. */
	snprintf(path, sizeof(path), "%s/ws/nothere", T);
	tt_int_op(perm_open(&p, R, path, O_RDONLY, 0), ==, -1);
	tt_int_op(errno, ==, ENOENT);
end:
	if (fd >= 0)
		close(fd);
	perms_free(&p);
	tmp_free();
}

static const struct tt_case path_cases[] = {
#define X(name, setup, grants, axis, in, expect, want)			\
	{ "path/" #name, t_##name },
	PATH_CASES(X)
#undef X
	{ "path/too_long", t_too_long },
	{ "path/component_too_long", t_component_too_long },
	{ "path/too_long_after_links", t_too_long_after_links },
	{ "open/race", t_open_race },
	{ "open/rules", t_open_rules },
	{ NULL, NULL }
};

/* Make openat2 fail with ENOSYS, as some container seccomp profiles do. */
static int
block_openat2(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { (unsigned short)nitems(f), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* Every case again in a child where openat2 is unavailable: the fallbacks
 * (the walk with readlink, the O_NOFOLLOW walk) must decide the same. */
static void
t_without_openat2(void)
{
	int status = -1;
	pid_t pid;

	fflush(stdout);
	if ((pid = fork()) == 0) {
		int failed = 0;

		if (block_openat2() == -1)
			_exit(99);
		for (const struct tt_case *c = path_cases; c->name; c++) {
			tt_failed_now = 0;
			c->fn();
			if (tt_failed_now) {
				printf("FAIL (without openat2) %s\n", c->name);
				failed++;
			}
		}
		fflush(stdout);
		_exit(failed ? 1 : 0);
	}
	tt_assert(pid > 0);
	tt_int_op(waitpid(pid, &status, 0), ==, pid);
	tt_assert(WIFEXITED(status));
	tt_int_op(WEXITSTATUS(status), ==, 0);
end:
	;
}

int
main(int argc, char **argv)
{
	struct tt_case all[nitems(path_cases) + 1];
	size_t n = 0;

	for (; path_cases[n].name != NULL; n++)
		all[n] = path_cases[n];
	all[n].name = "fallback/without_openat2";
	all[n].fn = t_without_openat2;
	all[n + 1].name = NULL;
	all[n + 1].fn = NULL;
	return tt_main(argc, argv, all);
}
