#include "status/status_auth.h"

#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "util.h"

int
status_addr_loopback(const struct sockaddr *sa)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	    0xff, 0xff };
	const struct sockaddr_in *s4;
	const struct sockaddr_in6 *s6;

	if (sa == NULL)
		return 0;
	if (sa->sa_family == AF_INET) {
		s4 = (const struct sockaddr_in *)sa;
		return (ntohl(s4->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family != AF_INET6)
		return 0;
	s6 = (const struct sockaddr_in6 *)sa;
	if (IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr))
		return 1;
	return memcmp(s6->sin6_addr.s6_addr, v4mapped, sizeof(v4mapped)) == 0 &&
	    s6->sin6_addr.s6_addr[12] == 127;
}

/* The scheme is case-insensitive (RFC 7235); the token is not. The lengths
 * are compared first: that tells an attacker the length at most, never a
 * byte of the token. */
static int
bearer_ok(const char *authorization, const char *token)
{
	const char *p;
	size_t n;

	if (authorization == NULL || strncasecmp(authorization, "Bearer ", 7)
	    != 0)
		return 0;
	for (p = authorization + 7; *p == ' '; p++)
		;
	n = strlen(p);
	while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
		n--;
	return n == strlen(token) && ct_equal(p, token, n);
}

int
status_authorize(const struct sockaddr *peer, const char *authorization,
    const char *token)
{
	if (token != NULL && token[0] != '\0')
		return bearer_ok(authorization, token) ? STATUS_AUTH_OK :
		    STATUS_AUTH_NEED_TOKEN;
	return status_addr_loopback(peer) ? STATUS_AUTH_OK :
	    STATUS_AUTH_FORBIDDEN;
}
