/* The floor under af's webhook rate: af commits each accepted event to SQLite
 * (WAL, synchronous=FULL) before it answers 202. strace of af while it
 * accepts shows what one commit does: three WAL frames (a 24-byte header and
 * a 4 KiB page each: the journal table and its two indexes) and one
 * fdatasync. This times exactly that on the same file system, with no SQLite
 * around it, for about a second.
 *
 *     fsync_floor DIR
 *
 * Prints one line of JSON: {"syncs":N,"per_s":R,"p50_us":X,"p99_us":Y}. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FF_FRAMES	3		/* WAL frames per commit */
#define FF_RECORD	(FF_FRAMES * (24 + 4096))	/* bytes per commit */
#define FF_NS		1000000000LL	/* measure about this long */
#define FF_MAX		100000		/* samples kept */

static long long
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int
cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	static long long lat[FF_MAX];
	char path[4096], rec[FF_RECORD];
	long long start, t;
	size_t n = 0;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: fsync_floor DIR\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/fsync_floor.%ld", argv[1],
	    (long)getpid());
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND |
	    O_NOFOLLOW | O_CLOEXEC, 0600)) == -1) {
		fprintf(stderr, "fsync_floor: %s: %s\n", path, strerror(errno));
		return 1;
	}
	memset(rec, 'x', sizeof(rec));
	start = now_ns();
	do {
		t = now_ns();
		if (write(fd, rec, sizeof(rec)) != (ssize_t)sizeof(rec) ||
		    fdatasync(fd) == -1) {
			fprintf(stderr, "fsync_floor: %s: %s\n", path,
			    strerror(errno));
			close(fd);
			unlink(path);
			return 1;
		}
		lat[n++] = now_ns() - t;
	} while (now_ns() - start < FF_NS && n < FF_MAX);
	t = now_ns() - start;
	close(fd);
	unlink(path);
	qsort(lat, n, sizeof(lat[0]), cmp_ll);
	printf("{\"syncs\":%zu,\"per_s\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f}\n",
	    n, (double)n * 1e9 / (double)t, lat[n / 2] / 1e3,
	    lat[(n * 99) / 100] / 1e3);
	return 0;
}
