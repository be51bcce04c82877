/* A URL parser that sees a URL the way libcurl 7.88 will connect to it, for
 * the net axis of the permission engine. It is deliberately stricter than
 * curl: whatever two parsers (curl, the resolver, a browser) could read two
 * ways is refused, so the host we check is the host curl connects to. */
#ifndef AF_URL_H
#define AF_URL_H

#include <stddef.h>
#include <stdint.h>

#define URL_MAX		8192	/* longer input is refused, not truncated */
#define URL_HOST_MAX	253	/* a DNS name without its trailing dot */
#define URL_LABEL_MAX	63

enum url_host_kind { URL_HOST_NAME, URL_HOST_IPV4, URL_HOST_IPV6 };

struct url {
	char	scheme[8];	/* "http" or "https" ("https" for a bare host) */
	char	host[URL_HOST_MAX + 3];	/* normalized, see url_parse */
	int	port;		/* explicit, or the scheme's default */
	int	port_explicit;
	int	host_kind;	/* enum url_host_kind */
	int	bare;		/* the input was a host[:port], not a URL */
	size_t	rest_off;	/* where path, query and fragment start */
};

/*
 * Parse IN (LEN bytes, which may hold NUL bytes: they are refused) as an
 * http or https URL, or as a bare "host" or "host:port". The host comes out
 * lowercased without its trailing dot; IPv4 in any form curl or the resolver
 * accept (0x7f.1, 2130706433, 0177.0.0.1) as a dotted quad; IPv6 canonical,
 * without brackets. Returns 0, or -1 with a short reason in why ("userinfo
 * is not allowed").
 */
int url_parse(const char *in, size_t len, struct url *, char *why,
    size_t whylen);

/*
 * Normalize one host or host pattern of an allowlist: lowercase, no trailing
 * dot, LDH labels, an optional "*." as the whole first label (when
 * allow_wildcard), an IPv4 dotted quad in its plain decimal form, or an IPv6
 * literal with or without brackets (stored without). Returns the kind, or -1
 * when it is none of these.
 */
int url_host_normalize(const char *in, size_t len, int allow_wildcard,
    char *out, size_t outlen);

/* The same as url_parse's host handling, exposed for tests and tools: parse
 * IPv4 the way inet_aton does (1 to 4 parts, hex, octal). -1 if invalid. */
int url_ipv4_parse(const char *s, size_t len, uint32_t *out);

#endif
