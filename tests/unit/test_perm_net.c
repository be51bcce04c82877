/* Attack tests for the net axis: each row is an input, the grants (comma
 * separated), the expected decision and what we expect to read: for a
 * denial a substring of the reason, for an approval "host:port" as curl
 * will connect to it. */
#include <stdlib.h>
#include <string.h>

#include "perm.h"
#include "tt.h"
#include "url.h"

#define ALLOW	1
#define DENY	0

/* The grants most rows run against. */
#define G	"api.github.com,*.x.com,127.0.0.1,::1,localhost"
/* Names only: an IP form must never match one of these. */
#define GN	"api.github.com,*.x.com,localhost"

#define NOT_IN(h) "net access to \"" h "\" is not in the agent's " \
	"permissions.net allowlist"

#define NET_CASES(X)							\
	/* The plain cases. */						\
	X(plain_url, "https://api.github.com/repos", G, ALLOW,		\
	    "api.github.com:443")					\
	X(bare_host, "api.github.com", G, ALLOW, "api.github.com:443")	\
	X(bare_host_port, "api.github.com:8443", G, ALLOW,		\
	    "api.github.com:8443")					\
	X(http_default_port, "http://api.github.com/", G, ALLOW,	\
	    "api.github.com:80")					\
	X(explicit_port, "https://api.github.com:8443/x", G, ALLOW,	\
	    "api.github.com:8443")					\
	X(not_granted, "https://evil.com/", G, DENY, NOT_IN("evil.com"))	\
	X(no_grants, "https://api.github.com/", "", DENY,		\
	    NOT_IN("api.github.com"))					\
	/* Userinfo and the places a second host hides. */		\
	X(userinfo_at, "https://api.github.com@evil.com/", G, DENY,	\
	    "is denied: userinfo is not allowed")			\
	X(userinfo_user_pass, "https://u:pw@api.github.com/", G, DENY,	\
	    "userinfo is not allowed")					\
	X(userinfo_port_trick, "https://api.github.com:443@evil.com/",	\
	    G, DENY, "userinfo is not allowed")				\
	X(userinfo_bare, "api.github.com@evil.com", G, DENY,		\
	    "userinfo is not allowed")					\
	X(fragment_at, "https://evil.com#@api.github.com", G, DENY,	\
	    NOT_IN("evil.com"))						\
	X(query_at, "https://evil.com?@api.github.com", G, DENY,	\
	    NOT_IN("evil.com"))						\
	X(backslash_at, "https://evil.com\\@api.github.com", G, DENY,	\
	    "backslashes are not allowed before the path")		\
	X(backslash_host, "https://api.github.com\\.evil.com/", G, DENY,	\
	    "backslashes are not allowed")				\
	X(backslash_bare, "api.github.com\\evil.com", G, DENY,		\
	    "backslashes are not allowed")				\
	X(query_names_host, "https://api.github.com/?next=https://evil.com",\
	    G, ALLOW, "api.github.com:443")				\
	X(fragment_names_host, "https://api.github.com/#x@evil.com", G,	\
	    ALLOW, "api.github.com:443")				\
	X(query_without_path, "https://api.github.com?@evil.com", G,	\
	    ALLOW, "api.github.com:443")				\
	/* Percent-encoding in the host. */				\
	X(encoded_dot, "https://api%2egithub.com/", G, DENY,		\
	    "percent-encoding in the host is not allowed")		\
	X(encoded_at, "https://evil.com%40api.github.com/", G, DENY,	\
	    "percent-encoding")						\
	X(encoded_nul, "https://api.github.com%00.evil.com/", G, DENY,	\
	    "percent-encoding")						\
	/* Case and the trailing dot. */				\
	X(uppercase, "HTTPS://API.GitHub.COM/x", G, ALLOW,		\
	    "api.github.com:443")					\
	X(trailing_dot, "https://api.github.com./", G, ALLOW,		\
	    "api.github.com:443")					\
	X(two_trailing_dots, "https://api.github.com../", G, DENY,	\
	    "empty label")						\
	X(leading_dot, "https://.api.github.com/", G, DENY,		\
	    "empty label")						\
	X(grant_not_normalized, "https://api.github.com/",		\
	    "API.GitHub.COM.", ALLOW, "api.github.com:443")		\
	/* Wildcards. */						\
	X(wildcard_sub, "https://a.x.com/", G, ALLOW, "a.x.com:443")	\
	X(wildcard_deep, "https://a.b.x.com/", G, ALLOW, "a.b.x.com:443")	\
	X(wildcard_apex, "https://x.com/", G, DENY, NOT_IN("x.com"))	\
	X(wildcard_suffix, "https://evilx.com/", G, DENY,		\
	    NOT_IN("evilx.com"))					\
	X(wildcard_prefix, "https://x.com.evil.com/", G, DENY,		\
	    NOT_IN("x.com.evil.com"))					\
	X(exact_no_subdomain, "https://sub.api.github.com/", G, DENY,	\
	    NOT_IN("sub.api.github.com"))				\
	X(wildcard_in_input, "https://*.x.com/", G, DENY,		\
	    "a character outside letters")				\
	X(localhost_granted, "http://LOCALHOST:3000/", G, ALLOW,	\
	    "localhost:3000")						\
	X(localhost_sub, "http://evil.localhost/", G, DENY,		\
	    NOT_IN("evil.localhost"))					\
	/* IPv4 in the forms curl and inet_aton accept. */		\
	X(ip_decimal, "http://2130706433/", GN, DENY, NOT_IN("127.0.0.1"))\
	X(ip_hex, "http://0x7f.1/", GN, DENY, NOT_IN("127.0.0.1"))	\
	X(ip_hex_whole, "http://0x7F000001/", GN, DENY,			\
	    NOT_IN("127.0.0.1"))					\
	X(ip_octal, "http://0177.0.0.1/", GN, DENY, NOT_IN("127.0.0.1"))	\
	X(ip_short, "http://127.1/", GN, DENY, NOT_IN("127.0.0.1"))	\
	X(ip_three_parts, "http://10.1.2/", GN, DENY, NOT_IN("10.1.0.2"))	\
	X(ip_bare_decimal, "2130706433", GN, DENY, NOT_IN("127.0.0.1"))	\
	X(ip_granted, "http://127.0.0.1:8080/", G, ALLOW,		\
	    "127.0.0.1:8080")						\
	X(ip_short_granted, "http://127.1:8080/", G, ALLOW,		\
	    "127.0.0.1:8080")						\
	X(ip_other_loopback, "http://127.0.0.2/", G, DENY,		\
	    NOT_IN("127.0.0.2"))					\
	X(ip_bad_octal, "http://08.0.0.1/", G, DENY,			\
	    "looks numeric but is not a valid IPv4 address")		\
	X(ip_overflow, "http://256.0.0.1/", G, DENY, "not a valid IPv4")	\
	X(ip_overflow_last, "http://127.16777216/", G, DENY,		\
	    "not a valid IPv4")						\
	X(ip_five_parts, "http://1.2.3.4.5/", G, DENY, "not a valid IPv4")\
	X(ip_empty_hex, "http://0x.0.0.1/", G, DENY, "not a valid IPv4")	\
	X(ip_numeric_tld, "https://a.x.com.123/", G, DENY,		\
	    "not a valid IPv4")						\
	X(ip_hex_tld, "https://a.x.com.0x1/", G, DENY,			\
	    "not a valid IPv4")						\
	X(ip_digit_label_name, "https://1.x.com/", G, ALLOW,		\
	    "1.x.com:443")						\
	/* IPv6. */							\
	X(ipv6_loopback, "http://[::1]:8080/", G, ALLOW, "::1:8080")	\
	X(ipv6_long_form, "http://[0:0:0:0:0:0:0:1]/", G, ALLOW,	\
	    "::1:80")							\
	X(ipv6_not_granted, "http://[::2]/", G, DENY, NOT_IN("::2"))	\
	X(ipv6_mapped, "http://[::ffff:127.0.0.1]/", G, DENY,		\
	    NOT_IN("::ffff:127.0.0.1"))					\
	X(ipv6_mapped_hex, "http://[::ffff:7f00:1]/", G, DENY,		\
	    NOT_IN("::ffff:127.0.0.1"))					\
	X(ipv6_zone, "http://[fe80::1%25eth0]/", G, DENY,		\
	    "IPv6 zone ids are not allowed")				\
	X(ipv6_unbracketed, "http://::1/", G, DENY, "needs brackets")	\
	X(ipv6_junk_after, "http://[::1]x/", G, DENY,			\
	    "unexpected text after the IPv6 literal")			\
	X(ipv6_unterminated, "http://[::1/", G, DENY, "unterminated")	\
	X(ipv6_invalid, "http://[::g]/", G, DENY, "not a valid IPv6")	\
	X(ipv6_bare, "::1", G, ALLOW, "::1:443")			\
	X(ipv6_bare_brackets, "[::1]:9090", G, ALLOW, "::1:9090")	\
	X(ipv6_bare_link_local, "fe80::1", G, DENY, NOT_IN("fe80::1"))	\
	X(brackets_in_name, "https://api.github.com]/", G, DENY,	\
	    "misplaced brackets")					\
	/* Schemes. */							\
	X(scheme_file, "file:///etc/passwd", G, DENY,			\
	    "the scheme \"file\" is not allowed (only http and https)")	\
	X(scheme_ftp, "ftp://api.github.com/", G, DENY,			\
	    "the scheme \"ftp\" is not allowed")			\
	X(scheme_gopher, "gopher://api.github.com:70/_x", G, DENY,	\
	    "the scheme \"gopher\" is not allowed")			\
	X(scheme_upper_http, "HTTP://api.github.com", G, ALLOW,		\
	    "api.github.com:80")					\
	X(scheme_javascript, "javascript:alert(1)", G, DENY,		\
	    "the scheme \"javascript\" is not allowed")			\
	X(scheme_dict_no_slashes, "dict:api.github.com", G, DENY,	\
	    "the scheme \"dict\" is not allowed")			\
	X(one_slash, "https:/api.github.com", G, DENY,			\
	    "must be followed by \"//\"")				\
	X(no_slash, "https:api.github.com", G, DENY,			\
	    "must be followed by \"//\"")				\
	X(three_slashes, "https:///api.github.com", G, DENY,		\
	    "too many slashes")						\
	X(scheme_relative, "//api.github.com/x", G, DENY,		\
	    "needs an http:// or https:// scheme")			\
	X(bare_with_path, "api.github.com/repos", G, DENY,		\
	    "needs an http:// or https:// scheme")			\
	/* Ports. */							\
	X(port_zero, "https://api.github.com:0/", G, DENY, "out of range")\
	X(port_too_big, "https://api.github.com:65536/", G, DENY,	\
	    "out of range")						\
	X(port_long, "https://api.github.com:0000000443/", G, DENY,	\
	    "out of range")						\
	X(port_not_number, "https://api.github.com:44x/", G, DENY,	\
	    "not a number")						\
	X(port_signed, "https://api.github.com:+443/", G, DENY,		\
	    "not a number")						\
	X(port_empty, "https://api.github.com:/", G, DENY,		\
	    "the port is empty")					\
	X(port_two, "https://api.github.com:443:80/", G, DENY,		\
	    "needs brackets")						\
	/* Empty things, whitespace, control characters. */		\
	X(empty, "", G, DENY, "net access to \"\" is denied: it is empty")	\
	X(empty_host, "https://", G, DENY, "the host is empty")		\
	X(empty_host_port, "https://:443/", G, DENY, "the host is empty")	\
	X(only_dot, "https://./", G, DENY, "the host is empty")		\
	X(space_in_host, "https://api.github.com .evil.com/", G, DENY,	\
	    "whitespace or control characters")				\
	X(leading_space, " https://api.github.com", G, DENY,		\
	    "whitespace or control")					\
	X(newline, "https://api.github.com\n.evil.com", G, DENY,	\
	    "is denied: it contains whitespace")			\
	X(tab_in_path, "https://api.github.com/a\tb", G, DENY,		\
	    "whitespace")						\
	X(del_char, "https://api.github.com\x7f/", G, DENY, "control")	\
	X(nul_in_host, "https://api.github.com\0.evil.com/", G, DENY,	\
	    "it contains a NUL byte")					\
	X(reason_escapes_nul, "https://a\0b", G, DENY,			\
	    "net access to \"https://a\\x00b\" is denied")		\
	X(non_ascii_dot, "https://api\xef\xbc\x8egithub.com/", G, DENY,	\
	    "non-ASCII host name is not allowed")			\
	X(non_ascii_path, "https://api.github.com/caf\xc3\xa9", G,	\
	    ALLOW, "api.github.com:443")				\
	X(underscore, "https://api_github.com/", G, DENY,		\
	    "a character outside letters")				\
	X(label_hyphen, "https://-api.github.com/", G, DENY,		\
	    "starts or ends with '-'")					\
	X(semicolon_host, "https://api.github.com;evil.com/", G, DENY,	\
	    "a character outside letters")

