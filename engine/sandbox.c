/* The OS sandbox: a plan computed from the config, its description for
 * `af flags`, and its application (Landlock, then seccomp). See sandbox.h. */
#include "sandbox.h"
#include "perm.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sched.h>
#include <netdb.h>
#include <netinet/in.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "landlock_compat.h"

#define SB_EXEC_PATH	PERM_RUN_PATH
#define SB_INTERP_DEPTH	4	/* script -> env -> interpreter -> ld.so */
#define SB_PIN_MAX	256	/* pinned addresses */

/*
 * What af itself reads, besides the config. Nothing else of the system is
 * readable: notably not /etc/shadow, /root, /home, /proc or /sys. /proc is
 * left out on purpose: a rule on /proc/self is resolved when it is added, so
 * it would hand af's own /proc/PID (environ, mem, fd) to every subprocess; af
 * needs nothing there once it runs (glibc falls back without /proc/self/maps
 * and /sys for what it uses, stat and readlink are not Landlock rights).
 * Entries absent on this system are left out of the plan.
 */
static const struct {
	const char	*path;
	const char	*why;
} sys_read[] = {
	{ "/usr/lib", "shared libraries" },
	{ "/lib", "shared libraries" },
	{ "/lib64", "shared libraries" },
	{ "/usr/lib64", "shared libraries" },
	{ "/etc/ld.so.cache", "shared libraries" },
	{ "/etc/ssl", "CA certificates" },
	{ "/usr/share/ca-certificates", "CA certificates" },
	{ "/etc/ca-certificates", "CA certificates" },
	{ "/etc/gnutls", "GnuTLS configuration" },
	{ "/etc/resolv.conf", "resolver" },
	{ "/etc/hosts", "resolver" },
	{ "/etc/nsswitch.conf", "name service" },
	{ "/etc/gai.conf", "resolver" },
	{ "/etc/host.conf", "resolver" },
	{ "/etc/services", "name service" },
	{ "/etc/protocols", "name service" },
	{ "/dev/urandom", "randomness" },
	{ "/usr/share/zoneinfo", "time zones" },
	{ "/etc/localtime", "time zones" },
};

/*
 * What subprocesses need besides the above: their own user and group entries
 * (ssh, git and many others stop when getpwuid fails; these files hold no
 * password hashes, which are in /etc/shadow). bash itself and each granted
 * executable are added one by one, with their interpreters; no folder of
 * executables is opened wholesale.
 */
static const char *const child_read[] = { "/etc/passwd", "/etc/group" };

/*
 * System calls an agent never needs. Each returns EPERM. The list is by name
 * so it reads like the policy; names this architecture lacks are skipped.
 */
static const char *const deny_syscalls[] = {
	"acct", "add_key", "adjtimex", "bpf", "chroot", "clock_adjtime",
	"clock_settime", "delete_module", "fanotify_init", "finit_module",
	"fsconfig", "fsmount", "fsopen", "fspick", "init_module", "io_uring_enter",
	"io_uring_register", "io_uring_setup", "ioperm", "iopl", "kexec_file_load",
	"kexec_load", "keyctl", "lookup_dcookie", "migrate_pages", "modify_ldt",
	"mount", "mount_setattr", "move_mount", "move_pages", "name_to_handle_at",
	"open_by_handle_at", "open_tree", "perf_event_open", "personality",
	"pidfd_getfd", "pivot_root", "process_madvise", "process_vm_readv",
	"process_vm_writev", "ptrace", "quotactl", "quotactl_fd", "reboot",
	"request_key", "setdomainname", "sethostname", "setns", "settimeofday",
	"swapoff", "swapon", "syslog", "umount2", "unshare", "uselib",
	"userfaultfd", "vhangup",
};

/* clone(2)'s namespace flags; CLONE_NEWTIME exists only for clone3 and
 * unshare, both denied. */
static const scmp_datum_t clone_new[] = {
	CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
	CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
};

/* In hermetic mode nothing is ever started. */
static const char *const hermetic_deny[] = {
	"execve", "execveat", "fork", "vfork",
};

/* The socket pinning: families and the types each may use. */
struct sock_allow {
	int		 family;
	const char	*fname;
	int		 types[2];
	const char	*what;
};
static const struct sock_allow sock_allow[] = {
	{ AF_UNIX, "AF_UNIX", { SOCK_STREAM, SOCK_DGRAM },
	    "SOCK_STREAM SOCK_DGRAM (local IPC)" },
	{ AF_INET, "AF_INET", { SOCK_STREAM, SOCK_DGRAM },
	    "SOCK_STREAM protocol 0|tcp; SOCK_DGRAM protocol 0|udp (resolver)" },
	{ AF_INET6, "AF_INET6", { SOCK_STREAM, SOCK_DGRAM },
	    "SOCK_STREAM protocol 0|tcp; SOCK_DGRAM protocol 0|udp (resolver)" },
};

/* Child domain, prepared by sandbox_apply for sandbox_child_restrict. */
static int child_ruleset = -1;

/* ---- the plan ---- */

static struct sb_rule *
rule_find(struct sb_plan *p, const char *path)
{
	for (size_t i = 0; i < p->nrules; i++)
		if (strcmp(p->rules[i].path, path) == 0)
			return &p->rules[i];
	return NULL;
}

static void
rule_add(struct sb_plan *p, const char *path, unsigned af, unsigned child,
    int from_config, const char *why)
{
	struct sb_rule *r;

	if ((r = rule_find(p, path)) == NULL) {
		p->rules = xreallocarray(p->rules, p->nrules + 1,
		    sizeof(*p->rules));
		r = &p->rules[p->nrules++];
		memset(r, 0, sizeof(*r));
		r->path = xstrdup(path);
		r->why = xstrdup(why);
	}
	r->af |= af;
	r->child |= child;
	r->from_config |= from_config;
}

static int
port_add(int *v, size_t *n, int port, char *err, size_t errlen)
{
	size_t i;

	for (i = 0; i < *n && v[i] < port; i++)
		;
	if (i < *n && v[i] == port)
		return 0;
	if (*n == SB_PORT_MAX) {
		snprintf(err, errlen, "more than %d distinct ports",
		    SB_PORT_MAX);
		return -1;
	}
	memmove(&v[i + 1], &v[i], (*n - i) * sizeof(*v));
	v[i] = port;
	(*n)++;
	return 0;
}

