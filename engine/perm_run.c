/*
 * The run axis. A command line is parsed (shell.c), never trusted: every
 * command it would start, in any list, pipeline, subshell, group or compound
 * body, and every command that a granted wrapper (env, xargs, find -exec,
 * bash -c, ...) would start in turn, must be granted by basename. Redirection
 * targets are file access and go through the path axis. Anything that cannot
 * be decided from the text alone is denied.
 */
#include "perm.h"

#include <sys/stat.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shell.h"

/* The PATH run_bash gives bash; command names are looked up in it. */
#define RUN_MAX_NEST	8	/* bash -c inside eval inside bash -c ... */
#define RUN_WHAT_MAX	64	/* bytes of a word quoted in a reason */

struct runck {
	const struct cfg_perms	*p;
	struct perm_result	*res;
	int			 nest;
};

/* What a wrapper adds to the command it runs. */
struct wctx {
	const char	*taint;		/* replaced at run time ({} of find) */
	int		 appending;	/* xargs appends words read from input */
};

static int check_argv(struct runck *, const struct sh_word *, size_t,
    const struct wctx *);
static int check_script(struct runck *, const char *, size_t, int);

static int
deny(struct runck *rc, const char *what, const char *fmt, ...)
{
	char	q[RUN_WHAT_MAX * 4 + 8], why[256];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	sh_quote(q, sizeof(q), what, strlen(what), RUN_WHAT_MAX);
	rc->res->allowed = 0;
	if (snprintf(rc->res->reason, sizeof(rc->res->reason),
	    "run access to \"%s\" is denied: %s", q, why) < 0)
		rc->res->reason[0] = '\0';
	return -1;
}

static int
deny_grant(struct runck *rc, const char *name)
{
	char q[RUN_WHAT_MAX * 4 + 8];

	sh_quote(q, sizeof(q), name, strlen(name), RUN_WHAT_MAX);
	rc->res->allowed = 0;
	snprintf(rc->res->reason, sizeof(rc->res->reason),
	    "run access to \"%s\" is not in the agent's permissions.run "
	    "allowlist", q);
	return -1;
}

static int
in_list(const char *s, const char *const *list)
{
	for (; *list != NULL; list++)
		if (strcmp(s, *list) == 0)
			return 1;
	return 0;
}

/*
 * Variables that change how bash or the programs it starts find code or
 * configuration: the loader, the shell's own lookup and start-up files,
 * interpreters' module paths, HOME and XDG (every program's configuration,
 * hence git aliases and pagers), helper programs and proxies. Setting one,
 * even for a single command, is denied.
 */
static const char *const bad_vars[] = {
	"PATH", "ENV", "IFS", "SHELLOPTS", "BASHOPTS", "CDPATH", "GLOBIGNORE",
	"EXECIGNORE", "PROMPT_COMMAND", "POSIXLY_CORRECT", "HOME", "SHELL",
	"TMPDIR", "GCONV_PATH", "LOCPATH", "NLSPATH", "TEXTDOMAIN",
	"TEXTDOMAINDIR", "HOSTALIASES", "GLIBC_TUNABLES", "PAGER", "EDITOR",
	"VISUAL", "BROWSER", "MANPAGER", "LESSOPEN", "LESSCLOSE",
	"NODE_OPTIONS", "NODE_PATH", "PYTHONPATH", "PYTHONSTARTUP",
	"PYTHONHOME", "PERL5LIB", "PERL5OPT", "PERLLIB", "RUBYOPT", "RUBYLIB",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE", "GH_PAGER",
	"GH_EDITOR", "GH_BROWSER", "PS0", "PS1", "PS2", "PS3", "PS4", NULL
};
static const char *const bad_prefixes[] = {
	"LD_", "BASH", "GIT_", "XDG_", "MALLOC_", "DYLD_", "SUDO_", NULL
};
/* bash re-reads its locale when these change, and the rest of the command
 * line is then tokenized in it: in a multibyte locale such as Big5 a byte
 * 0x5c can end a character instead of escaping the next one. A prefix
 * assignment (LC_ALL=C grep) only reaches the command, so only assignments
 * to the shell itself are refused. */
static const char *const locale_vars[] = { "LC_ALL", "LC_CTYPE", "LANG",
	"LANGUAGE", NULL };

static int
locale_var(const char *name, size_t n)
{
	char v[32];

	if (n >= sizeof(v))
		return 0;
	memcpy(v, name, n);
	v[n] = '\0';
	return in_list(v, locale_vars);
}
static const char *const bad_suffixes[] = { "_ASKPASS", "_PROXY", NULL };

static int
var_denied(const char *name, size_t n)
{
	char	v[128];
	size_t	i, k;

	if (n == 0 || n >= sizeof(v))
		return 1;
	for (i = 0; i < n; i++)
		v[i] = (name[i] >= 'a' && name[i] <= 'z') ?
		    (char)(name[i] - 'a' + 'A') : name[i];
	v[n] = '\0';
	if (in_list(v, bad_vars))
		return 1;
	for (i = 0; bad_prefixes[i] != NULL; i++)
		if (strncmp(v, bad_prefixes[i], strlen(bad_prefixes[i])) == 0)
			return 1;
	for (i = 0; bad_suffixes[i] != NULL; i++) {
		k = strlen(bad_suffixes[i]);
		if (n >= k && strcmp(v + n - k, bad_suffixes[i]) == 0)
			return 1;
	}
	return 0;
}

