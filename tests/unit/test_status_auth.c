/* Who may read /runs and /audit (status/status_auth.c), decided for made-up
 * peers: loopback and other addresses of both families, with and without
 * status.token, and every way a token can be wrong. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "status/status_auth.h"
#include "tt.h"
#include "util.h"

static struct sockaddr_storage ss;

static const struct sockaddr *
peer(const char *ip)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, ip, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(40000);
	} else if (inet_pton(AF_INET6, ip, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(40000);
	} else
		return NULL;
	return (const struct sockaddr *)&ss;
}

struct row {
	const char	*ip;
	int		 loopback;
};

static const struct row addrs[] = {
	{ "127.0.0.1", 1 },
	{ "127.0.0.2", 1 },
	{ "127.255.255.254", 1 },
	{ "::1", 1 },
	{ "::ffff:127.0.0.1", 1 },
	{ "::ffff:127.9.9.9", 1 },
	{ "192.0.2.2", 0 },
	{ "10.0.0.1", 0 },
	{ "0.0.0.0", 0 },
	{ "128.0.0.1", 0 },
	{ "126.255.255.255", 0 },
	{ "::", 0 },
	{ "::2", 0 },
	{ "::ffff:10.0.0.1", 0 },
	{ "::127.0.0.1", 0 },		/* v4-compatible, not mapped */
	{ "fe80::1", 0 },
	{ "2001:db8::1", 0 },
};

static void
t_loopback_without_token(void)
{
	size_t i = 0;

	for (i = 0; i < nitems(addrs); i++) {
		const struct sockaddr *sa = peer(addrs[i].ip);

		tt_assert(sa != NULL);
		if (status_addr_loopback(sa) != addrs[i].loopback)
			tt_fail_msg("%s: loopback %d", addrs[i].ip,
			    !addrs[i].loopback);
		tt_int_op(status_authorize(sa, NULL, NULL), ==,
		    addrs[i].loopback ? STATUS_AUTH_OK : STATUS_AUTH_FORBIDDEN);
		/* A header does not help when no token is configured. */
		tt_int_op(status_authorize(sa, "Bearer x", NULL), ==,
		    addrs[i].loopback ? STATUS_AUTH_OK : STATUS_AUTH_FORBIDDEN);
	}
end:
	;
}

static void
t_unknown_peer(void)
{
	struct sockaddr_un un;

	tt_int_op(status_authorize(NULL, NULL, NULL), ==,
	    STATUS_AUTH_FORBIDDEN);
	memset(&un, 0, sizeof(un));
	un.sun_family = AF_UNIX;
	tt_int_op(status_authorize((struct sockaddr *)&un, NULL, NULL), ==,
	    STATUS_AUTH_FORBIDDEN);
	tt_int_op(status_authorize(NULL, "Bearer tok", "tok"), ==,
	    STATUS_AUTH_OK);
end:
	;
}

static const struct {
	const char	*header;
	int		 ok;
} headers[] = {
	{ "Bearer s3cret-token", 1 },
	{ "bearer s3cret-token", 1 },
	{ "BEARER s3cret-token", 1 },
	{ "Bearer  s3cret-token ", 1 },
	{ NULL, 0 },
	{ "", 0 },
	{ "Bearer", 0 },
	{ "Bearer ", 0 },
	{ "s3cret-token", 0 },
	{ "Basic s3cret-token", 0 },
	{ "Bearer s3cret-toke", 0 },
	{ "Bearer s3cret-tokenx", 0 },
	{ "Bearer S3CRET-TOKEN", 0 },
	{ "Bearer s3cret-token, Bearer x", 0 },
	{ "Bearers3cret-token", 0 },
};

/* With a token every peer, loopback included, must present it. */
static void
t_token(void)
{
	static const char *const ips[] = { "127.0.0.1", "::1", "192.0.2.2",
	    "2001:db8::1" };
	size_t i = 0, j = 0;

	for (i = 0; i < nitems(ips); i++)
		for (j = 0; j < nitems(headers); j++) {
			int want = headers[j].ok ? STATUS_AUTH_OK :
			    STATUS_AUTH_NEED_TOKEN;

			if (status_authorize(peer(ips[i]), headers[j].header,
			    "s3cret-token") != want)
				tt_fail_msg("%s with \"%s\": want %d", ips[i],
				    headers[j].header ? headers[j].header :
				    "(none)", want);
		}
end:
	;
}

static const struct tt_case cases[] = {
	{ "loopback_without_token", t_loopback_without_token },
	{ "unknown_peer", t_unknown_peer },
	{ "token", t_token },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return tt_main(argc, argv, cases);
}