static void
host_add(struct strlist *l, const char *host)
{
	char low[256];
	size_t i;

	for (i = 0; host[i] != '\0' && i < sizeof(low) - 1; i++)
		low[i] = (char)tolower((unsigned char)host[i]);
	low[i] = '\0';
	if (i > 0 && low[i - 1] == '.')
		low[i - 1] = '\0';
	if (!strlist_has(l, low))
		strlist_add(l, low);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
host_is_ip(const char *h)
{
	unsigned char a[16];

	return inet_pton(AF_INET, h, a) == 1 || inet_pton(AF_INET6, h, a) == 1;
}

/*
 * Host and port of a URL as the config stores it (already checked by the
 * loader: scheme http, https, ws or wss). The default port follows the scheme.
 */
static int
url_host_port(const char *url, char *host, size_t hostlen, int *port)
{
	const char *p = strstr(url, "://"), *h, *e, *colon = NULL;
	size_t sl;
	char *end;
	long v;

	if (p == NULL)
		return -1;
	sl = (size_t)(p - url);
	if ((sl == 5 && strncasecmp(url, "https", 5) == 0) ||
	    (sl == 3 && strncasecmp(url, "wss", 3) == 0))
		*port = 443;
	else if ((sl == 4 && strncasecmp(url, "http", 4) == 0) ||
	    (sl == 2 && strncasecmp(url, "ws", 2) == 0))
		*port = 80;
	else
		return -1;
	h = p + 3;
	e = h + strcspn(h, "/?#");
	for (const char *at = h; at < e; at++)	/* userinfo, if any */
		if (*at == '@')
			h = at + 1;
	if (*h == '[') {
		const char *rb = memchr(h, ']', (size_t)(e - h));

		if (rb == NULL)
			return -1;
		snprintf(host, hostlen, "%.*s", (int)(rb - h - 1), h + 1);
		if (rb + 1 < e) {
			if (rb[1] != ':')
				return -1;
			colon = rb + 1;
		}
	} else {
		colon = memchr(h, ':', (size_t)(e - h));
		snprintf(host, hostlen, "%.*s",
		    (int)((colon != NULL ? colon : e) - h), h);
	}
	if (*host == '\0')
		return -1;
	if (colon != NULL && colon + 1 < e) {
		errno = 0;
		v = strtol(colon + 1, &end, 10);
		if (errno != 0 || end != e || v < 1 || v > 65535)
			return -1;
		*port = (int)v;
	}
	return 0;
}

static int
plan_url(struct sb_plan *p, const char *key, const char *url, char *err,
    size_t errlen)
{
	char host[256];
	int port;

	if (url == NULL)
		return 0;
	if (url_host_port(url, host, sizeof(host), &port) == -1) {
		snprintf(err, errlen, "%s: cannot read host and port of \"%s\"",
		    key, url);
		return -1;
	}
	host_add(&p->hosts, host);
	return port_add(p->connect, &p->nconnect, port, err, errlen);
}

static int
exec_ok(const char *cand, char *out, size_t outlen)
{
	struct stat st;
	char *r;

	if ((r = realpath(cand, NULL)) == NULL)
		return -1;
	if (stat(r, &st) == -1 || !S_ISREG(st.st_mode) ||
	    access(r, X_OK) == -1 || strlen(r) >= outlen) {
		free(r);
		return -1;
	}
	memcpy(out, r, strlen(r) + 1);
	free(r);
	return 0;
}

/* Find NAME the way af starts it: a basename in SB_EXEC_PATH, or a path
 * (relative ones from base, the agent folder). */
static int
exec_lookup(const char *name, const char *base, char *out, size_t outlen)
{
	char cand[PATH_MAX], dirs[] = SB_EXEC_PATH, *save = NULL;

	if (*name == '\0')
		return -1;
	if (strchr(name, '/') != NULL) {
		if (*name == '/' || base == NULL)
			snprintf(cand, sizeof(cand), "%s", name);
		else
			snprintf(cand, sizeof(cand), "%s/%s", base, name);
		return exec_ok(cand, out, outlen);
	}
	for (char *d = strtok_r(dirs, ":", &save); d != NULL;
	    d = strtok_r(NULL, ":", &save)) {
		snprintf(cand, sizeof(cand), "%s/%s", d, name);
		if (exec_ok(cand, out, outlen) == 0)
			return 0;
	}
	return -1;
}

/* The ELF interpreter (PT_INTERP) of a 64-bit executable: the kernel opens it
 * for execution, so it needs the execute right as much as the program. */
static int
elf_interp(int fd, char *out, size_t outlen)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;

	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(ph))
		return -1;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff +
		    (Elf64_Off)i * sizeof(ph))) != (ssize_t)sizeof(ph))
			return -1;
		if (ph.p_type != PT_INTERP)
			continue;
		if (ph.p_filesz == 0 || ph.p_filesz >= outlen ||
		    pread(fd, out, ph.p_filesz, (off_t)ph.p_offset) !=
		    (ssize_t)ph.p_filesz)
			return -1;
		out[ph.p_filesz] = '\0';
		return strlen(out) > 0 ? 0 : -1;
	}
	return -1;
}

/* A "#!" line: the interpreter, and for "#!/usr/bin/env NAME" also NAME. */
static int
shebang(int fd, char *interp, size_t ilen, char *arg, size_t alen)
{
	char line[256], *s, *e;
	ssize_t n;

	*interp = *arg = '\0';
	if ((n = pread(fd, line, sizeof(line) - 1, 0)) < 3 ||
	    line[0] != '#' || line[1] != '!')
		return -1;
	line[n] = '\0';
	line[strcspn(line, "\n")] = '\0';
	for (s = line + 2; *s == ' ' || *s == '\t'; s++)
		;
	e = s + strcspn(s, " \t");
	snprintf(interp, ilen, "%.*s", (int)(e - s), s);
	for (s = e; *s == ' ' || *s == '\t'; s++)
		;
	e = s + strcspn(s, " \t");
	snprintf(arg, alen, "%.*s", (int)(e - s), s);
	return *interp == '/' ? 0 : -1;
}

