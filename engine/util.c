#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL)
		fatalx("out of memory (%zu bytes)", n);
	return p;
}

void *
xcalloc(size_t nmemb, size_t size)
{
	void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);

	if (p == NULL)
		fatalx("out of memory (%zu x %zu bytes)", nmemb, size);
	return p;
}

void *
xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (q == NULL)
		fatalx("out of memory (%zu bytes)", n);
	return q;
}

void *
xreallocarray(void *p, size_t nmemb, size_t size)
{
	if (size != 0 && nmemb > SIZE_MAX / size)
		fatalx("allocation overflow (%zu x %zu)", nmemb, size);
	return xrealloc(p, nmemb * size);
}

char *
xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

char *
xstrndup(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);

	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

char *
xasprintf(const char *fmt, ...)
{
	struct buf b;
	va_list ap;

	buf_init(&b);
	va_start(ap, fmt);
	{
		va_list ap2;
		int n;

		va_copy(ap2, ap);
		n = vsnprintf(NULL, 0, fmt, ap2);
		va_end(ap2);
		if (n < 0)
			fatalx("xasprintf: bad format");
		b.data = xmalloc((size_t)n + 1);
		vsnprintf(b.data, (size_t)n + 1, fmt, ap);
	}
	va_end(ap);
	return b.data;
}

/* Logging. */

static enum log_format log_fmt = LOG_TEXT;
static int log_verbose;
static struct strlist log_secrets;

void
log_init(enum log_format f, int verbose)
{
	log_fmt = f;
	log_verbose = verbose;
}

void
log_redact_add(const char *s)
{
	if (s != NULL && *s != '\0' && !strlist_has(&log_secrets, s))
		strlist_add(&log_secrets, s);
}

static void
json_escape_into(struct buf *out, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			buf_addf(out, "\\%c", c);
		else if (c < 0x20)
			buf_addf(out, "\\u%04x", c);
		else
			buf_addc(out, (char)c);
	}
}

static void
vlog(const char *level, int with_errno, const char *fmt, va_list ap)
{
	int saved = errno;
	struct buf msg, line;
	char ts[32];
	va_list ap2;
	int n;

	buf_init(&msg);
	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n > 0) {
		msg.data = xrealloc(msg.data, (size_t)n + 1);
		vsnprintf(msg.data, (size_t)n + 1, fmt, ap);
		msg.len = (size_t)n;
		msg.cap = (size_t)n + 1;
	}
	if (with_errno)
		buf_addf(&msg, ": %s", strerror(saved));
	/* A library error message may quote a header or URL that carries a
	 * secret. */
	if (log_secrets.n > 0 && msg.data != NULL) {
		char *red = redact_secrets(msg.data, &log_secrets);

		buf_reset(&msg);
		buf_adds(&msg, red);
		free(red);
	}

	buf_init(&line);
	fmt_time_iso(now_ms(), ts, sizeof(ts));
	if (log_fmt == LOG_JSON) {
		buf_addf(&line, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"", ts,
		    level);
		json_escape_into(&line, msg.data);
		buf_adds(&line, "\"}\n");
	} else
		buf_addf(&line, "%s af[%s]: %s\n", ts, level, msg.data);
	(void)!write(STDERR_FILENO, line.data, line.len);
	buf_free(&line);
	buf_free(&msg);
	errno = saved;
}

#define LOGFN(name, level, err)						\
	void name(const char *fmt, ...)					\
	{								\
		va_list ap;						\
		va_start(ap, fmt);					\
		vlog(level, err, fmt, ap);				\
		va_end(ap);						\
	}

LOGFN(log_warn, "warn", 1)
LOGFN(log_warnx, "warn", 0)
LOGFN(log_info, "info", 0)

void
log_debug(const char *fmt, ...)
{
	va_list ap;

	if (!log_verbose)
		return;
	va_start(ap, fmt);
	vlog("debug", 0, fmt, ap);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog("fatal", 1, fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog("fatal", 0, fmt, ap);
	va_end(ap);
	exit(1);
}

/* Buffers. */

void
buf_init(struct buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void
buf_free(struct buf *b)
{
	free(b->data);
	buf_init(b);
}

void
buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data != NULL)
		b->data[0] = '\0';
}

static void
buf_grow(struct buf *b, size_t more)
{
	size_t need;

	if (more > SIZE_MAX - b->len - 1)
		fatalx("buffer overflow");
	need = b->len + more + 1;
	if (need <= b->cap)
		return;
	if (b->cap == 0)
		b->cap = 64;
	while (b->cap < need)
		b->cap = b->cap > SIZE_MAX / 2 ? need : b->cap * 2;
	b->data = xrealloc(b->data, b->cap);
}