/* NAME=value, from a prefix assignment or a wrapper's argument. */
static int
check_assign(struct runck *rc, const char *word)
{
	size_t n = sh_assign_name_len(word);
	char name[128];

	if (n == 0 || (word[n] != '=' && word[n] != '+'))
		return deny(rc, word, "not a valid assignment");
	if (var_denied(word, n)) {
		snprintf(name, sizeof(name), "%.*s", (int)(n < 100 ? n : 100),
		    word);
		return deny(rc, word, "setting %s is not allowed", name);
	}
	return 0;
}

/* A file a command line opens: a redirection target or xargs -a. */
static int
check_file(struct runck *rc, const char *what, const struct sh_word *w,
    enum perm_axis axis)
{
	struct perm_result	sub;
	char			norm[64];
	const char		*t = w->text;
	size_t			i, o;

	if (!sh_word_literal(w))
		return deny(rc, what, "the redirection target is not a literal "
		    "path");
	for (i = o = 0; t[i] != '\0' && o + 1 < sizeof(norm); i++)
		if (t[i] != '/' || o == 0 || norm[o - 1] != '/')
			norm[o++] = t[i];
	norm[o] = '\0';
	if (strncmp(norm, "/dev/tcp/", 9) == 0 ||
	    strncmp(norm, "/dev/udp/", 9) == 0)
		return deny(rc, what, "network redirections are not allowed");
	if (strcmp(t, "/dev/null") == 0 || (axis == PERM_WRITE &&
	    (strcmp(t, "/dev/stdout") == 0 || strcmp(t, "/dev/stderr") == 0)))
		return 0;
	if (t[0] != '/') {
		char q[RUN_WHAT_MAX * 4 + 8];

		sh_quote(q, sizeof(q), t, strlen(t), RUN_WHAT_MAX);
		return deny(rc, what, "redirection target \"%s\" is not an "
		    "absolute path", q);
	}
	if (strlen(t) >= PERM_PATH_MAX)
		return deny(rc, what, "the redirection target is too long");
	memset(&sub, 0, sizeof(sub));
	if (!perm_check_path(rc->p, axis, t, &sub) || !sub.allowed) {
		rc->res->allowed = 0;
		memcpy(rc->res->reason, sub.reason, sizeof(rc->res->reason));
		rc->res->reason[sizeof(rc->res->reason) - 1] = '\0';
		return -1;
	}
	return 0;
}

static int
is_dup_target(const char *t)
{
	size_t n = strspn(t, "0123456789");

	if (strcmp(t, "-") == 0)
		return 1;
	return n > 0 && (t[n] == '\0' || (t[n] == '-' && t[n + 1] == '\0'));
}

static int
check_redir(struct runck *rc, const struct sh_redir *r)
{
	static const char *ops[] = { "<", ">", ">>", ">|", "<>", "&>", "&>>",
	    "<&", ">&", "<<", "<<<" };
	char	what[RUN_WHAT_MAX + 8];
	int	lit = sh_word_literal(&r->target);

	snprintf(what, sizeof(what), "%s%.*s", ops[r->op], RUN_WHAT_MAX,
	    r->target.text);
	switch (r->op) {
	case SH_R_HEREDOC:
	case SH_R_HERESTR:
		return 0;
	case SH_R_DUPIN:
	case SH_R_DUPOUT:
		if (lit && is_dup_target(r->target.text))
			return 0;
		if (r->op == SH_R_DUPIN || !lit)
			return deny(rc, what, "the descriptor to duplicate is "
			    "not a literal number");
		return check_file(rc, what, &r->target, PERM_WRITE);
	case SH_R_IN:
		return check_file(rc, what, &r->target, PERM_READ);
	case SH_R_RDWR:
		if (check_file(rc, what, &r->target, PERM_READ) == -1)
			return -1;
		return check_file(rc, what, &r->target, PERM_WRITE);
	default:
		return check_file(rc, what, &r->target, PERM_WRITE);
	}
}

/* Builtins that only print, test or move around: no grant needed. */
static const char *const harmless[] = {
	":", "true", "false", "echo", "printf", "test", "[", "pwd", "cd", NULL
};

/*
 * A harmless builtin can still assign (printf -v) or evaluate arithmetic on
 * a variable's value (test -v 'a[$(cmd)]' runs cmd): refuse those forms, and
 * any argument whose run-time value could turn into one.
 */
static int
check_test(struct runck *rc, const char *name, const struct sh_word *w,
    size_t n)
{
	size_t	i;
	int	lit = 1;

	if (strcmp(name, "[") == 0 && n > 0)
		n--;	/* the closing ] */
	for (i = 0; i < n; i++) {
		if (sh_word_literal(&w[i])) {
			if (strcmp(w[i].text, "-v") == 0 ||
			    strcmp(w[i].text, "-R") == 0)
				return deny(rc, name, "%s %s is not allowed",
				    name, w[i].text);
			continue;
		}
		lit = 0;
		if (w[i].flags & (SH_W_SPLIT | SH_W_GLOB | SH_W_BRACE |
		    SH_W_TILDE))
			return deny(rc, name, "an unquoted expansion in %s "
			    "is not allowed; quote it", name);
	}
	if (lit || n <= 1 || (n == 2 && sh_word_literal(&w[0])))
		return 0;
	if (n == 3 && sh_word_literal(&w[1]) && strchr("=!<>-",
	    w[1].text[0]) != NULL && w[1].text[0] != '\0')
		return 0;
	return deny(rc, name, "%s with expansions is limited to simple "
	    "forms", name);
}