static void
plan_exec(struct sb_plan *p, const char *path, const char *why, int depth)
{
	char interp[PATH_MAX], arg[256], res[PATH_MAX];
	const char *b;
	int fd;

	rule_add(p, path, SB_READ | SB_EXEC, SB_READ | SB_EXEC, 1, why);
	if (depth >= SB_INTERP_DEPTH ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return;
	if (elf_interp(fd, interp, sizeof(interp)) == 0) {
		if (exec_ok(interp, res, sizeof(res)) == 0)
			plan_exec(p, res, "ELF interpreter", depth + 1);
	} else if (shebang(fd, interp, sizeof(interp), arg, sizeof(arg)) == 0 &&
	    exec_ok(interp, res, sizeof(res)) == 0) {
		plan_exec(p, res, "script interpreter", depth + 1);
		b = strrchr(res, '/');
		if (b != NULL && strcmp(b + 1, "env") == 0 && *arg != '\0' &&
		    *arg != '-' && exec_lookup(arg, NULL, res, sizeof(res)) == 0)
			plan_exec(p, res, "script interpreter (env)",
			    depth + 1);
	}
	close(fd);
}

static void
plan_exec_name(struct sb_plan *p, const char *name, const char *base,
    const char *what)
{
	char res[PATH_MAX], why[300];

	if (exec_lookup(name, base, res, sizeof(res)) == -1) {
		snprintf(why, sizeof(why), "%s %s", what, name);
		if (!strlist_has(&p->unresolved, why))
			strlist_add(&p->unresolved, why);
		return;
	}
	snprintf(why, sizeof(why), "%s", what);
	plan_exec(p, res, why, 0);
}

/* Is path beneath (or equal to) dir, by whole components? */
static int
beneath(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (n == 1 && dir[0] == '/')
		return 1;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* The path as the kernel will see it: symlinks resolved where it exists. */
static void
real_or_given(const char *path, char *out, size_t outlen)
{
	char real[PATH_MAX];

	if (realpath(path, real) != NULL)
		snprintf(out, outlen, "%s", real);
	else
		snprintf(out, outlen, "%s", path);
}

/* Landlock grants a folder with everything beneath it and cannot take a
 * subfolder back, so a subprocess rule above the data or secrets folder
 * (an agent folder holding them, a broad read grant) would hand a granted
 * program the secrets and the state database. Refuse such a layout. */
static int
private_exposed(const struct sb_plan *p, const struct cfg *c, char *err,
    size_t errlen)
{
	const char *const pv[] = { c->data_dir, c->secrets_dir };
	static const char *const pn[] = { "data", "secrets" };
	char priv[PATH_MAX], rule[PATH_MAX];

	for (size_t i = 0; i < nitems(pv); i++) {
		if (pv[i] == NULL)
			continue;
		real_or_given(pv[i], priv, sizeof(priv));
		for (size_t j = 0; j < p->nrules; j++) {
			const struct sb_rule *r = &p->rules[j];

			if (r->child == 0)
				continue;
			real_or_given(r->path, rule, sizeof(rule));
			if (!beneath(priv, rule))
				continue;
			snprintf(err, errlen, "the %s folder %s lies inside %s "
			    "(%s), which subprocesses may read; move it out, "
			    "or the granted programs could read it", pn[i],
			    pv[i], r->path, r->why);
			return -1;
		}
	}
	return 0;
}

static int
landlock_abi(void)
{
	long v = syscall(__NR_landlock_create_ruleset, NULL, 0,
	    LANDLOCK_CREATE_RULESET_VERSION);

	return v < 0 ? 0 : (int)v;
}

int
sandbox_plan(const struct cfg *c, struct sb_plan *p, char *err, size_t errlen)
{
	const char *const fv[] = { c->dir, c->data_dir, c->skills_dir,
	    c->secrets_dir };
	static const char *const fn[] = { "agent", "data", "skills",
	    "secrets" };
	char *dup, *slash;
	int sub = 0, stdio = 0;

	memset(p, 0, sizeof(*p));
	p->strict = c->sandbox_strict;
	p->kernel_abi = landlock_abi();
	cfg_hermetic_reasons(c, &p->reasons);
	if (c->perm.run.n > 0)
		sub = 1;
	for (size_t i = 0; i < c->nmcp; i++)
		if (c->mcp[i].command.n > 0)
			stdio = 1;
	sub |= stdio;
	p->subprocesses = sub;
	p->hermetic = p->reasons.n == 0 && !sub;

	/* A folder that is "/" would open the whole file system: the agent
	 * file belongs in a folder of its own (/agent in the image). */
	for (size_t i = 0; i < nitems(fv); i++)
		if (fv[i] != NULL && strcmp(fv[i], "/") == 0) {
			snprintf(err, errlen, "the %s folder is /, which would "
			    "open the whole file system to the sandbox; use a "
			    "folder of its own", fn[i]);
			return -1;
		}

	/* The folders af works with. Subprocesses get the agent folder only
	 * when a stdio MCP server starts from it, and never see the data
	 * folder (the state database and the audit trail), the secrets or
	 * the skills. */
	if (c->dir != NULL)
		rule_add(p, c->dir, SB_READ, stdio ? SB_READ : 0, 1,
		    "agent folder");
	if (c->skills_dir != NULL)
		rule_add(p, c->skills_dir, SB_READ, 0, 1, "skills folder");
	if (c->data_dir != NULL)
		rule_add(p, c->data_dir, SB_READ | SB_WRITE, 0, 1,
		    "data folder");
	if (c->secrets_dir != NULL)
		rule_add(p, c->secrets_dir, SB_READ, 0, 1, "secrets folder");
	if (c->audit_path != NULL && (c->data_dir == NULL ||
	    !beneath(c->audit_path, c->data_dir))) {
		dup = xstrdup(c->audit_path);
		if ((slash = strrchr(dup, '/')) != NULL && slash != dup) {
			*slash = '\0';
			rule_add(p, dup, SB_READ | SB_WRITE, 0, 1,
			    "audit.path folder");
		}
		free(dup);
	}
	if (c->trig.imap.enabled && c->trig.imap.ca_file != NULL)
		rule_add(p, c->trig.imap.ca_file, SB_READ, 0, 1,
		    "triggers.imap.ca_file");
	if (c->trig.imap.enabled && c->trig.imap.smtp.enabled &&
	    c->trig.imap.smtp.ca_file != NULL)
		rule_add(p, c->trig.imap.smtp.ca_file, SB_READ, 0, 1,
		    "triggers.imap.smtp.ca_file");
	for (size_t i = 0; i < c->perm.read.n; i++)
		rule_add(p, c->perm.read.v[i], SB_READ, SB_READ, 1,
		    "permissions.read");
	for (size_t i = 0; i < c->perm.write.n; i++)
		rule_add(p, c->perm.write.v[i], SB_WRITE, SB_WRITE, 1,
		    "permissions.write");

	/* What the process needs of the system. */
	for (size_t i = 0; i < nitems(sys_read); i++)
		if (access(sys_read[i].path, F_OK) == 0)
			rule_add(p, sys_read[i].path, SB_READ,
			    sub ? SB_READ : 0, 0, sys_read[i].why);
	rule_add(p, "/dev/null", SB_READ | SB_WRITE,
	    sub ? SB_READ | SB_WRITE : 0, 0, "null device");

	/* Executables: bash and the granted ones, nothing else. */
	if (sub) {
		for (size_t i = 0; i < nitems(child_read); i++)
			if (access(child_read[i], F_OK) == 0)
				rule_add(p, child_read[i], SB_READ, SB_READ, 0,
				    "user and group names");
		plan_exec_name(p, "bash", NULL, "run_bash shell");
		for (size_t i = 0; i < c->perm.run.n; i++)
			plan_exec_name(p, c->perm.run.v[i], NULL,
			    "permissions.run");
		for (size_t i = 0; i < c->nmcp; i++)
			if (c->mcp[i].command.n > 0)
				plan_exec_name(p, c->mcp[i].command.v[0],
				    c->dir, "tools.mcp command");
		for (size_t i = 0; i < p->nrules; i++)
			if ((p->rules[i].af & SB_EXEC) &&
			    strncmp(p->rules[i].path, "/usr/local/", 11) == 0) {
				rule_add(p, "/usr/local/lib", SB_READ, SB_READ,
				    0, "shared libraries");
				break;
			}
	}

	if (sub && private_exposed(p, c, err, errlen) == -1)
		return -1;

	/* Network: the ports of every URL and host the config names. */
	if (plan_url(p, "model.base_url", c->model.base_url, err, errlen) ==
	    -1)
		return -1;
	for (size_t i = 0; i < c->nfallbacks; i++)
		if (plan_url(p, "model.fallbacks base_url",
		    c->fallbacks[i].base_url, err, errlen) == -1)
			return -1;
	if (c->trig.telegram.enabled && plan_url(p, "triggers.telegram."
	    "api_base", c->trig.telegram.api_base, err, errlen) == -1)
		return -1;
	if (c->trig.discord.enabled && (plan_url(p, "triggers.discord.api_base",
	    c->trig.discord.api_base, err, errlen) == -1 ||
	    plan_url(p, "triggers.discord.gateway", c->trig.discord.gateway,
	    err, errlen) == -1))
		return -1;
	for (size_t i = 0; i < c->nmcp; i++)
		if (c->mcp[i].url != NULL && plan_url(p, "tools.mcp url",
		    c->mcp[i].url, err, errlen) == -1)
			return -1;
	if (c->trig.imap.enabled && c->trig.imap.host != NULL) {
		host_add(&p->hosts, c->trig.imap.host);
		if (port_add(p->connect, &p->nconnect, (int)(c->trig.imap.port ?
		    c->trig.imap.port : 993), err, errlen) == -1)
			return -1;
		if (c->trig.imap.smtp.enabled &&
		    c->trig.imap.smtp.host != NULL) {
			host_add(&p->hosts, c->trig.imap.smtp.host);
			if (port_add(p->connect, &p->nconnect,
			    (int)(c->trig.imap.smtp.port ?
			    c->trig.imap.smtp.port : 465), err, errlen) == -1)
				return -1;
		}
	}
	/* Net grants name hosts, not ports: http_request speaks http and
	 * https on their default ports. */
	if (c->perm.net.n > 0) {
		for (size_t i = 0; i < c->perm.net.n; i++) {
			if (strncmp(c->perm.net.v[i], "*.", 2) == 0)
				host_add(&p->unpinnable, c->perm.net.v[i]);
			host_add(&p->hosts, c->perm.net.v[i]);
		}
		if (port_add(p->connect, &p->nconnect, 80, err, errlen) == -1 ||
		    port_add(p->connect, &p->nconnect, 443, err, errlen) == -1)
			return -1;
	}
	/* The resolver falls back to TCP for long answers. */
	for (size_t i = 0; i < p->hosts.n; i++)
		if (!host_is_ip(p->hosts.v[i]) &&
		    !cfg_host_is_loopback(p->hosts.v[i])) {
			if (port_add(p->connect, &p->nconnect, 53, err,
			    errlen) == -1)
				return -1;
			break;
		}
	if (c->trig.webhook.enabled && c->trig.webhook.listen.host != NULL &&
	    port_add(p->bind, &p->nbind, c->trig.webhook.listen.port, err,
	    errlen) == -1)
		return -1;
	if (c->trig.github.enabled && c->trig.github.listen.host != NULL &&
	    port_add(p->bind, &p->nbind, c->trig.github.listen.port, err,
	    errlen) == -1)
		return -1;
	if (port_add(p->bind, &p->nbind, c->status_listen.host != NULL ?
	    c->status_listen.port : 9090, err, errlen) == -1)
		return -1;

	if (p->hosts.n > 1)
		qsort(p->hosts.v, p->hosts.n, sizeof(*p->hosts.v), cmp_str);
	if (p->unpinnable.n > 1)
		qsort(p->unpinnable.v, p->unpinnable.n, sizeof(char *),
		    cmp_str);
	return 0;
}

void
sandbox_plan_free(struct sb_plan *p)
{
	for (size_t i = 0; i < p->nrules; i++) {
		free(p->rules[i].path);
		free(p->rules[i].why);
	}
	free(p->rules);
	strlist_free(&p->hosts);
	strlist_free(&p->unpinnable);
	strlist_free(&p->unresolved);
	strlist_free(&p->reasons);
	memset(p, 0, sizeof(*p));
}

/* ---- the description ---- */

static const char *const class_names[] = { "read", "write", "execute" };
static const char *const class_rights[] = {
	"read_file,read_dir",
	"write_file,truncate,make_reg,make_dir,remove_file,remove_dir,refer,"
	    "read_dir",
	"execute",
};

static const char *const residuals[] = {
	"udp: AF_INET/AF_INET6 SOCK_DGRAM may reach any address (the resolver "
	    "needs it; Landlock does not see UDP)",
	"tcp: Landlock restricts ports, not addresses; af pins addresses in "
	    "its HTTP client",
	"unix: connecting to a named AF_UNIX socket is not a Landlock right",
};

static void
describe_lines(const struct sb_plan *p, struct strlist *l)
{
	char line[PATH_MAX + 128];

	strlist_add(l, p->hermetic ? "hermetic: yes" : "hermetic: no");
	for (size_t i = 0; i < p->reasons.n; i++) {
		snprintf(line, sizeof(line), "not hermetic: %s",
		    p->reasons.v[i]);
		strlist_add(l, line);
	}
	strlist_add(l, p->strict ? "sandbox: strict" : "sandbox: default");
	snprintf(line, sizeof(line), "landlock kernel-abi %d", p->kernel_abi);
	strlist_add(l, line);
	for (size_t k = 0; k < nitems(class_names); k++) {
		snprintf(line, sizeof(line), "landlock rights %s = %s",
		    class_names[k], class_rights[k]);
		strlist_add(l, line);
	}
	for (size_t i = 0; i < p->nrules; i++)
		for (size_t k = 0; k < nitems(class_names); k++) {
			if (p->rules[i].af & (1U << k)) {
				snprintf(line, sizeof(line), "landlock %s %s",
				    class_names[k], p->rules[i].path);
				strlist_add(l, line);
			}
			if (p->subprocesses && (p->rules[i].child & (1U << k))) {
				snprintf(line, sizeof(line), "landlock "
				    "subprocess %s %s", class_names[k],
				    p->rules[i].path);
				strlist_add(l, line);
			}
		}
	if (!p->subprocesses)
		strlist_add(l, "landlock execute (none)");
	else
		strlist_add(l, "landlock subprocess net bind (none)");
	for (size_t i = 0; i < p->unresolved.n; i++) {
		snprintf(line, sizeof(line), "landlock execute not found: %s "
		    "(looked in " SB_EXEC_PATH ")", p->unresolved.v[i]);
		strlist_add(l, line);
	}
	for (size_t i = 0; i < p->nconnect; i++) {
		snprintf(line, sizeof(line), "landlock net connect tcp %d",
		    p->connect[i]);
		strlist_add(l, line);
	}
	for (size_t i = 0; i < p->nbind; i++) {
		snprintf(line, sizeof(line), "landlock net bind tcp %d",
		    p->bind[i]);
		strlist_add(l, line);
	}
	strlist_add(l, "landlock scope abstract-unix-socket");
	strlist_add(l, "landlock scope signal");
	for (size_t i = 0; i < nitems(deny_syscalls); i++) {
		snprintf(line, sizeof(line), "seccomp deny %s EPERM",
		    deny_syscalls[i]);
		strlist_add(l, line);
	}
	strlist_add(l, "seccomp deny ioctl TIOCSTI EPERM");
	strlist_add(l, "seccomp deny clone with CLONE_NEW* EPERM");
	strlist_add(l, "seccomp deny clone3 ENOSYS");
	if (p->hermetic) {
		for (size_t i = 0; i < nitems(hermetic_deny); i++) {
			snprintf(line, sizeof(line), "seccomp deny %s EPERM",
			    hermetic_deny[i]);
			strlist_add(l, line);
		}
		strlist_add(l, "seccomp deny clone without CLONE_THREAD EPERM");
	}
	for (size_t i = 0; i < nitems(sock_allow); i++) {
		snprintf(line, sizeof(line), "seccomp socket allow %s %s",
		    sock_allow[i].fname, sock_allow[i].what);
		strlist_add(l, line);
	}
	strlist_add(l, "seccomp socket deny other families EAFNOSUPPORT");
	strlist_add(l, "seccomp socket deny other types and protocols EPERM");
	strlist_add(l, "seccomp socketpair allow AF_UNIX only");
	strlist_add(l, "seccomp other architectures kill");
	for (size_t i = 0; i < nitems(residuals); i++) {
		snprintf(line, sizeof(line), "residual %s", residuals[i]);
		strlist_add(l, line);
	}
	for (size_t i = 0; i < p->hosts.n; i++) {
		snprintf(line, sizeof(line), "hosts allow %s", p->hosts.v[i]);
		strlist_add(l, line);
	}
	for (size_t i = 0; i < p->unpinnable.n; i++) {
		snprintf(line, sizeof(line), "hosts unpinned %s (a wildcard "
		    "cannot be resolved in advance)", p->unpinnable.v[i]);
		strlist_add(l, line);
	}
	qsort(l->v, l->n, sizeof(*l->v), cmp_str);
}

static cJSON *
json_strs(const struct strlist *l)
{
	cJSON *a = cJSON_CreateArray();

	for (size_t i = 0; i < l->n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(l->v[i]));
	return a;
}

static cJSON *
json_ports(const int *v, size_t n)
{
	cJSON *a = cJSON_CreateArray();

	for (size_t i = 0; i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
	return a;
}

static cJSON *
json_rules(const struct sb_plan *p, int child)
{
	cJSON *o = cJSON_CreateObject(), *arr[3], *r;
	unsigned acc;

	for (size_t k = 0; k < nitems(class_names); k++)
		arr[k] = cJSON_AddArrayToObject(o, class_names[k]);
	for (size_t i = 0; i < p->nrules; i++) {
		acc = child ? p->rules[i].child : p->rules[i].af;
		for (size_t k = 0; k < nitems(class_names); k++) {
			if (!(acc & (1U << k)))
				continue;
			r = cJSON_CreateObject();
			cJSON_AddStringToObject(r, "path", p->rules[i].path);
			cJSON_AddStringToObject(r, "why", p->rules[i].why);
			cJSON_AddItemToArray(arr[k], r);
		}
	}
	return o;
}

static void
describe_json(const struct sb_plan *p, struct buf *out)
{
	cJSON *root = cJSON_CreateObject(), *ll, *net, *sc, *a, *h, *rights;
	char *s;

	cJSON_AddBoolToObject(root, "hermetic", p->hermetic);
	cJSON_AddItemToObject(root, "not_hermetic", json_strs(&p->reasons));
	cJSON_AddBoolToObject(root, "strict", p->strict);
	cJSON_AddBoolToObject(root, "subprocesses", p->subprocesses);

	ll = cJSON_AddObjectToObject(root, "landlock");
	cJSON_AddNumberToObject(ll, "kernel_abi", p->kernel_abi);
	rights = cJSON_AddObjectToObject(ll, "rights");
	for (size_t k = 0; k < nitems(class_names); k++)
		cJSON_AddStringToObject(rights, class_names[k],
		    class_rights[k]);
	cJSON_AddItemToObject(ll, "af", json_rules(p, 0));
	if (p->subprocesses)
		cJSON_AddItemToObject(ll, "subprocess", json_rules(p, 1));
	cJSON_AddItemToObject(ll, "not_found", json_strs(&p->unresolved));
	net = cJSON_AddObjectToObject(ll, "net");
	cJSON_AddItemToObject(net, "connect_tcp",
	    json_ports(p->connect, p->nconnect));
	cJSON_AddItemToObject(net, "bind_tcp", json_ports(p->bind, p->nbind));
	a = cJSON_AddArrayToObject(ll, "scopes");
	cJSON_AddItemToArray(a, cJSON_CreateString("abstract-unix-socket"));
	cJSON_AddItemToArray(a, cJSON_CreateString("signal"));

	sc = cJSON_AddObjectToObject(root, "seccomp");
	a = cJSON_AddArrayToObject(sc, "deny_eperm");
	for (size_t i = 0; i < nitems(deny_syscalls); i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(deny_syscalls[i]));
	cJSON_AddItemToArray(a, cJSON_CreateString("clone with CLONE_NEW*"));
	if (p->hermetic) {
		for (size_t i = 0; i < nitems(hermetic_deny); i++)
			cJSON_AddItemToArray(a,
			    cJSON_CreateString(hermetic_deny[i]));
		cJSON_AddItemToArray(a, cJSON_CreateString(
		    "clone without CLONE_THREAD"));
	}
	a = cJSON_AddArrayToObject(sc, "deny_enosys");
	cJSON_AddItemToArray(a, cJSON_CreateString("clone3"));
	a = cJSON_AddArrayToObject(sc, "deny_ioctl");
	cJSON_AddItemToArray(a, cJSON_CreateString("TIOCSTI"));
	a = cJSON_AddArrayToObject(sc, "socket_allow");
	for (size_t i = 0; i < nitems(sock_allow); i++) {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "family", sock_allow[i].fname);
		cJSON_AddStringToObject(o, "types", sock_allow[i].what);
		cJSON_AddItemToArray(a, o);
	}
	cJSON_AddStringToObject(sc, "socket_other_family", "EAFNOSUPPORT");
	cJSON_AddStringToObject(sc, "socket_other_type_protocol", "EPERM");
	cJSON_AddStringToObject(sc, "socketpair_allow", "AF_UNIX");
	cJSON_AddStringToObject(sc, "other_architectures", "kill");
	a = cJSON_AddArrayToObject(root, "residual");
	for (size_t i = 0; i < nitems(residuals); i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(residuals[i]));

	h = cJSON_AddObjectToObject(root, "hosts");
	cJSON_AddItemToObject(h, "allow", json_strs(&p->hosts));
	cJSON_AddItemToObject(h, "unpinned", json_strs(&p->unpinnable));

	s = cJSON_PrintUnformatted(root);
	if (s == NULL)
		fatalx("cJSON_PrintUnformatted: out of memory");
	buf_adds(out, s);
	buf_addc(out, '\n');
	free(s);
	cJSON_Delete(root);
}

int
sandbox_describe(const struct sb_plan *p, int json, struct buf *out)
{
	struct strlist l = { NULL, 0 };

	if (json) {
		describe_json(p, out);
		return 0;
	}
	describe_lines(p, &l);
	for (size_t i = 0; i < l.n; i++) {
		buf_adds(out, l.v[i]);
		buf_addc(out, '\n');
	}
	strlist_free(&l);
	return 0;
}

/* ---- applying it ---- */

#define LL_FS_ABI1 (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | \
	LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |	\
	LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |	\
	LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |	\
	LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |	\
	LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |	\
	LANDLOCK_ACCESS_FS_MAKE_SYM)
/* Rights that apply to a file (the rest only make sense on a folder). */
#define LL_FS_FILE (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | \
	LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |	\
	LANDLOCK_ACCESS_FS_IOCTL_DEV)

