/* The URL parser of the net axis (url.h). It follows libcurl 7.88's reading
 * of a URL (the authority ends at the first '/', '?' or '#'; a host that
 * looks numeric is an IPv4 address in inet_aton's forms) and refuses every
 * construct where curl, the resolver and a browser could disagree. */
#include "url.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

static int
lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

static int
is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static int
is_hex(int c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int
is_alpha(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int
hex_value(int c)
{
	if (is_digit(c))
		return c - '0';
	return lower(c) - 'a' + 10;
}

/* One part of an inet_aton address: "0x" hex, leading-zero octal or
 * decimal. An empty hex part ("0x") is refused: glibc reads it as 0 and
 * curl as a name, and two readings are one too many. */
static int
ipv4_part(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	unsigned base = 10;
	size_t i = 0;

	if (n == 0)
		return -1;
	if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		i = 2;
		if (n == 2)
			return -1;
	} else if (n >= 2 && s[0] == '0') {
		base = 8;
		i = 1;
	}
	for (; i < n; i++) {
		int c = (unsigned char)s[i], d;

		if (base == 16 && is_hex(c))
			d = hex_value(c);
		else if (base == 8 && c >= '0' && c <= '7')
			d = c - '0';
		else if (base == 10 && is_digit(c))
			d = c - '0';
		else
			return -1;
		v = v * base + (uint64_t)d;
		if (v > 0xffffffffu)
			return -1;
	}
	*out = v;
	return 0;
}

int
url_ipv4_parse(const char *s, size_t len, uint32_t *out)
{
	uint64_t part[4];
	size_t np = 0, start = 0;
	uint32_t v = 0;

	for (size_t i = 0; i <= len; i++) {
		if (i < len && s[i] != '.')
			continue;
		if (np == 4 || ipv4_part(s + start, i - start, &part[np]) == -1)
			return -1;
		np++;
		start = i + 1;
	}
	/* All parts but the last are bytes; the last fills what is left. */
	for (size_t i = 0; i + 1 < np; i++) {
		if (part[i] > 255)
			return -1;
		v |= (uint32_t)part[i] << (24 - 8 * i);
	}
	if (np < 4 && part[np - 1] >> (32 - 8 * (np - 1)) != 0)
		return -1;
	if (np == 4 && part[3] > 255)
		return -1;
	v |= (uint32_t)part[np - 1];
	*out = v;
	return 0;
}

/* The strict form allowed in an allowlist: four decimal bytes, no leading
 * zeros, so that a grant means one thing to every reader. */
static int
ipv4_strict(const char *s, size_t len)
{
	size_t np = 0, start = 0;

	for (size_t i = 0; i <= len; i++) {
		unsigned v = 0;

		if (i < len && s[i] != '.')
			continue;
		if (i == start || i - start > 3 ||
		    (s[start] == '0' && i - start > 1))
			return -1;
		for (size_t j = start; j < i; j++) {
			if (!is_digit((unsigned char)s[j]))
				return -1;
			v = v * 10 + (unsigned)(s[j] - '0');
		}
		if (v > 255)
			return -1;
		np++;
		start = i + 1;
	}
	return np == 4 ? 0 : -1;
}

/* A host whose last label is a number (decimal, or "0x" hex) is an address
 * to curl and to inet_aton, and to a browser: it must parse as one or be
 * refused, never be matched as a name. */
static int
ends_in_number(const char *s, size_t n)
{
	size_t i = n;

	while (i > 0 && s[i - 1] != '.')
		i--;
	s += i;
	n -= i;
	if (n == 0)
		return 0;
	if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		for (size_t j = 2; j < n; j++)
			if (!is_hex((unsigned char)s[j]))
				return 0;
		return 1;
	}
	for (size_t j = 0; j < n; j++)
		if (!is_digit((unsigned char)s[j]))
			return 0;
	return 1;
}

/* LDH labels of 1 to 63 bytes, neither starting nor ending with '-'; s is
 * already lowercase. */
static int
ldh_name(const char *s, size_t n, const char **why)
{
	size_t start = 0;

	if (n > URL_HOST_MAX) {
		*why = "the host name is longer than 253 bytes";
		return -1;
	}
	for (size_t i = 0; i <= n; i++) {
		int c = i < n ? (unsigned char)s[i] : '.';

		if (c == '.') {
			if (i == start) {
				*why = "the host name has an empty label";
				return -1;
			}
			if (i - start > URL_LABEL_MAX) {
				*why = "a label of the host name is longer "
				    "than 63 bytes";
				return -1;
			}
			if (s[start] == '-' || s[i - 1] == '-') {
				*why = "a label of the host name starts or "
				    "ends with '-'";
				return -1;
			}
			start = i + 1;
		} else if (!(is_alpha(c) || is_digit(c) || c == '-')) {
			*why = "the host name has a character outside "
			    "letters, digits, '-' and '.'";
			return -1;
		}
	}
	return 0;
}

/* An IPv6 literal without brackets; zone ids ("%eth0") are refused since
 * they name an interface, not a host. */