static void
perms_from(struct cfg_perms *p, const char *csv)
{
	const char *s = csv;

	memset(p, 0, sizeof(*p));
	while (*s != '\0') {
		size_t n = strcspn(s, ",");
		char *item = strndup(s, n);

		strlist_add(&p->net, item);
		free(item);
		s += n;
		if (*s == ',')
			s++;
	}
}

static void
net_case(const char *in, size_t len, const char *grants, int expect,
    const char *want)
{
	struct cfg_perms p;
	struct perm_result res;
	char hp[300];
	int rc;

	perms_from(&p, grants);
	rc = perm_check_net_n(&p, in, len, &res);
	tt_int_op(rc, ==, expect);
	tt_int_op(res.allowed, ==, expect);
	if (expect == ALLOW) {
		snprintf(hp, sizeof(hp), "%s:%d", res.url.host, res.url.port);
		tt_str_op(hp, ==, want);
		tt_str_op(res.reason, ==, "");
	} else {
		if (strstr(res.reason, want) == NULL)
			tt_fail_msg("reason \"%s\" lacks \"%s\"", res.reason,
			    want);
		tt_assert(strncmp(res.reason, "net access to \"", 15) == 0);
		tt_assert(strchr(res.reason, '\n') == NULL);
	}
end:
	strlist_free(&p.net);
}