static __u64
fs_handled(int abi)
{
	__u64 a = LL_FS_ABI1;

	if (abi >= 2)
		a |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		a |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		a |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return a;
}

static __u64
fs_rights(unsigned cls)
{
	__u64 a = 0;

	if (cls & SB_READ)
		a |= LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
	if (cls & SB_WRITE)
		a |= LANDLOCK_ACCESS_FS_WRITE_FILE |
		    LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_MAKE_REG |
		    LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
		    LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REFER |
		    LANDLOCK_ACCESS_FS_READ_DIR;
	if (cls & SB_EXEC)
		a |= LANDLOCK_ACCESS_FS_EXECUTE;
	return a;
}

/* Build one domain's ruleset; child selects the subprocess rules. */
static int
ruleset_build(const struct sb_plan *p, int abi, int child, char *err,
    size_t errlen)
{
	struct af_landlock_ruleset_attr ra;
	struct af_landlock_path_beneath_attr pb;
	struct af_landlock_net_port_attr np;
	struct stat st;
	size_t rsize = sizeof(ra.handled_access_fs);
	__u64 handled = fs_handled(abi);
	unsigned cls;
	int fd, pfd;

	memset(&ra, 0, sizeof(ra));
	ra.handled_access_fs = handled;
	if (abi >= 4) {
		/* Subprocesses never listen; they connect where af may. */
		ra.handled_access_net = child ? LANDLOCK_ACCESS_NET_BIND_TCP :
		    LANDLOCK_ACCESS_NET_BIND_TCP |
		    LANDLOCK_ACCESS_NET_CONNECT_TCP;
		rsize = offsetof(struct af_landlock_ruleset_attr, scoped);
	}
	if (abi >= 6) {
		ra.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET |
		    LANDLOCK_SCOPE_SIGNAL;
		rsize = sizeof(ra);
	}
	fd = (int)syscall(__NR_landlock_create_ruleset, &ra, rsize, 0);
	if (fd == -1) {
		snprintf(err, errlen, "landlock_create_ruleset: %s",
		    strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < p->nrules; i++) {
		const struct sb_rule *r = &p->rules[i];

		cls = child ? r->child : r->af;
		if (cls == 0)
			continue;
		pfd = open(r->path, O_PATH | O_CLOEXEC);
		if (pfd == -1) {
			if (r->from_config && !child)
				log_warnx("sandbox: %s %s: %s (no rule added)",
				    r->why, r->path, strerror(errno));
			else
				log_debug("sandbox: %s %s: %s (skipped)",
				    r->why, r->path, strerror(errno));
			continue;
		}
		memset(&pb, 0, sizeof(pb));
		pb.allowed_access = fs_rights(cls) & handled;
		if (fstat(pfd, &st) == 0 && !S_ISDIR(st.st_mode))
			pb.allowed_access &= LL_FS_FILE;
		pb.parent_fd = pfd;
		if (pb.allowed_access != 0 &&
		    syscall(__NR_landlock_add_rule, fd,
		    AF_LANDLOCK_RULE_PATH_BENEATH, &pb, 0) == -1) {
			snprintf(err, errlen, "landlock_add_rule %s: %s",
			    r->path, strerror(errno));
			close(pfd);
			close(fd);
			return -1;
		}
		close(pfd);
	}
	if (abi >= 4 && !child) {
		for (size_t i = 0; i < p->nconnect + p->nbind; i++) {
			int bind = i >= p->nconnect;

			memset(&np, 0, sizeof(np));
			np.port = (__u64)(bind ? p->bind[i - p->nconnect] :
			    p->connect[i]);
			np.allowed_access = bind ?
			    LANDLOCK_ACCESS_NET_BIND_TCP :
			    LANDLOCK_ACCESS_NET_CONNECT_TCP;
			if (syscall(__NR_landlock_add_rule, fd,
			    AF_LANDLOCK_RULE_NET_PORT, &np, 0) == -1) {
				snprintf(err, errlen, "landlock_add_rule tcp "
				    "port %llu: %s", (unsigned long long)np.port,
				    strerror(errno));
				close(fd);
				return -1;
			}
		}
	}
	return fd;
}

/* Say, or refuse under sandbox: strict, what this kernel cannot hold. */
static int
degrade(const struct sb_plan *p, const char *what, char *err, size_t errlen)
{
	if (p->strict) {
		snprintf(err, errlen, "sandbox: strict: %s", what);
		return -1;
	}
	log_warnx("sandbox: %s; running with less isolation (set "
	    "`sandbox: strict` to refuse instead)", what);
	return 0;
}

int
sandbox_check_kernel(const struct sb_plan *p, int abi, char *err,
    size_t errlen)
{
	char what[160];

	if (abi < 1)
		return degrade(p, "this kernel has no Landlock: the file system "
		    "and TCP rules are not enforced", err, errlen);
	if (abi < 3) {
		snprintf(what, sizeof(what), "Landlock ABI %d < 3: truncate() "
		    "is not restricted", abi);
		if (degrade(p, what, err, errlen) == -1)
			return -1;
	}
	if (abi < 4 && degrade(p, "Landlock ABI < 4: TCP connect and bind "
	    "rules are not enforced", err, errlen) == -1)
		return -1;
	if (abi < 6)
		log_warnx("sandbox: Landlock ABI %d < 6: abstract unix sockets "
		    "and signals are not scoped", abi);
	return 0;
}

static int
landlock_apply(const struct sb_plan *p, char *err, size_t errlen)
{
	int abi = landlock_abi(), fd;

	if (sandbox_check_kernel(p, abi, err, errlen) == -1)
		return -1;
	if (abi < 1)
		return 0;
	if (p->subprocesses) {
		if ((fd = ruleset_build(p, abi, 1, err, errlen)) == -1)
			return -1;
		if (child_ruleset != -1)
			close(child_ruleset);
		child_ruleset = fd;
	}
	if ((fd = ruleset_build(p, abi, 0, err, errlen)) == -1)
		return -1;
	if (syscall(__NR_landlock_restrict_self, fd, 0) == -1) {
		snprintf(err, errlen, "landlock_restrict_self: %s",
		    strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	log_debug("sandbox: Landlock ABI %d applied", abi);
	return 0;
}

static int
rule(scmp_filter_ctx ctx, uint32_t action, const char *name,
    unsigned n, const struct scmp_arg_cmp *cmp)
{
	int nr = seccomp_syscall_resolve_name(name), rc;

	if (nr == __NR_SCMP_ERROR) {
		log_debug("sandbox: no system call %s here", name);
		return 0;
	}
	rc = seccomp_rule_add_array(ctx, action, nr, n, cmp);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	return 0;
}

/*
 * socket(): everything but the allowed families, types and protocols is
 * refused. libseccomp cannot say "allow these, refuse the rest" for one call
 * under an allowing default, so the refusals are spelled out: the family
 * (64-bit compares: a value with high bits set is "greater", so refused), the
 * type in its low four bits (the flags SOCK_NONBLOCK and SOCK_CLOEXEC are
 * free; the kernel refuses other bits itself), and the protocol.
 */
static int
socket_rules(scmp_filter_ctx ctx)
{
	uint32_t eaf = SCMP_ACT_ERRNO(EAFNOSUPPORT), eperm = SCMP_ACT_ERRNO(EPERM);
	struct scmp_arg_cmp c[3];
	int allowed;

	for (int f = 0; f <= AF_INET6; f++) {
		allowed = 0;
		for (size_t i = 0; i < nitems(sock_allow); i++)
			if (sock_allow[i].family == f)
				allowed = 1;
		if (allowed)
			continue;
		c[0] = SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)f);
		if (rule(ctx, eaf, "socket", 1, c) == -1)
			return -1;
	}
	c[0] = SCMP_A0(SCMP_CMP_GT, (scmp_datum_t)AF_INET6);
	if (rule(ctx, eaf, "socket", 1, c) == -1)
		return -1;
	/* socketpair: AF_UNIX only. */
	c[0] = SCMP_A0(SCMP_CMP_NE, (scmp_datum_t)AF_UNIX);
	if (rule(ctx, eaf, "socketpair", 1, c) == -1)
		return -1;

	for (size_t i = 0; i < nitems(sock_allow); i++) {
		const struct sock_allow *s = &sock_allow[i];

		c[0] = SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)s->family);
		for (int t = 0; t < 16; t++) {
			if (t == s->types[0] || t == s->types[1])
				continue;
			c[1] = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf,
			    (scmp_datum_t)t);
			if (rule(ctx, eperm, "socket", 2, c) == -1)
				return -1;
		}
		if (s->family == AF_UNIX)
			continue;
		/* TCP streams only (not MPTCP, SCTP), UDP datagrams only
		 * (not ICMP, UDP-Lite): protocol 0 or the one named. */
		for (int t = 0; t < 2; t++) {
			int want = s->types[t] == SOCK_STREAM ? IPPROTO_TCP :
			    IPPROTO_UDP;

			c[1] = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf,
			    (scmp_datum_t)s->types[t]);
			c[2] = SCMP_A2(SCMP_CMP_GT, (scmp_datum_t)want);
			if (rule(ctx, eperm, "socket", 3, c) == -1)
				return -1;
			for (int pr = 1; pr < want; pr++) {
				c[2] = SCMP_A2(SCMP_CMP_EQ, (scmp_datum_t)pr);
				if (rule(ctx, eperm, "socket", 3, c) == -1)
					return -1;
			}
		}
	}
	return 0;
}