static int
check_harmless(struct runck *rc, const char *name, const struct sh_word *w,
    size_t n)
{
	if (strcmp(name, "test") == 0 || strcmp(name, "[") == 0)
		return check_test(rc, name, w, n);
	if (strcmp(name, "printf") == 0 && n > 0) {
		if (!sh_word_literal(&w[0]))
			return deny(rc, name, "the first argument of printf "
			    "must be a literal");
		if (strncmp(w[0].text, "-v", 2) == 0)
			return deny(rc, name, "printf -v assigns a variable");
	}
	return 0;
}

/* The program bash would run for a slash-less name, or -1. */
static int
path_lookup(const char *base, struct stat *st)
{
	char		 buf[PERM_PATH_MAX];
	const char	*d = PERM_RUN_PATH, *e;

	for (; *d != '\0'; d = *e == ':' ? e + 1 : e) {
		e = strchr(d, ':');
		if (e == NULL)
			e = d + strlen(d);
		snprintf(buf, sizeof(buf), "%.*s/%s", (int)(e - d), d, base);
		if (stat(buf, st) == 0 && S_ISREG(st->st_mode) &&
		    access(buf, X_OK) == 0)
			return 0;
	}
	return -1;
}

/*
 * An absolute command path is accepted only in a PATH folder and only when
 * it is the very file the bare name finds there: system folders are not
 * writable by the agent, so the answer cannot change under it.
 */