#define X(name, in, grants, expect, want)				\
static void								\
t_##name(void)								\
{									\
	net_case(in, sizeof(in) - 1, grants, expect, want);		\
}
NET_CASES(X)
#undef X

/* Grant normalization, as the config loader calls it. */
#define GRANT_CASES(X)							\
	X(case_and_dot, "API.GitHub.com.", 0, "api.github.com")		\
	X(wildcard, "*.Example.COM", 0, "*.example.com")		\
	X(wildcard_alone, "*", -1, "")					\
	X(wildcard_empty, "*.", -1, "")					\
	X(wildcard_inner, "a.*.com", -1, "")				\
	X(wildcard_double, "**.x.com", -1, "")				\
	X(wildcard_partial, "*x.com", -1, "")				\
	X(wildcard_ip, "*.0.0.1", -1, "")				\
	X(ipv4, "127.0.0.1", 0, "127.0.0.1")				\
	X(ipv4_short, "127.1", -1, "")					\
	X(ipv4_hex, "0x7f.0.0.1", -1, "")				\
	X(ipv4_decimal, "2130706433", -1, "")				\
	X(ipv4_leading_zero, "010.0.0.1", -1, "")			\
	X(ipv4_too_big, "1.2.3.256", -1, "")				\
	X(ipv6_brackets, "[::1]", 0, "::1")				\
	X(ipv6_long, "0:0:0:0:0:0:0:1", 0, "::1")			\
	X(ipv6_upper, "FE80::A", 0, "fe80::a")				\
	X(ipv6_zone, "fe80::1%eth0", -1, "")				\
	X(leading_hyphen, "-a.com", -1, "")				\
	X(empty_label, "a..com", -1, "")				\
	X(empty, "", -1, "")						\
	X(underscore, "a_b.com", -1, "")				\
	X(url, "https://api.github.com", -1, "")			\
	X(host_port, "api.github.com:443", -1, "")			\
	X(space, "api.github.com ", -1, "")				\
	X(percent, "api%2egithub.com", -1, "")