static int
seccomp_apply(const struct sb_plan *p, char *err, size_t errlen)
{
	scmp_filter_ctx ctx;
	struct scmp_arg_cmp c[1];
	uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
	int rc;

	if ((ctx = seccomp_init(SCMP_ACT_ALLOW)) == NULL) {
		snprintf(err, errlen, "seccomp_init failed");
		return -1;
	}
	/* Threads that exist already get the filter too (Landlock cannot do
	 * that, which is why af applies before creating threads). A system
	 * call of another architecture (int 0x80, x32) kills the process. */
	if (seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1) < 0 ||
	    seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
	    SCMP_ACT_KILL_PROCESS) < 0) {
		snprintf(err, errlen, "seccomp_attr_set failed");
		goto fail;
	}
	for (size_t i = 0; i < nitems(deny_syscalls); i++)
		if (rule(ctx, eperm, deny_syscalls[i], 0, NULL) == -1)
			goto fail_rule;
	/* The kernel reads ioctl's request as 32 bits: mask the rest. */
	c[0] = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, TIOCSTI);
	if (rule(ctx, eperm, "ioctl", 1, c) == -1)
		goto fail_rule;
	/* clone3 keeps its flags in memory, out of the filter's reach, so it
	 * says ENOSYS and glibc falls back to clone, whose flags the filter
	 * sees: no new namespace, and in hermetic mode no new process, while
	 * threads (libwebsockets, IMAP workers) still start. */
	if (rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL) == -1)
		goto fail_rule;
	for (size_t i = 0; i < nitems(clone_new); i++) {
		c[0] = SCMP_A0(SCMP_CMP_MASKED_EQ, clone_new[i], clone_new[i]);
		if (rule(ctx, eperm, "clone", 1, c) == -1)
			goto fail_rule;
	}
	if (p->hermetic) {
		for (size_t i = 0; i < nitems(hermetic_deny); i++)
			if (rule(ctx, eperm, hermetic_deny[i], 0, NULL) == -1)
				goto fail_rule;
		c[0] = SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0);
		if (rule(ctx, eperm, "clone", 1, c) == -1)
			goto fail_rule;
	}
	if (socket_rules(ctx) == -1)
		goto fail_rule;
	if ((rc = seccomp_load(ctx)) < 0) {
		snprintf(err, errlen, "seccomp_load: %s", strerror(-rc));
		goto fail;
	}
	seccomp_release(ctx);
	return 0;