static int
check_abs_path(struct runck *rc, const char *path, const char *base)
{
	struct stat	 a, b;
	size_t		 dlen = (size_t)(base - path) - 1;
	const char	*d = PERM_RUN_PATH, *e;
	int		 indir = 0;

	for (; *d != '\0'; d = *e == ':' ? e + 1 : e) {
		e = strchr(d, ':');
		if (e == NULL)
			e = d + strlen(d);
		if ((size_t)(e - d) == dlen && strncmp(d, path, dlen) == 0)
			indir = 1;
	}
	if (!indir || stat(path, &a) == -1 || path_lookup(base, &b) == -1 ||
	    a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		return deny(rc, path, "it is not the %s found on PATH (%s)",
		    base, PERM_RUN_PATH);
	return 0;
}

/* Options of one wrapper, GNU style, stopping at the first operand as these
 * programs do. Long options may be abbreviated, as getopt_long allows; an
 * abbreviation of a refused option is refused. */
struct optspec {
	const char		*flags;		/* short, no argument */
	const char		*witharg;	/* short, with an argument */
	const char		*optarg;	/* short, attached argument only */
	const char *const	*longflags;	/* may carry =value */
	const char *const	*longarg;
	const char *const	*longdeny;
};

struct optit {
	const struct sh_word	*w;
	size_t			 n;
	size_t			 i;	/* current word */
	size_t			 ci;	/* character in a cluster; 0: none */
	char			 key[2];
	const char		*opt;	/* short: key; long: its full name */
	const char		*val;	/* the option's argument, or NULL */
	const char		*name;	/* the wrapper, for messages */
	const struct wctx	*wc;
};

static void
opt_init(struct optit *it, const char *name, const struct sh_word *w,
    size_t n, const struct wctx *wc)
{
	memset(it, 0, sizeof(*it));
	it->w = w;
	it->n = n;
	it->name = name;
	it->wc = wc;
}

/* Words a wrapper interprets must be the same at every run. */
static int
word_ok(struct runck *rc, const struct optit *it, size_t i)
{
	if (!sh_word_literal(&it->w[i]))
		return deny(rc, it->w[i].text, "%s reads an argument that is "
		    "not a literal", it->name);
	if (it->wc->taint != NULL && strstr(it->w[i].text, it->wc->taint))
		return deny(rc, it->w[i].text, "%s reads an argument filled in "
		    "at run time", it->name);
	return 0;
}

static const char *
long_match(const char *s, size_t n, const char *const *list, int *count)
{
	const char *hit = NULL;

	for (; list != NULL && *list != NULL; list++)
		if (strncmp(*list, s, n) == 0) {
			if ((*list)[n] == '\0') {
				*count = 1;
				return *list;
			}
			hit = *list;
			(*count)++;
		}
	return hit;
}

static int
opt_long(struct runck *rc, struct optit *it, const struct optspec *sp)
{
	const char	*s = it->w[it->i].text + 2, *eq = strchr(s, '=');
	const char	*hit;
	size_t		 n = eq != NULL ? (size_t)(eq - s) : strlen(s);
	int		 cf = 0, ca = 0, cd = 0;

	long_match(s, n, sp->longdeny, &cd);
	hit = long_match(s, n, sp->longflags, &cf);
	if (cf == 0)
		hit = long_match(s, n, sp->longarg, &ca);
	if (cd > 0 || cf + ca != 1)
		return deny(rc, it->w[it->i].text, "%s option --%.*s is not "
		    "supported", it->name, (int)(n > 40 ? 40 : n), s);
	it->opt = hit;
	it->val = eq != NULL ? eq + 1 : NULL;
	it->i++;
	if (ca == 1 && eq == NULL) {
		if (it->i >= it->n)
			return deny(rc, it->name, "%s option --%s needs an "
			    "argument", it->name, hit);
		if (word_ok(rc, it, it->i) == -1)
			return -1;
		it->val = it->w[it->i++].text;
	}
	return 1;
}

static int
opt_short(struct runck *rc, struct optit *it, const struct optspec *sp)
{
	const char	*t = it->w[it->i].text;
	char		 c = t[it->ci];

	it->key[0] = c;
	it->key[1] = '\0';
	it->opt = it->key;
	it->val = NULL;
	if (c != '\0' && sp->flags != NULL && strchr(sp->flags, c) != NULL) {
		if (t[++it->ci] == '\0') {
			it->ci = 0;
			it->i++;
		}
		return 1;
	}
	if (c != '\0' && sp->optarg != NULL && strchr(sp->optarg, c) != NULL) {
		it->val = t[it->ci + 1] != '\0' ? t + it->ci + 1 : NULL;
		it->ci = 0;
		it->i++;
		return 1;
	}
	if (c == '\0' || sp->witharg == NULL || strchr(sp->witharg, c) == NULL)
		return deny(rc, t, "%s option -%c is not supported", it->name,
		    c);
	if (t[it->ci + 1] != '\0')
		it->val = t + it->ci + 1;
	else {
		if (++it->i >= it->n)
			return deny(rc, t, "%s option -%c needs an argument",
			    it->name, c);
		if (word_ok(rc, it, it->i) == -1)
			return -1;
		it->val = it->w[it->i].text;
	}
	it->ci = 0;
	it->i++;
	return 1;
}

/* 1: an option in it->opt (and it->val); 0: it->i is the first operand. */
static int
opt_next(struct runck *rc, struct optit *it, const struct optspec *sp)
{
	const char *t;

	if (it->ci > 0)
		return opt_short(rc, it, sp);
	if (it->i >= it->n)
		return 0;
	if (word_ok(rc, it, it->i) == -1)
		return -1;
	t = it->w[it->i].text;
	if (t[0] != '-' || t[1] == '\0')
		return 0;
	if (strcmp(t, "--") == 0) {
		it->i++;
		return 0;
	}
	if (t[1] == '-')
		return opt_long(rc, it, sp);
	it->ci = 1;
	return opt_short(rc, it, sp);
}

static int
opt_is(const struct optit *it, const char *s, const char *l)
{
	return (s != NULL && strcmp(it->opt, s) == 0) ||
	    (l != NULL && strcmp(it->opt, l) == 0);
}

/* Run through the options; -1 when one is refused. */
static int
opt_skip(struct runck *rc, struct optit *it, const struct optspec *sp)
{
	int r;

	while ((r = opt_next(rc, it, sp)) == 1)
		;
	return r;
}

/* The command a wrapper runs, from word i on. need: a command must follow. */
static int
wrapped(struct runck *rc, const struct optit *it, int need,
    const struct wctx *wc)
{
	if (it->i < it->n)
		return check_argv(rc, it->w + it->i, it->n - it->i, wc);
	if (need || wc->appending)
		return deny(rc, it->name, "%s runs a command that cannot be "
		    "determined", it->name);
	return 0;
}

/* env and sudo take VAR=value words before the command: each is checked
 * like a prefix assignment, then the command they run is. */
static int
assigns_then_wrapped(struct runck *rc, struct optit *it,
    const struct wctx *wc)
{
	for (; it->i < it->n; it->i++) {
		if (word_ok(rc, it, it->i) == -1)
			return -1;
		if (strchr(it->w[it->i].text, '=') == NULL)
			break;
		if (check_assign(rc, it->w[it->i].text) == -1)
			return -1;
	}
	return wrapped(rc, it, 0, wc);
}

static int
wrap_env(struct runck *rc, struct optit *it, const struct wctx *wc)
{
	static const char *const lf[] = { "ignore-environment", "null",
	    "debug", "list-signal-handling", "block-signal", "default-signal",
	    "ignore-signal", NULL };
	static const char *const la[] = { "unset", "chdir", NULL };
	static const char *const ld[] = { "split-string", NULL };
	static const struct optspec sp = { "i0v", "uC", NULL, lf, la, ld };
	if (opt_skip(rc, it, &sp) == -1)
		return -1;
	if (it->i < it->n && strcmp(it->w[it->i].text, "-") == 0 &&
	    sh_word_literal(&it->w[it->i]))
		it->i++;
	return assigns_then_wrapped(rc, it, wc);
}

static int
wrap_nice(struct runck *rc, struct optit *it, const struct wctx *wc)
{
	static const char *const la[] = { "adjustment", NULL };
	static const struct optspec sp = { NULL, "n", NULL, NULL, la, NULL };
	const char *t;

	/* The old form: nice -5 cmd, nice --5 cmd. */
	if (it->n > 0 && sh_word_literal(&it->w[0])) {
		t = it->w[0].text;
		if (t[0] == '-')
			t += t[1] == '-' ? 2 : 1;
		if (*t == '+' || (*t == '-' && t != it->w[0].text + 1))
			t++;
		if (t != it->w[0].text && *t != '\0' &&
		    strspn(t, "0123456789") == strlen(t))
			it->i = 1;
	}
	if (opt_skip(rc, it, &sp) == -1)
		return -1;
	return wrapped(rc, it, 0, wc);
}

static int
wrap_timeout(struct runck *rc, struct optit *it, const struct wctx *wc)
{
	static const char *const lf[] = { "preserve-status", "foreground",
	    "verbose", NULL };
	static const char *const la[] = { "kill-after", "signal", NULL };
	static const struct optspec sp = { "v", "ks", NULL, lf, la, NULL };

	if (opt_skip(rc, it, &sp) == -1)
		return -1;
	if (it->i >= it->n)
		return deny(rc, it->name, "timeout needs a duration and a "
		    "command");
	if (word_ok(rc, it, it->i) == -1)
		return -1;
	it->i++;
	return wrapped(rc, it, 1, wc);
}

/* Wrappers that only take options before the command. */
static int
wrap_simple(struct runck *rc, struct optit *it, const struct wctx *wc,
    const struct optspec *sp, int need)
{
	if (opt_skip(rc, it, sp) == -1)
		return -1;
	return wrapped(rc, it, need, wc);
}

static int
wrap_sudo(struct runck *rc, struct optit *it, const struct wctx *wc)
{
	static const char *const lf[] = { "preserve-env", "set-home",
	    "non-interactive", "background", "stdin", "reset-timestamp",
	    "remove-timestamp", "list", "validate", "version", "bell",
	    "preserve-groups", "askpass", NULL };
	static const char *const la[] = { "user", "group", "close-from",
	    "chdir", "prompt", "role", "type", "host", "other-user",
	    "command-timeout", NULL };
	static const char *const ld[] = { "edit", "login", "shell", "chroot",
	    NULL };
	static const struct optspec sp = { "ABbEHKklNnPSVv", "CDgpRrTtUu",
	    "h", lf, la, ld };
	int r;

	while ((r = opt_next(rc, it, &sp)) == 1)
		if (opt_is(it, "R", NULL))
			return deny(rc, it->name, "sudo -R is not allowed");
	if (r == -1)
		return -1;
	return assigns_then_wrapped(rc, it, wc);
}

static int
wrap_xargs(struct runck *rc, struct optit *it, const struct wctx *wc)
{
	static const char *const lf[] = { "null", "open-tty", "interactive",
	    "no-run-if-empty", "verbose", "exit", "show-limits", "eof",
	    "replace", "max-lines", NULL };
	static const char *const la[] = { "arg-file", "delimiter",
	    "max-args", "max-procs", "max-chars", "process-slot-var", NULL };
	static const struct optspec sp = { "0oprtx", "aEIdLnPs", "eil", lf, la,
	    NULL };
	struct wctx	 inner = { NULL, 1 };
	struct sh_word	 fw;
	int		 r;

	if (wc->taint != NULL || wc->appending)
		return deny(rc, it->name, "xargs inside a run-time wrapper is "
		    "not supported");
	while ((r = opt_next(rc, it, &sp)) == 1) {
		if (opt_is(it, "I", NULL) || opt_is(it, "i", "replace")) {
			inner.taint = it->val != NULL ? it->val : "{}";
			inner.appending = 0;
		} else if (opt_is(it, "a", "arg-file")) {
			fw.text = (char *)(it->val != NULL ? it->val : "");
			fw.flags = 0;
			if (check_file(rc, "xargs -a", &fw, PERM_READ) == -1)
				return -1;
		} else if (opt_is(it, NULL, "process-slot-var") &&
		    (it->val == NULL || var_denied(it->val, strlen(it->val))))
			return deny(rc, it->name, "setting %s is not allowed",
			    it->val != NULL ? it->val : "");
	}
	if (r == -1)
		return -1;
	if (inner.taint != NULL && inner.taint[0] == '\0')
		return deny(rc, it->name, "xargs -I needs a replacement string");
	return wrapped(rc, it, 1, &inner);
}

/* find: every argument is read by find, so all must be literal; each
 * -exec/-execdir/-ok/-okdir runs a command in which {} is replaced. */
static int
wrap_find(struct runck *rc, struct optit *it, const struct wctx *wc)
{
	static const char *const exe[] = { "-exec", "-execdir", "-ok",
	    "-okdir", NULL };
	static const char *const bad[] = { "-delete", "-fprint", "-fprint0",
	    "-fprintf", "-fls", "-files0-from", NULL };
	struct wctx	inner = { "{}", 0 };
	size_t		i, j;

	if (wc->appending || wc->taint != NULL)
		return deny(rc, it->name, "find with arguments filled in at "
		    "run time is not allowed");
	for (i = 0; i < it->n; i++)
		if (word_ok(rc, it, i) == -1)
			return -1;
	for (i = 0; i < it->n; i++) {
		if (in_list(it->w[i].text, bad))
			return deny(rc, it->w[i].text, "find %s writes or reads "
			    "files outside the permission checks",
			    it->w[i].text);
		if (!in_list(it->w[i].text, exe))
			continue;
		for (j = i + 1; j < it->n; j++)
			if (strcmp(it->w[j].text, ";") == 0 ||
			    (strcmp(it->w[j].text, "+") == 0 &&
			    strcmp(it->w[j - 1].text, "{}") == 0))
				break;
		if (j >= it->n || j == i + 1)
			return deny(rc, it->w[i].text, "find %s needs a command "
			    "and a terminator", it->w[i].text);
		if (check_argv(rc, it->w + i + 1, j - i - 1, &inner) == -1)
			return -1;
		i = j;
	}
	return 0;
}

/* bash -c 'LITERAL': the script is parsed like the command line itself. */
static int
wrap_shell(struct runck *rc, struct optit *it, const struct wctx *wc,
    int shflags)
{
	static const char *const safe_o[] = { "pipefail", "errexit",
	    "nounset", "xtrace", "noclobber", "noglob", NULL };
	const char	*t;
	int		 c = 0;

	for (; it->i < it->n; it->i++) {
		if (word_ok(rc, it, it->i) == -1)
			return -1;
		t = it->w[it->i].text;
		if ((t[0] != '-' && t[0] != '+') || t[1] == '\0')
			break;
		if (strcmp(t, "--") == 0) {
			it->i++;
			break;
		}
		if (strcmp(t, "--norc") == 0 || strcmp(t, "--noprofile") == 0)
			continue;
		if (strcmp(t + 1, "o") == 0) {
			if (++it->i >= it->n || word_ok(rc, it, it->i) == -1 ||
			    !in_list(it->w[it->i].text, safe_o))
				return deny(rc, t, "%s -o needs one of the "
				    "supported options", it->name);
			continue;
		}
		if (strspn(t + 1, t[0] == '-' ? "euxc" : "eux") !=
		    strlen(t + 1))
			return deny(rc, t, "%s option %s is not supported",
			    it->name, t);
		if (strchr(t, 'c') != NULL)
			c = 1;
	}
	if (!c || it->i >= it->n)
		return deny(rc, it->name, "%s without -c reads a script that "
		    "cannot be checked", it->name);
	(void)wc;
	return check_script(rc, it->w[it->i].text, strlen(it->w[it->i].text),
	    shflags);
}

static int
wrap_busybox(struct runck *rc, struct optit *it, const struct wctx *wc)
{
	static const char *const shells[] = { "sh", "ash", "hush", "bash",
	    NULL };

	if (it->n == 0 || word_ok(rc, it, 0) == -1)
		return it->n == 0 ? deny(rc, "busybox", "busybox needs an "
		    "applet") : -1;
	if (it->w[0].text[0] == '-' || strchr(it->w[0].text, '/') != NULL ||
	    in_list(it->w[0].text, shells))
		return deny(rc, it->w[0].text, "busybox %s is not supported",
		    it->w[0].text);
	return check_argv(rc, it->w, it->n, wc);
}

/* eval and trap's action are code: parse them when they are literal. */
static int
wrap_eval(struct runck *rc, struct optit *it, size_t from)
{
	struct buf	b;
	size_t		i;
	int		r;

	buf_init(&b);
	for (i = from; i < it->n; i++) {
		if (!sh_word_literal(&it->w[i])) {
			buf_free(&b);
			return deny(rc, it->w[i].text, "%s of a non-literal "
			    "argument is not allowed", it->name);
		}
		if (i > from)
			buf_addc(&b, ' ');
		buf_adds(&b, it->w[i].text);
	}
	r = b.len == 0 ? 0 : check_script(rc, b.data, b.len, 0);
	buf_free(&b);
	return r;
}

static int
wrap_trap(struct runck *rc, struct optit *it, const struct wctx *wc)
{
	static const struct optspec sp = { "lp", NULL, NULL, NULL, NULL,
	    NULL };
	size_t i;

	if (opt_skip(rc, it, &sp) == -1)
		return -1;
	if (it->i >= it->n || strcmp(it->w[it->i].text, "-") == 0 ||
	    it->w[it->i].text[0] == '\0')
		return 0;
	i = it->i;
	it->n = i + 1;
	(void)wc;
	return wrap_eval(rc, it, i);
}

/* read and mapfile assign the variables they name. */
static int
wrap_read(struct runck *rc, struct optit *it, int mapfile)
{
	static const struct optspec rsp = { "ers", "adinNptu", NULL, NULL, NULL,
	    NULL };
	static const struct optspec msp = { "t", "dnOsu", NULL, NULL, NULL,
	    NULL };
	int r;

	while ((r = opt_next(rc, it, mapfile ? &msp : &rsp)) == 1)
		if (opt_is(it, "a", NULL) && var_denied(it->val,
		    strlen(it->val)))
			return deny(rc, it->val, "setting %s is not allowed",
			    it->val);
	if (r == -1)
		return -1;
	for (; it->i < it->n; it->i++) {
		const char *t = it->w[it->i].text;

		if (word_ok(rc, it, it->i) == -1)
			return -1;
		if (sh_assign_name_len(t) != strlen(t) || var_denied(t,
		    strlen(t)) || locale_var(t, strlen(t)))
			return deny(rc, t, "setting %s is not allowed", t);
	}
	return 0;
}

/* Programs known to run other programs in ways not modeled here. */
static const char *const opaque[] = {
	"zsh", "ksh", "mksh", "ash", "csh", "tcsh", "fish", "rbash", "watch",
	"flock", "su", "runuser", "script", "parallel", "chroot", "unshare",
	"nsenter", "strace", "ltrace", "taskset", "chrt", "systemd-run",
	"pkexec", "valgrind", "firejail", "coproc", "function", NULL
};

static int
wrap_dispatch(struct runck *rc, const char *base, struct optit *it,
    const struct wctx *wc)
{
	static const char *const tf[] = { "ctty", "fork", "wait", NULL };
	static const char *const ioa[] = { "class", "classdata", NULL };
	static const char *const iof[] = { "ignore", NULL };
	static const char *const iod[] = { "pid", "pgid", "uid", NULL };
	static const char *const sba[] = { "input", "output", "error", NULL };
	static const struct optspec none = { NULL, NULL, NULL, NULL, NULL,
	    NULL };
	static const struct optspec setsid = { "cfw", NULL, NULL, tf, NULL,
	    NULL };
	static const struct optspec ionice = { "t", "cn", NULL, iof, ioa, iod };
	static const struct optspec stdbuf = { NULL, "ioe", NULL, NULL, sba,
	    NULL };
	static const struct optspec time = { "p", NULL, NULL, NULL, NULL,
	    NULL };
	static const struct optspec doas = { "Ln", "u", NULL, NULL, NULL, NULL };
	static const struct optspec exec = { "cl", "a", NULL, NULL, NULL,
	    NULL };
	static const struct optspec command = { "p", NULL, NULL, NULL, NULL,
	    NULL };

	if (strcmp(base, "env") == 0)
		return wrap_env(rc, it, wc);
	if (strcmp(base, "nice") == 0)
		return wrap_nice(rc, it, wc);
	if (strcmp(base, "timeout") == 0)
		return wrap_timeout(rc, it, wc);
	if (strcmp(base, "nohup") == 0)
		return wrap_simple(rc, it, wc, &none, 1);
	if (strcmp(base, "setsid") == 0)
		return wrap_simple(rc, it, wc, &setsid, 1);
	if (strcmp(base, "ionice") == 0)
		return wrap_simple(rc, it, wc, &ionice, 1);
	if (strcmp(base, "stdbuf") == 0)
		return wrap_simple(rc, it, wc, &stdbuf, 1);
	if (strcmp(base, "time") == 0)
		return wrap_simple(rc, it, wc, &time, 0);
	if (strcmp(base, "doas") == 0)
		return wrap_simple(rc, it, wc, &doas, 1);
	if (strcmp(base, "exec") == 0)
		return wrap_simple(rc, it, wc, &exec, 0);
	if (strcmp(base, "sudo") == 0)
		return wrap_sudo(rc, it, wc);
	if (strcmp(base, "xargs") == 0)
		return wrap_xargs(rc, it, wc);
	if (strcmp(base, "find") == 0)
		return wrap_find(rc, it, wc);
	if (strcmp(base, "bash") == 0)
		return wrap_shell(rc, it, wc, 0);
	if (strcmp(base, "sh") == 0 || strcmp(base, "dash") == 0)
		return wrap_shell(rc, it, wc, SH_POSIX);
	if (strcmp(base, "busybox") == 0)
		return wrap_busybox(rc, it, wc);
	if (strcmp(base, "command") == 0) {
		if (it->n > 0 && sh_word_literal(&it->w[0]) &&
		    it->w[0].text[0] == '-' && strpbrk(it->w[0].text, "vV"))
			return 0;	/* only says what a name is */
		return wrap_simple(rc, it, wc, &command, 0);
	}
	if (strcmp(base, "builtin") == 0)
		return wrapped(rc, it, 0, wc);
	if (strcmp(base, "eval") == 0)
		return wrap_eval(rc, it, 0);
	if (strcmp(base, "trap") == 0)
		return wrap_trap(rc, it, wc);
	if (strcmp(base, "read") == 0)
		return wrap_read(rc, it, 0);
	if (strcmp(base, "mapfile") == 0 || strcmp(base, "readarray") == 0)
		return wrap_read(rc, it, 1);
	if (in_list(base, opaque))
		return deny(rc, base, "%s runs commands in a way that cannot be "
		    "checked", base);
	return 0;
}

/* One command: its name, then what it runs if it is a wrapper. */
static int
check_argv(struct runck *rc, const struct sh_word *w, size_t n,
    const struct wctx *wc)
{
	const char	*name = w[0].text, *base, *sl;
	struct optit	 it;

	if (!sh_word_literal(&w[0]))
		return deny(rc, name, "the command name is not a literal");
	if (wc->taint != NULL && strstr(name, wc->taint) != NULL)
		return deny(rc, name, "the command name is filled in at run "
		    "time");
	if (name[0] == '\0')
		return deny(rc, name, "the command name is empty");
	base = name;
	if ((sl = strrchr(name, '/')) != NULL) {
		base = sl + 1;
		if (name[0] != '/')
			return deny(rc, name, "a relative command path is not "
			    "allowed");
		if (*base == '\0' || !strlist_has(&rc->p->run, base))
			return *base == '\0' ? deny(rc, name, "not a command") :
			    deny_grant(rc, base);
		if (check_abs_path(rc, name, base) == -1)
			return -1;
	} else if (in_list(name, harmless))
		return check_harmless(rc, name, w + 1, n - 1);
	if (!strlist_has(&rc->p->run, base))
		return deny_grant(rc, base);
	opt_init(&it, base, w + 1, n - 1, wc);
	return wrap_dispatch(rc, base, &it, wc);
}

static int
check_cmd(struct runck *rc, const struct sh_cmd *c)
{
	static const struct wctx top = { NULL, 0 };
	size_t i;

	if (c->for_var != NULL && (var_denied(c->for_var,
	    strlen(c->for_var)) || locale_var(c->for_var, strlen(c->for_var))))
		return deny(rc, c->for_var, "setting %s is not allowed",
		    c->for_var);
	for (i = 0; i < c->nassigns; i++) {
		const char *a = c->assigns[i].text;

		if (check_assign(rc, a) == -1)
			return -1;
		if (c->nwords == 0 && locale_var(a, sh_assign_name_len(a)))
			return deny(rc, a, "setting the shell's locale is not "
			    "allowed");
	}
	for (i = 0; i < c->nredirs; i++)
		if (check_redir(rc, &c->redirs[i]) == -1)
			return -1;
	if (c->nwords == 0)
		return 0;
	return check_argv(rc, c->words, c->nwords, &top);
}

static int
ident_char(int c, int first)
{
	return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (!first && c >= '0' && c <= '9');
}

/*
 * Output is redacted only where a secret appears whole, so a command must not
 * expand a variable that env: fills from a secret: ${T:1}, ${T^^}, ${#T} or
 * a test on ${T:0:1} would hand it over piece by piece. The raw text is
 * scanned, quotes and all, after bash's line continuations are joined: a
 * reference inside single quotes is refused too, which costs nothing honest
 * and leaves no quoting to argue about. Nested scripts (bash -c) are scanned
 * again after their quotes are removed. Indirect expansion (${!name}) could
 * reach any variable, so it is refused while any secret variable exists.
 */
static int
check_secret_refs(struct runck *rc, const char *src, size_t len)
{
	const struct strlist *names = &rc->p->secret_env;
	char *t;
	size_t n = 0, i, j, k;
	int r = 0;

	if (names->n == 0)
		return 0;
	t = xmalloc(len + 1);
	for (i = 0; i < len; i++) {
		if (src[i] == '\\' && i + 1 < len && src[i + 1] == '\n') {
			i++;
			continue;
		}
		t[n++] = src[i];
	}
	t[n] = '\0';
	for (i = 0; i < n && r == 0; i++) {
		if (t[i] != '$')
			continue;
		j = i + 1;
		if (j < n && t[j] == '{') {
			j++;
			if (j < n && t[j] == '!') {
				r = deny(rc, t + i, "indirect expansion is not "
				    "allowed where env: holds a secret");
				break;
			}
			if (j < n && t[j] == '#')
				j++;
		}
		if (j >= n || !ident_char((unsigned char)t[j], 1))
			continue;
		for (k = j; k < n && ident_char((unsigned char)t[k], 0); k++)
			;
		for (size_t v = 0; v < names->n; v++)
			if (strlen(names->v[v]) == k - j &&
			    memcmp(names->v[v], t + j, k - j) == 0) {
				r = deny(rc, t + i, "it expands %s, which holds "
				    "a secret", names->v[v]);
				break;
			}
	}
	free(t);
	return r;
}

static int
check_script(struct runck *rc, const char *src, size_t len, int shflags)
{
	struct sh_script	sc;
	struct sh_error		err;
	size_t			i;
	int			r = 0;

	if (rc->nest >= RUN_MAX_NEST)
		return deny(rc, "bash -c", "shells are nested too deeply");
	if (check_secret_refs(rc, src, len) == -1)
		return -1;
	if (sh_parse(src, len, shflags, &sc, &err) == -1) {
		rc->res->allowed = 0;
		if (snprintf(rc->res->reason, sizeof(rc->res->reason),
		    "run access to \"%s\" is denied: %s", err.what,
		    err.why) < 0)
			rc->res->reason[0] = '\0';
		return -1;
	}
	rc->nest++;
	for (i = 0; i < sc.ncmds && r == 0; i++)
		r = check_cmd(rc, &sc.cmds[i]);
	rc->nest--;
	if (r == 0 && rc->nest == 0 && sc.ncmds == 0)
		r = deny(rc, "", "the command is empty");
	sh_script_free(&sc);
	return r;
}

int
perm_check_run(const struct cfg_perms *p, const char *value,
    struct perm_result *res)
{
	struct runck rc = { p, res, 0 };

	res->allowed = 0;
	res->reason[0] = '\0';
	if (check_script(&rc, value, strlen(value), 0) == -1)
		return 0;
	res->allowed = 1;
	return 1;
}
