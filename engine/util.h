/* Small shared helpers: allocation that aborts on exhaustion, logging, a growable
 * byte buffer and a string list. Everything else in af builds on these. */
#ifndef AF_UTIL_H
#define AF_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#define AF_VERSION "0.1.0"

#define nitems(a) (sizeof(a) / sizeof((a)[0]))

#if defined(__GNUC__)
#define AF_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define AF_NORETURN __attribute__((noreturn))
#else
#define AF_PRINTF(f, a)
#define AF_NORETURN
#endif

void *xmalloc(size_t);
void *xcalloc(size_t, size_t);
void *xrealloc(void *, size_t);
void *xreallocarray(void *, size_t, size_t);
char *xstrdup(const char *);
char *xstrndup(const char *, size_t);
char *xasprintf(const char *, ...) AF_PRINTF(1, 2);

/* Logging: one line each on stderr, text or JSON lines (log_init). */
enum log_format { LOG_TEXT, LOG_JSON };
void log_init(enum log_format, int verbose);
void log_warn(const char *, ...) AF_PRINTF(1, 2);   /* appends strerror(errno) */
void log_warnx(const char *, ...) AF_PRINTF(1, 2);
void log_info(const char *, ...) AF_PRINTF(1, 2);
void log_debug(const char *, ...) AF_PRINTF(1, 2);
void fatal(const char *, ...) AF_PRINTF(1, 2) AF_NORETURN;
void fatalx(const char *, ...) AF_PRINTF(1, 2) AF_NORETURN;
/* Strings that must never reach a log line (secret values); log_* redacts them. */
void log_redact_add(const char *);

/* A growable byte buffer, always NUL-terminated. */
struct buf {
	char	*data;
	size_t	 len;
	size_t	 cap;
};
void buf_init(struct buf *);
void buf_free(struct buf *);
void buf_reset(struct buf *);
void buf_add(struct buf *, const void *, size_t);
void buf_adds(struct buf *, const char *);
void buf_addc(struct buf *, char);
void buf_addf(struct buf *, const char *, ...) AF_PRINTF(2, 3);
char *buf_steal(struct buf *);	/* caller owns the result; buffer is reset */

/* A list of owned strings. */
struct strlist {
	char	**v;
	size_t	  n;
};
void strlist_add(struct strlist *, const char *);	/* copies */
void strlist_free(struct strlist *);
int strlist_has(const struct strlist *, const char *);

/* A copy of s with every value of secrets replaced by "[REDACTED]". */
char *redact_secrets(const char *s, const struct strlist *secrets);

/* Wall-clock and monotonic time in milliseconds. */
int64_t now_ms(void);
int64_t mono_ms(void);
/* ISO 8601 UTC with milliseconds: 2026-12-02T03:00:00.123Z (needs 25 bytes). */
void fmt_time_iso(int64_t ms, char *out, size_t outlen);

/* Constant-time comparison of two byte strings of the same length. */
int ct_equal(const void *, const void *, size_t);

/* Read a whole file, at most max bytes; -1 with errno (EFBIG when too large). */
int read_file_max(const char *path, size_t max, struct buf *out);

/* Parse "500ms", "30s", "5m", "1h" into milliseconds; -1 when malformed. */
int64_t parse_duration(const char *);

/* Exponential backoff with jitter: returns a delay drawn from [d/2, d] where
 * d is *cur (at least min), then doubles *cur up to max. Reset *cur to 0 after
 * a success. */
long backoff_next(long *cur, long min, long max);

/* Random bytes from getrandom(2); aborts if the kernel cannot provide them. */
void random_bytes(void *, size_t);
/* A fresh id such as "r-3f9a1c0d2e4b5a69" (prefix + 16 hex digits). */
void make_id(const char *prefix, char *out, size_t outlen);
/* prefix + 24 hex digits: the time in seconds, a counter, 32 random bits.
 * Ids made later sort later, so a B-tree index of them (the journal's)
 * grows at its right edge instead of touching a random page per insert.
 * One thread only (run ids are made on the loop's). */
void make_sorted_id(const char *prefix, char *out, size_t outlen);

#endif