fail_rule:
	snprintf(err, errlen, "seccomp rule: %s", strerror(errno));
fail:
	seccomp_release(ctx);
	return -1;
}

/*
 * Threads in this process, from /proc/self/stat (field 20); 0 when /proc
 * cannot say. Landlock binds only the calling thread and the threads it
 * creates afterwards, so a thread that exists before sandbox_apply would run
 * outside the file system and TCP rules.
 */
static long
thread_count(void)
{
	struct buf b;
	const char *s;
	long n = 0;

	buf_init(&b);
	if (read_file_max("/proc/self/stat", 4096, &b) == 0 &&
	    b.data != NULL && (s = strrchr(b.data, ')')) != NULL) {
		/* After ")": state is field 3, num_threads field 20. */
		for (int field = 3; field < 20 && s != NULL; field++)
			s = strchr(s + 1, ' ');
		if (s != NULL)
			n = strtol(s + 1, NULL, 10);
	}
	buf_free(&b);
	return n;
}

int
sandbox_apply(const struct sb_plan *p, char *err, size_t errlen)
{
	char why[256];
	long threads;

	if ((threads = thread_count()) > 1) {
		snprintf(err, errlen, "the sandbox must be applied before any "
		    "thread starts (%ld threads run already)", threads);
		return -1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1) {
		snprintf(err, errlen, "prctl(PR_SET_NO_NEW_PRIVS): %s",
		    strerror(errno));
		return -1;
	}
	if (landlock_apply(p, err, errlen) == -1)
		return -1;
	if (seccomp_apply(p, why, sizeof(why)) == -1) {
		char what[300];

		snprintf(what, sizeof(what), "seccomp filter not loaded (%s)",
		    why);
		if (degrade(p, what, err, errlen) == -1)
			return -1;
	}
	return 0;
}

