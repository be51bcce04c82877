/* The OS sandbox: Landlock and seccomp rules computed from the config, so the
 * kernel holds the agent's permissions even where the permission engine is
 * skipped (a bug in af, or a subprocess doing what the engine never saw).
 *
 * sandbox_plan is pure apart from looking up executables on disk: it is what
 * `af flags` prints (sandbox_describe) and what `af run` applies
 * (sandbox_apply). The container check lives in container.c. */
#ifndef AF_SANDBOX_H
#define AF_SANDBOX_H

#include <stddef.h>
#include <sys/socket.h>

#include "config.h"
#include "util.h"

/* Access classes of a path rule; sandbox_apply maps each class to the Landlock
 * rights the running kernel knows (sandbox_describe prints the mapping). */
#define SB_READ		0x1	/* read_file, read_dir */
#define SB_WRITE	0x2	/* write_file, truncate, make_reg, make_dir,
				 * remove_file, remove_dir, refer, read_dir */
#define SB_EXEC		0x4	/* execute */

#define SB_PORT_MAX	64	/* distinct ports in each direction */

/* One path and what each domain may do beneath it (0: nothing). */
struct sb_rule {
	char		*path;		/* as planned; symlinks are followed */
	unsigned	 af;		/* SB_READ | SB_WRITE | SB_EXEC for af */
	unsigned	 child;		/* the same for subprocesses */
	int		 from_config;	/* named by the config: warn if missing */
	char		*why;		/* "permissions.read", "shared libraries" */
};

struct sb_plan {
	struct sb_rule	*rules;
	size_t		 nrules;
	int		 connect[SB_PORT_MAX];	/* TCP connect ports, sorted */
	size_t		 nconnect;
	int		 bind[SB_PORT_MAX];	/* TCP bind ports, sorted */
	size_t		 nbind;
	struct strlist	 hosts;		/* every host af may reach, sorted */
	struct strlist	 unpinnable;	/* wildcard grants: no address set */
	struct strlist	 unresolved;	/* run grants / MCP commands not found */
	struct strlist	 reasons;	/* cfg_hermetic_reasons */
	int		 hermetic;
	int		 subprocesses;	/* run grants or stdio MCP servers */
	int		 strict;	/* sandbox: strict */
	int		 kernel_abi;	/* Landlock ABI of this kernel; 0: none */
};

/*
 * Compute the sandbox a config runs under. Executables of the run grants and
 * of stdio MCP servers are looked up in /usr/local/bin:/usr/bin:/bin (an MCP
 * command with a slash is taken relative to the agent folder) and resolved
 * with realpath, with their ELF interpreter and "#!" interpreter. Returns 0, or
 * -1 with err filled (a URL or listener the plan cannot read). Free with
 * sandbox_plan_free, also after a failure.
 */
int sandbox_plan(const struct cfg *, struct sb_plan *, char *err,
    size_t errlen);
void sandbox_plan_free(struct sb_plan *);

/* What `af flags` prints: text (one item per line, sorted) or JSON. */
int sandbox_describe(const struct sb_plan *, int json, struct buf *out);

/*
 * Enter the sandbox: no_new_privs, then a Landlock domain with the highest ABI
 * the kernel has (rights it does not know are dropped, with a warning, or an
 * error under sandbox: strict), then the seccomp filter. Landlock binds only
 * the calling thread and threads it creates later, so af calls this once,
 * after the config, the secrets and the listeners, and before it creates any
 * thread (the seccomp filter is loaded with TSYNC all the same). When the plan
 * has subprocesses, it also prepares their stricter domain: see
 * sandbox_child_restrict. Returns 0, or -1 with err filled; after -1 the
 * process may be partly restricted and must exit.
 */
int sandbox_apply(const struct sb_plan *, char *err, size_t errlen);

/*
 * What a kernel with Landlock ABI abi (0: none) cannot hold of the plan: each
 * gap is a log_warnx, or under sandbox: strict the first one is an error
 * (-1, err filled). Strict needs ABI 4 (file system, truncate, TCP ports);
 * missing scopes (ABI 6) only warn. sandbox_apply calls it with the kernel's
 * ABI; exposed for tests.
 */
int sandbox_check_kernel(const struct sb_plan *, int abi, char *err,
    size_t errlen);

/*
 * In a subprocess, between fork and exec: enter the subprocess domain, which
 * drops the data folder, the secrets, the skills and the listeners' bind
 * rights. Async-signal-safe (one system call). Returns 0, or -1 with errno;
 * the child must then _exit rather than exec. A no-op returning 0 when
 * sandbox_apply was not called (tests, development without a sandbox).
 */
int sandbox_child_restrict(void);

/*
 * Address pinning for the HTTP client: resolve each allowed host once (at
 * startup, before sandbox_apply) and keep the addresses; sandbox_addr_allowed
 * then says whether a connect target is one of them. Wildcard patterns
 * ("*.example.com") cannot be resolved in advance and are skipped: the count
 * is returned by sandbox_pin_unpinnable. Returns 0, or -1 when a host did not
 * resolve (err names it; the other hosts are kept).
 */
int sandbox_pin_hosts(const struct strlist *hosts, char *err, size_t errlen);
int sandbox_addr_allowed(const struct sockaddr *, socklen_t);
size_t sandbox_pin_unpinnable(void);
void sandbox_pin_clear(void);

/*
 * Are we in a container? Looks under root (normally "/") for /.dockerenv,
 * /run/.containerenv, /run/systemd/container, container markers in
 * /proc/1/cgroup, PID 1 not being an init in /proc/1/comm or /proc/1/sched,
 * and the `container` environment variable. Returns 1 and names the first sign
 * in found, or 0 with looked listing everything checked (for the error
 * message). container_detect reads the variable with getenv;
 * container_detect_env takes its value (NULL: unset), for tests.
 */
int container_detect(const char *root, char *found, size_t foundlen,
    char *looked, size_t lookedlen);
int container_detect_env(const char *root, const char *env_container,
    char *found, size_t foundlen, char *looked, size_t lookedlen);

#endif
