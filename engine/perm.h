/* The permission engine: every authorization in af is decided here, one entry
 * point per axis. Nothing else authorizes anything; tools receive targets that
 * were already authorized and resolved. Default is deny. */
#ifndef AF_PERM_H
#define AF_PERM_H

#include <stddef.h>
#include <sys/types.h>

#include "config.h"

#define PERM_REASON_MAX	512
#define PERM_PATH_MAX	4096	/* longer paths are denied, not truncated */
/* The one PATH of every subprocess: run grants are looked up in it, the
 * sandbox makes its executables runnable, run_bash and MCP servers get it. */
#define PERM_RUN_PATH	"/usr/local/bin:/usr/bin:/bin"

enum perm_axis { PERM_NET, PERM_RUN, PERM_READ, PERM_WRITE };

/* A URL as libcurl will connect to it, after perm_check_net approved it. */
struct perm_url {
	char	scheme[8];	/* "http" or "https" */
	char	host[256];	/* lowercase, no trailing dot, IPv6 without brackets */
	int	port;		/* explicit or the scheme's default */
	int	host_is_ip;
	int	port_explicit;	/* the value named the port */
	int	bare;		/* the value was a host[:port], not a URL */
	size_t	rest_off;	/* where path, query, fragment start in value */
	int	by_wildcard;	/* granted only by a "*." pattern, whose
				   addresses cannot be pinned in advance */
};

/* The result of one decision. reason holds the text the model receives after
 * "permission denied: " (SPEC section 3), e.g.
 * `net access to "evil.com" is not in the agent's permissions.net allowlist`. */
struct perm_result {
	int	allowed;
	char	reason[PERM_REASON_MAX];
	char	resolved[PERM_PATH_MAX];	/* read/write: the path to act on */
	struct perm_url url;			/* net: the parsed target */
};

/* net: VALUE is a URL (http/https) or a bare host. */
int perm_check_net(const struct cfg_perms *, const char *value,
    struct perm_result *);
/* The same, for a value of known length that may hold NUL bytes (which are
 * denied; the C-string form cannot even see them). */
int perm_check_net_n(const struct cfg_perms *, const char *value, size_t len,
    struct perm_result *);
/* Rebuild the URL an approved check names, as "scheme://host[:port]/path?q"
 * (IPv6 in brackets, no fragment), for the HTTP client to fetch exactly what
 * was checked. -1 when it does not fit. */
int perm_url_format(const struct perm_url *, const char *value, char *out,
    size_t outlen);
/* run: VALUE is a whole command line for bash. Redirection targets are checked
 * against the read and write grants. */
int perm_check_run(const struct cfg_perms *, const char *value,
    struct perm_result *);
/* read/write: VALUE is a path; the result carries the resolved path. */
int perm_check_path(const struct cfg_perms *, enum perm_axis, const char *value,
    struct perm_result *);
int perm_check_path_n(const struct cfg_perms *, enum perm_axis,
    const char *value, size_t len, struct perm_result *);
/*
 * Open a path that perm_check_path approved (res->resolved) for AXIS (read
 * or write) without the check-then-open race: the granted root that holds it
 * is opened afresh, then the rest beneath it with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), or a component-by-component
 * O_NOFOLLOW walk where openat2 is unavailable. A symlink planted after the
 * check makes it fail (ELOOP or ENOTDIR). O_NOFOLLOW and O_CLOEXEC are
 * always added; the read axis takes only O_RDONLY opens. Returns an fd, or
 * -1 with errno (EACCES when no grant holds the path).
 */
int perm_open(const struct cfg_perms *, enum perm_axis, const char *resolved,
    int flags, mode_t mode);
/* Dispatch on the axis; returns 1 allowed, 0 denied (also in res->allowed). */
int perm_check(const struct cfg_perms *, enum perm_axis, const char *value,
    struct perm_result *);

const char *perm_axis_name(enum perm_axis);
int perm_axis_parse(const char *, enum perm_axis *);

/* Host-pattern helpers shared with the config loader: normalize a net grant
 * ("API.GitHub.com." -> "api.github.com"); -1 when it is not a valid host,
 * "*.domain" pattern or IP literal. */
int perm_net_grant_normalize(const char *in, char *out, size_t outlen);

#endif