int
sandbox_child_restrict(void)
{
	if (child_ruleset == -1)
		return 0;
	return syscall(__NR_landlock_restrict_self, child_ruleset, 0) == -1 ?
	    -1 : 0;
}

/* ---- address pinning ---- */

struct pin {
	int		family;
	unsigned char	addr[16];
};

static struct pin pins[SB_PIN_MAX];
static size_t npins;
static size_t nunpinnable;

static void
pin_add(int family, const void *addr)
{
	size_t len;

	if (family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(
	    (const struct in6_addr *)addr)) {
		family = AF_INET;
		addr = (const unsigned char *)addr + 12;
	}
	len = family == AF_INET ? 4 : 16;

	for (size_t i = 0; i < npins; i++)
		if (pins[i].family == family &&
		    memcmp(pins[i].addr, addr, len) == 0)
			return;
	if (npins == SB_PIN_MAX) {
		log_warnx("sandbox: more than %d pinned addresses; the rest "
		    "are not allowed", SB_PIN_MAX);
		return;
	}
	memset(&pins[npins], 0, sizeof(pins[npins]));
	pins[npins].family = family;
	memcpy(pins[npins].addr, addr, len);
	npins++;
}

void
sandbox_pin_clear(void)
{
	npins = 0;
	nunpinnable = 0;
}

