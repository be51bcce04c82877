/* libFuzzer target for the net axis: perm_check_net on arbitrary bytes
 * against a fixed allowlist, checking what an approval promises (a clean
 * host that one grant covers, an authority free of userinfo and
 * backslashes) and that the URL rebuilt for curl is approved the same way.
 * Grant normalization gets the same bytes and must be idempotent. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "perm.h"
#include "url.h"

#define FUZZ_MAX_INPUT	(URL_MAX + 64)	/* a little past the parser's limit */

static struct cfg_perms perms;

static const char *grants[] = {
	"api.github.com", "*.example.com", "127.0.0.1", "::1", "localhost",
};

static void
check(int cond)
{
	if (!cond)
		abort();
}

static int
covered(const char *host)
{
	size_t hl = strlen(host);

	for (size_t i = 0; i < nitems(grants); i++) {
		const char *g = grants[i];
		size_t gl = strlen(g);

		if (strcmp(g, host) == 0)
			return 1;
		if (g[0] == '*' && hl > gl - 1 &&
		    strcmp(host + hl - (gl - 1), g + 1) == 0 &&
		    strchr(host, ':') == NULL)
			return 1;
	}
	return 0;
}

static void
check_reason(const struct perm_result *r)
{
	size_t n = strnlen(r->reason, sizeof(r->reason));

	check(n < sizeof(r->reason));
	check(strncmp(r->reason, "net access to \"", 15) == 0);
	for (size_t i = 0; i < n; i++)
		check((unsigned char)r->reason[i] >= 0x20 &&
		    (unsigned char)r->reason[i] < 0x7f);
}

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct perm_result res, res2;
	static char buf[FUZZ_MAX_INPUT + 1], url[FUZZ_MAX_INPUT + 600];
	char g1[300], g2[300];
	const char *v = buf;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	if (perms.net.n == 0)
		for (size_t i = 0; i < nitems(grants); i++)
			strlist_add(&perms.net, grants[i]);
	memcpy(buf, data, size);
	buf[size] = '\0';

	if (perm_check_net_n(&perms, v, size, &res)) {
		const struct perm_url *u = &res.url;
		size_t ro = u->rest_off;

		check(res.allowed == 1 && res.reason[0] == '\0');
		check(covered(u->host));
		for (const char *h = u->host; *h; h++)
			check(strchr("abcdefghijklmnopqrstuvwxyz0123456789.-:",
			    *h) != NULL);
		check(strcmp(u->scheme, "http") == 0 ||
		    strcmp(u->scheme, "https") == 0);
		check(u->port >= 1 && u->port <= 65535);
		check(ro <= size);
		check(ro == size || buf[ro] == '/' || buf[ro] == '?' ||
		    buf[ro] == '#');
		for (size_t i = 0; i < ro; i++)
			check(buf[i] != '@' && buf[i] != '\\' && buf[i] != '%' &&
			    (unsigned char)buf[i] > 0x20);
		/* What curl is handed must be approved as the same target. */
		if (perm_url_format(u, v, url, sizeof(url)) == 0) {
			check(perm_check_net(&perms, url, &res2) == 1);
			check(strcmp(res2.url.host, u->host) == 0);
			check(res2.url.port == u->port);
			check(strcmp(res2.url.scheme, u->scheme) == 0);
		}
	} else {
		check(res.allowed == 0);
		check_reason(&res);
	}

	if (memchr(data, '\0', size) == NULL &&
	    perm_net_grant_normalize(buf, g1, sizeof(g1)) == 0) {
		check(perm_net_grant_normalize(g1, g2, sizeof(g2)) == 0);
		check(strcmp(g1, g2) == 0);
	}
	return 0;
}