static int
ipv6_parse(const char *s, size_t n, char *out, size_t outlen,
    const char **why)
{
	char tmp[INET6_ADDRSTRLEN];
	struct in6_addr a;

	if (memchr(s, '%', n) != NULL) {
		*why = "IPv6 zone ids are not allowed";
		return -1;
	}
	if (n == 0 || n >= sizeof(tmp)) {
		*why = "not a valid IPv6 address";
		return -1;
	}
	memcpy(tmp, s, n);
	tmp[n] = '\0';
	if (inet_pton(AF_INET6, tmp, &a) != 1 ||
	    inet_ntop(AF_INET6, &a, out, (socklen_t)outlen) == NULL) {
		*why = "not a valid IPv6 address";
		return -1;
	}
	return URL_HOST_IPV6;
}

/*
 * The common host normalization of a URL's host and an allowlist entry. A
 * URL's host may use any IPv4 form (it is rewritten as a dotted quad); a
 * grant must use the plain one. IPv6 is handled by the callers.
 */
static int
host_parse(const char *s, size_t n, int grant, char *out, size_t outlen,
    const char **why)
{
	const char *name;
	size_t off = 0;
	uint32_t a;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '%') {
			*why = "percent-encoding in the host is not allowed";
			return -1;
		}
		if (c >= 0x80) {
			*why = "a non-ASCII host name is not allowed (use its "
			    "xn-- form)";
			return -1;
		}
	}
	if (n > 0 && s[n - 1] == '.')
		n--;
	if (n == 0) {
		*why = "the host is empty";
		return -1;
	}
	if (n > URL_HOST_MAX || n + 1 > outlen) {
		*why = "the host name is longer than 253 bytes";
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		out[i] = (char)lower((unsigned char)s[i]);
	out[n] = '\0';

	if (grant && n > 2 && out[0] == '*' && out[1] == '.')
		off = 2;
	name = out + off;
	if (ends_in_number(name, n - off)) {
		if (off != 0) {
			*why = "a wildcard must be followed by a host name";
			return -1;
		}
		if (grant) {
			if (ipv4_strict(out, n) == -1) {
				*why = "not a dotted-quad IPv4 address";
				return -1;
			}
			return URL_HOST_IPV4;
		}
		if (url_ipv4_parse(out, n, &a) == -1) {
			*why = "the host looks numeric but is not a valid "
			    "IPv4 address";
			return -1;
		}
		snprintf(out, outlen, "%u.%u.%u.%u", a >> 24,
		    (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
		return URL_HOST_IPV4;
	}
	if (ldh_name(name, n - off, why) == -1)
		return -1;
	return URL_HOST_NAME;
}

int
url_host_normalize(const char *in, size_t len, int allow_wildcard,
    char *out, size_t outlen)
{
	const char *why;

	if (len >= 2 && in[0] == '[' && in[len - 1] == ']')
		return ipv6_parse(in + 1, len - 2, out, outlen, &why);
	if (memchr(in, ':', len) != NULL)
		return ipv6_parse(in, len, out, outlen, &why);
	return host_parse(in, len, allow_wildcard, out, outlen, &why);
}

/* host[:port] or [v6][:port], the authority without userinfo. */
static int
authority_parse(const char *s, size_t n, struct url *u, const char **why)
{
	const char *port = NULL, *colon;
	size_t hn, pn = 0;
	long v = 0;
	int kind;

	if (n > 0 && s[0] == '[') {
		const char *rb = memchr(s, ']', n);

		if (rb == NULL) {
			*why = "unterminated IPv6 literal";
			return -1;
		}
		if (ipv6_parse(s + 1, (size_t)(rb - s - 1), u->host,
		    sizeof(u->host), why) == -1)
			return -1;
		kind = URL_HOST_IPV6;
		rb++;
		if (rb < s + n) {
			if (*rb != ':') {
				*why = "unexpected text after the IPv6 literal";
				return -1;
			}
			port = rb + 1;
			pn = (size_t)(s + n - port);
		}
	} else {
		if ((colon = memchr(s, ':', n)) != NULL) {
			hn = (size_t)(colon - s);
			port = colon + 1;
			pn = n - hn - 1;
			if (memchr(port, ':', pn) != NULL) {
				*why = "an IPv6 address needs brackets";
				return -1;
			}
		} else
			hn = n;
		if (memchr(s, '[', hn) != NULL || memchr(s, ']', hn) != NULL) {
			*why = "misplaced brackets in the host";
			return -1;
		}
		if ((kind = host_parse(s, hn, 0, u->host, sizeof(u->host),
		    why)) == -1)
			return -1;
	}
	u->host_kind = kind;
	if (port != NULL) {
		if (pn == 0) {
			*why = "the port is empty";
			return -1;
		}
		if (pn > 5) {
			*why = "the port is out of range";
			return -1;
		}
		for (size_t i = 0; i < pn; i++) {
			if (!is_digit((unsigned char)port[i])) {
				*why = "the port is not a number";
				return -1;
			}
			v = v * 10 + (port[i] - '0');
		}
		if (v < 1 || v > 65535) {
			*why = "the port is out of range";
			return -1;
		}
		u->port = (int)v;
		u->port_explicit = 1;
	}
	return 0;
}

/* strcspn for a counted string. */
static size_t
span(const char *s, size_t n, const char *set)
{
	size_t i = 0;

	while (i < n && memchr(set, s[i], strlen(set)) == NULL)
		i++;
	return i;
}

static size_t
count(const char *s, size_t n, char c)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += s[i] == c;
	return k;
}

static void
set_why(char *why, size_t whylen, const char *s)
{
	if (whylen > 0)
		snprintf(why, whylen, "%s", s);
}

int
url_parse(const char *in, size_t len, struct url *u, char *whybuf,
    size_t whylen)
{
	const char *why = NULL, *auth;
	size_t sl = 0, an;
	char scheme[16];

	memset(u, 0, sizeof(*u));
	if (len == 0) {
		set_why(whybuf, whylen, "it is empty");
		return -1;
	}
	if (len > URL_MAX) {
		set_why(whybuf, whylen, "it is longer than 8192 bytes");
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];

		if (c == '\0') {
			set_why(whybuf, whylen, "it contains a NUL byte");
			return -1;
		}
		if (c <= 0x20 || c == 0x7f) {
			set_why(whybuf, whylen,
			    "it contains whitespace or control characters");
			return -1;
		}
	}

	/* A scheme is letters, digits, '+', '-', '.' up to a ':'. */
	if (is_alpha((unsigned char)in[0])) {
		sl = 1;
		while (sl < len && (is_alpha((unsigned char)in[sl]) ||
		    is_digit((unsigned char)in[sl]) || in[sl] == '+' ||
		    in[sl] == '-' || in[sl] == '.'))
			sl++;
		if (sl == len || in[sl] != ':')
			sl = 0;
	}
	if (sl > 0 && !(len - sl >= 3 && in[sl + 1] == '/' &&
	    in[sl + 2] == '/')) {
		/* "host:port" and "fe80::1" are bare hosts; anything else
		 * names a scheme. */
		size_t i = sl + 1, j = 0;

		while (i < len && is_digit((unsigned char)in[i]))
			i++;
		while (j < len && (is_hex((unsigned char)in[j]) ||
		    in[j] == ':' || in[j] == '.'))
			j++;
		if ((i == len && memchr(in, '+', sl) == NULL) ||
		    (j == len && count(in, len, ':') >= 2))
			sl = 0;
	}

	if (sl == 0) {
		/* A bare host: the default scheme, nothing after the port. */
		if (span(in, len, "/?#\\@") < len) {
			set_why(whybuf, whylen, memchr(in, '@', len) ?
			    "userinfo is not allowed" : memchr(in, '\\', len) ?
			    "backslashes are not allowed before the path" :
			    "a URL needs an http:// or https:// scheme");
			return -1;
		}
		u->bare = 1;
		snprintf(u->scheme, sizeof(u->scheme), "https");
		u->port = 443;
		if (in[0] != '[' && count(in, len, ':') >= 2) {
			/* Two colons and no brackets: an IPv6 literal. */
			if (ipv6_parse(in, len, u->host, sizeof(u->host),
			    &why) == -1) {
				set_why(whybuf, whylen, why);
				return -1;
			}
			u->host_kind = URL_HOST_IPV6;
		} else if (authority_parse(in, len, u, &why) == -1) {
			set_why(whybuf, whylen, why);
			return -1;
		}
		u->rest_off = len;
		return 0;
	}

	if (sl >= sizeof(scheme)) {
		set_why(whybuf, whylen, "only http and https URLs are allowed");
		return -1;
	}
	for (size_t i = 0; i < sl; i++)
		scheme[i] = (char)lower((unsigned char)in[i]);
	scheme[sl] = '\0';
	if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
		if (whylen > 0)
			snprintf(whybuf, whylen, "the scheme \"%s\" is not "
			    "allowed (only http and https)", scheme);
		return -1;
	}
	memcpy(u->scheme, scheme, sl + 1);	/* "http" or "https" */
	u->port = strcmp(scheme, "https") == 0 ? 443 : 80;
	if (len - sl < 3 || in[sl + 1] != '/' || in[sl + 2] != '/') {
		set_why(whybuf, whylen, "the scheme must be followed by \"//\"");
		return -1;
	}
	/* curl takes one to three slashes; we take exactly two. */
	auth = in + sl + 3;
	an = span(auth, len - sl - 3, "/?#");
	if (an == 0 && auth < in + len && *auth == '/') {
		set_why(whybuf, whylen, "too many slashes after the scheme");
		return -1;
	}
	if (memchr(auth, '\\', an) != NULL) {
		set_why(whybuf, whylen,
		    "backslashes are not allowed before the path");
		return -1;
	}
	if (memchr(auth, '@', an) != NULL) {
		set_why(whybuf, whylen, "userinfo is not allowed");
		return -1;
	}
	if (an == 0) {
		set_why(whybuf, whylen, "the host is empty");
		return -1;
	}
	if (authority_parse(auth, an, u, &why) == -1) {
		set_why(whybuf, whylen, why);
		return -1;
	}
	u->rest_off = (size_t)(auth + an - in);
	return 0;
}