int
sandbox_pin_hosts(const struct strlist *hosts, char *err, size_t errlen)
{
	struct addrinfo hints, *res, *ai;
	int rc, ret = 0;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	for (size_t i = 0; i < hosts->n; i++) {
		const char *h = hosts->v[i];

		if (strncmp(h, "*.", 2) == 0) {
			nunpinnable++;
			continue;
		}
		if ((rc = getaddrinfo(h, NULL, &hints, &res)) != 0) {
			if (ret == 0)
				snprintf(err, errlen, "%s does not resolve: %s",
				    h, gai_strerror(rc));
			ret = -1;
			continue;
		}
		for (ai = res; ai != NULL; ai = ai->ai_next) {
			if (ai->ai_family == AF_INET)
				pin_add(AF_INET, &((struct sockaddr_in *)
				    (void *)ai->ai_addr)->sin_addr);
			else if (ai->ai_family == AF_INET6)
				pin_add(AF_INET6, &((struct sockaddr_in6 *)
				    (void *)ai->ai_addr)->sin6_addr);
		}
		freeaddrinfo(res);
	}
	return ret;
}

size_t
sandbox_pin_unpinnable(void)
{
	return nunpinnable;
}

/* An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is its IPv4 address. */
int
sandbox_addr_allowed(const struct sockaddr *sa, socklen_t len)
{
	const unsigned char *a;
	int family;

	if (sa == NULL)
		return 0;
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		family = AF_INET;
		a = (const unsigned char *)&((const struct sockaddr_in *)
		    (const void *)sa)->sin_addr;
	} else if (sa->sa_family == AF_INET6 &&
	    len >= sizeof(struct sockaddr_in6)) {
		const struct in6_addr *a6 = &((const struct sockaddr_in6 *)
		    (const void *)sa)->sin6_addr;

		family = AF_INET6;
		a = (const unsigned char *)a6;
		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			family = AF_INET;
			a += 12;
		}
	} else
		return 0;
	for (size_t i = 0; i < npins; i++)
		if (pins[i].family == family && memcmp(pins[i].addr, a,
		    family == AF_INET ? 4 : 16) == 0)
			return 1;
	return 0;
}