static void
grant_case(const char *in, int expect, const char *want)
{
	char out[300] = "";

	tt_int_op(perm_net_grant_normalize(in, out, sizeof(out)), ==, expect);
	if (expect == 0)
		tt_str_op(out, ==, want);
end:
	;
}

#define X(name, in, expect, want)					\
static void								\
g_##name(void)								\
{									\
	grant_case(in, expect, want);					\
}
GRANT_CASES(X)
#undef X

/* Very long input: denied with a reason that stays one short line. */
static void
t_very_long_url(void)
{
	struct cfg_perms p;
	struct perm_result res;
	size_t n = URL_MAX + 100;
	char *s = malloc(n + 1);

	perms_from(&p, G);
	memcpy(s, "https://api.github.com/", 23);
	memset(s + 23, 'a', n - 23);
	s[n] = '\0';
	tt_int_op(perm_check_net(&p, s, &res), ==, DENY);
	tt_assert(strstr(res.reason, "longer than 8192 bytes") != NULL);
	tt_assert(strstr(res.reason, "...\" is denied") != NULL);
	tt_assert(strlen(res.reason) < 300);
	/* Just under the limit is fine: the path may be long. */
	s[URL_MAX] = '\0';
	tt_int_op(perm_check_net(&p, s, &res), ==, ALLOW);
end:
	free(s);
	strlist_free(&p.net);
}