void
buf_add(struct buf *b, const void *p, size_t n)
{
	buf_grow(b, n);
	if (n > 0)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void
buf_adds(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

void
buf_addc(struct buf *b, char c)
{
	buf_add(b, &c, 1);
}

void
buf_addf(struct buf *b, const char *fmt, ...)
{
	va_list ap, ap2;
	int n;

	va_start(ap, fmt);
	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		fatalx("buf_addf: bad format");
	buf_grow(b, (size_t)n);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	va_end(ap);
}

char *
buf_steal(struct buf *b)
{
	char *p = b->data != NULL ? b->data : xstrdup("");

	buf_init(b);
	return p;
}

/* String lists. */

void
strlist_add(struct strlist *l, const char *s)
{
	l->v = xreallocarray(l->v, l->n + 1, sizeof(*l->v));
	l->v[l->n++] = xstrdup(s);
}

/* Every byte that is part of an occurrence of any secret is covered, and each
 * covered stretch becomes one "[REDACTED]": overlapping secrets leave no
 * piece of either behind, and what is put in is never searched again. */
char *
redact_secrets(const char *s, const struct strlist *secrets)
{
	size_t n = strlen(s);
	unsigned char *cover = NULL;
	struct buf b;

	for (size_t i = 0; secrets != NULL && i < secrets->n; i++) {
		const char *sec = secrets->v[i], *p = s;
		size_t sl = strlen(sec);

		while (sl > 0 && (p = strstr(p, sec)) != NULL) {
			if (cover == NULL)
				cover = xcalloc(n, 1);
			memset(cover + (p - s), 1, sl);
			p++;
		}
	}
	if (cover == NULL)
		return xstrdup(s);
	buf_init(&b);
	for (size_t i = 0; i < n;) {
		size_t j = i;

		while (j < n && cover[j] == cover[i])
			j++;
		if (cover[i])
			buf_adds(&b, "[REDACTED]");
		else
			buf_add(&b, s + i, j - i);
		i = j;
	}
	free(cover);
	return buf_steal(&b);
}

void
strlist_free(struct strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

int
strlist_has(const struct strlist *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i], s) == 0)
			return 1;
	return 0;
}

/* Time. */

int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
fmt_time_iso(int64_t ms, char *out, size_t outlen)
{
	time_t secs = (time_t)(ms / 1000);
	struct tm tm;
	char base[24];

	gmtime_r(&secs, &tm);
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, outlen, "%s.%03dZ", base, (int)(ms % 1000));
}

int
ct_equal(const void *a, const void *b, size_t n)
{
	const volatile unsigned char *x = a, *y = b;
	unsigned char d = 0;

	for (size_t i = 0; i < n; i++)
		d |= x[i] ^ y[i];
	return d == 0;
}

int
read_file_max(const char *path, size_t max, struct buf *out)
{
	char chunk[8192];
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	buf_reset(out);
	while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
		if (n == -1) {
			if (errno == EINTR)
				continue;
			close(fd);
			return -1;
		}
		if (out->len + (size_t)n > max) {
			close(fd);
			errno = EFBIG;
			return -1;
		}
		buf_add(out, chunk, (size_t)n);
	}
	close(fd);
	if (out->data == NULL)
		buf_add(out, "", 0);
	return 0;
}

int64_t
parse_duration(const char *s)
{
	int64_t v = 0, mult;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -1;
	while (*p >= '0' && *p <= '9') {
		if (v > INT64_MAX / 10 / 3600000)
			return -1;
		v = v * 10 + (*p++ - '0');
	}
	if (strcmp(p, "ms") == 0)
		mult = 1;
	else if (strcmp(p, "s") == 0)
		mult = 1000;
	else if (strcmp(p, "m") == 0)
		mult = 60000;
	else if (strcmp(p, "h") == 0)
		mult = 3600000;
	else
		return -1;
	return v * mult;
}

static void
random_fill(unsigned char *c, size_t n)
{
	while (n > 0) {
		ssize_t r = getrandom(c, n, 0);

		if (r == -1) {
			if (errno == EINTR)
				continue;
			fatal("getrandom");
		}
		c += r;
		n -= (size_t)r;
	}
}

/* Ids are drawn per accepted event, so the kernel's bytes come in blocks
 * rather than one getrandom(2) each; the pool is per thread (the Discord and
 * IMAP workers draw too), and a drawn byte is wiped so it is never handed
 * out twice. */
#define RANDOM_POOL	256

void
random_bytes(void *p, size_t n)
{
	static _Thread_local unsigned char pool[RANDOM_POOL];
	static _Thread_local size_t left;
	unsigned char *c = p;

	if (n > RANDOM_POOL / 4) {
		random_fill(c, n);
		return;
	}
	if (left < n) {
		random_fill(pool, sizeof(pool));
		left = sizeof(pool);
	}
	memcpy(c, pool + sizeof(pool) - left, n);
	explicit_bzero(pool + sizeof(pool) - left, n);
	left -= n;
}

void
make_id(const char *prefix, char *out, size_t outlen)
{
	unsigned char r[8];

	random_bytes(r, sizeof(r));
	snprintf(out, outlen, "%s%02x%02x%02x%02x%02x%02x%02x%02x", prefix,
	    r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
}

void
make_sorted_id(const char *prefix, char *out, size_t outlen)
{
	static uint32_t counter;
	static int seeded;
	uint32_t r;

	/* A counter from a random start orders the ids made within one
	 * second; the random tail keeps them unguessable, and unique against
	 * an earlier process's ids from the same second. */
	if (!seeded) {
		random_bytes(&counter, sizeof(counter));
		seeded = 1;
	}
	random_bytes(&r, sizeof(r));
	snprintf(out, outlen, "%s%08llx%08x%08x", prefix,
	    (unsigned long long)(now_ms() / 1000) & 0xffffffffull, counter++,
	    r);
}

/* The jitter keeps many daemons restarting together from retrying in step. */
long
backoff_next(long *cur, long min, long max)
{
	long d = *cur < min ? min : *cur;
	uint32_t r;

	*cur = d >= max / 2 ? max : d * 2;
	random_bytes(&r, sizeof(r));
	return d / 2 + (long)(r % (uint32_t)(d / 2 + 1));
}