static void
t_long_host(void)
{
	struct cfg_perms p;
	struct perm_result res;
	char url[600], label[70];

	perms_from(&p, G);
	memset(label, 'a', 64);
	label[64] = '\0';
	snprintf(url, sizeof(url), "https://%s.x.com/", label);
	tt_int_op(perm_check_net(&p, url, &res), ==, DENY);
	tt_assert(strstr(res.reason, "longer than 63 bytes") != NULL);
	label[63] = '\0';
	snprintf(url, sizeof(url), "https://%s.x.com/", label);
	tt_int_op(perm_check_net(&p, url, &res), ==, ALLOW);
	/* 4 x 63 + 3 dots = 255 bytes: over 253. */
	snprintf(url, sizeof(url), "https://%s.%s.%s.%s/", label, label, label,
	    label);
	tt_int_op(perm_check_net(&p, url, &res), ==, DENY);
	tt_assert(strstr(res.reason, "longer than 253 bytes") != NULL);
end:
	strlist_free(&p.net);
}

/* The dispatcher and the rebuilt URL the HTTP tool fetches. */
static void
t_dispatch_and_format(void)
{
	struct cfg_perms p;
	struct perm_result res;
	const char *v = "HTTPS://API.GitHub.com./a/b?c=d#frag";
	char out[256];

	perms_from(&p, G);
	tt_int_op(perm_check(&p, PERM_NET, v, &res), ==, ALLOW);
	tt_int_op(perm_url_format(&res.url, v, out, sizeof(out)), ==, 0);
	tt_str_op(out, ==, "https://api.github.com/a/b?c=d");
	v = "http://[0::1]:8080?q";
	tt_int_op(perm_check(&p, PERM_NET, v, &res), ==, ALLOW);
	tt_int_op(perm_url_format(&res.url, v, out, sizeof(out)), ==, 0);
	tt_str_op(out, ==, "http://[::1]:8080?q");
	tt_int_op(res.url.host_is_ip, ==, 1);
	tt_int_op(perm_check(&p, PERM_NET, "localhost:8080", &res), ==, ALLOW);
	tt_int_op(perm_url_format(&res.url, "localhost:8080", out, 10), ==, -1);
end:
	strlist_free(&p.net);
}

/* Which grant decided: a host granted only by a wildcard is marked, so the
 * hermetic pin knows it has no addresses for it; an exact grant wins over a
 * wildcard that also covers the host, wherever it stands in the list. */
static void
t_by_wildcard(void)
{
	struct cfg_perms p;
	struct perm_result res;

	perms_from(&p, "*.x.com,b.x.com");
	tt_int_op(perm_check(&p, PERM_NET, "https://a.x.com/", &res), ==,
	    ALLOW);
	tt_int_op(res.url.by_wildcard, ==, 1);
	tt_int_op(perm_check(&p, PERM_NET, "https://B.x.com./", &res), ==,
	    ALLOW);
	tt_int_op(res.url.by_wildcard, ==, 0);
	tt_int_op(perm_check(&p, PERM_NET, "https://x.com/", &res), ==, DENY);
	tt_int_op(res.url.by_wildcard, ==, 0);
end:
	strlist_free(&p.net);
}

static const struct tt_case cases[] = {
	{ "net/by_wildcard", t_by_wildcard },
#define X(name, in, grants, expect, want) { "net/" #name, t_##name },
	NET_CASES(X)
#undef X
#define X(name, in, expect, want) { "grant/" #name, g_##name },
	GRANT_CASES(X)
#undef X
	{ "net/very_long_url", t_very_long_url },
	{ "net/long_host", t_long_host },
	{ "net/dispatch_and_format", t_dispatch_and_format },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return tt_main(argc, argv, cases);
}
