/* Decisions per second of the permission engine on typical inputs, one axis
 * at a time: a few thousand warm-up calls, then about one second of calls.
 * For read and write, bare realpath(3) on the same paths runs in the same
 * process for comparison: resolving symlinks is the floor of a path check.
 * Time is this thread's CPU time (user and kernel), so that other work on a
 * busy machine does not show up as a slower engine. */
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "perm.h"

#define BENCH_WARMUP	5000
#define BENCH_NS	1000000000LL	/* one second per measure */
#define BENCH_BATCH	64
#define BENCH_SLICES	20	/* alternations in measure_pair */

static struct cfg_perms perms;
static char root[256];

static const char *net_inputs[] = {
	"https://api.github.com/repos/acme/app/issues?state=open&per_page=50",
	"https://raw.githubusercontent.com/acme/app/main/README.md",
	"api.github.com",
	"https://evil.example.net/exfil?d=abc",
};
static const char *run_inputs[] = {
	"gh issue list --limit 5",
	"grep -rn TODO src | head -20",
	"ls -la",
	"curl https://evil.example.net",
};
/* Relative to root. */
static const char *read_rel[] = {
	"/ws/src/engine/main.c",
	"/ws/README.md",
	"/ws/src/engine/../engine/perm.c",
	"/ws/docs/guide.md",
};
static const char *write_rel[] = {
	"/ws/out/report.md",		/* exists */
	"/ws/out/new-report.md",	/* to be created */
	"/ws/out/runs/2026/summary.md",	/* exists, deeper */
	"/ws/out/runs/2026/new.md",	/* to be created */
};

static char read_paths[nitems(read_rel)][PATH_MAX];
static char write_paths[nitems(write_rel)][PATH_MAX];

static long long
cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

typedef int (*bench_fn)(size_t i);

/* Runs fn for about ns nanoseconds from call number *n on; returns the time
 * it took. */
static long long
run_for(bench_fn fn, long long ns, size_t *n)
{
	long long start = cpu_ns(), el;

	do {
		for (size_t i = 0; i < BENCH_BATCH; i++, (*n)++)
			fn(*n);
		el = cpu_ns() - start;
	} while (el < ns);
	return el;
}

/* Calls fn(0), fn(1), ... for about a second; returns calls per second. */
static double
measure(bench_fn fn)
{
	size_t n = 0;
	long long el;

	for (size_t i = 0; i < BENCH_WARMUP; i++)
		fn(i);
	el = run_for(fn, BENCH_NS, &n);
	return (double)n * 1e9 / (double)el;
}

/* The same for two functions in alternating slices, so that a change in
 * the machine's load during the run weighs on both alike. */
static void
measure_pair(bench_fn a, bench_fn b, double *ra, double *rb)
{
	size_t na = 0, nb = 0;
	long long ea = 0, eb = 0;

	for (size_t i = 0; i < BENCH_WARMUP; i++) {
		a(i);
		b(i);
	}
	for (int r = 0; r < BENCH_SLICES; r++) {
		ea += run_for(a, BENCH_NS / BENCH_SLICES, &na);
		eb += run_for(b, BENCH_NS / BENCH_SLICES, &nb);
	}
	*ra = (double)na * 1e9 / (double)ea;
	*rb = (double)nb * 1e9 / (double)eb;
}

static int
do_net(size_t i)
{
	struct perm_result res;

	return perm_check_net(&perms, net_inputs[i % nitems(net_inputs)], &res);
}

static int
do_run(size_t i)
{
	struct perm_result res;

	return perm_check_run(&perms, run_inputs[i % nitems(run_inputs)], &res);
}

static int
do_read(size_t i)
{
	struct perm_result res;

	return perm_check_path(&perms, PERM_READ,
	    read_paths[i % nitems(read_paths)], &res);
}

static int
do_write(size_t i)
{
	struct perm_result res;

	return perm_check_path(&perms, PERM_WRITE,
	    write_paths[i % nitems(write_paths)], &res);
}

static int
real_read(size_t i)
{
	char out[PATH_MAX];

	return realpath(read_paths[i % nitems(read_paths)], out) != NULL;
}

static int
real_write(size_t i)
{
	char out[PATH_MAX];

	return realpath(write_paths[i % nitems(write_paths)], out) != NULL;
}

static void
mkfile(const char *rel)
{
	char p[PATH_MAX];
	int fd;

	snprintf(p, sizeof(p), "%s%s", root, rel);
	if ((fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0600)) == -1) {
		perror(p);
		exit(1);
	}
	close(fd);
}

static void
mkdirs(const char *rel)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s%s", root, rel);
	if (mkdir(p, 0700) == -1) {
		perror(p);
		exit(1);
	}
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void
setup(void)
{
	char tmpl[] = "/tmp/af-bench-XXXXXX", p[PATH_MAX];
	static const char *dirs[] = { "/ws", "/ws/src", "/ws/src/engine",
	    "/ws/docs", "/ws/out", "/ws/out/runs", "/ws/out/runs/2026" };
	static const char *files[] = { "/ws/src/engine/main.c",
	    "/ws/src/engine/perm.c", "/ws/README.md", "/ws/out/report.md",
	    "/ws/out/runs/2026/summary.md" };

	if (mkdtemp(tmpl) == NULL || realpath(tmpl, root) == NULL) {
		perror("mkdtemp");
		exit(1);
	}
	for (size_t i = 0; i < nitems(dirs); i++)
		mkdirs(dirs[i]);
	for (size_t i = 0; i < nitems(files); i++)
		mkfile(files[i]);
	/* docs/guide.md is a symlink inside the workspace, as checkouts have. */
	snprintf(p, sizeof(p), "%s/ws/docs/guide.md", root);
	if (symlink("../README.md", p) == -1) {
		perror(p);
		exit(1);
	}
	for (size_t i = 0; i < nitems(read_rel); i++)
		snprintf(read_paths[i], sizeof(read_paths[i]), "%s%s", root,
		    read_rel[i]);
	for (size_t i = 0; i < nitems(write_rel); i++)
		snprintf(write_paths[i], sizeof(write_paths[i]), "%s%s", root,
		    write_rel[i]);

	strlist_add(&perms.net, "api.github.com");
	strlist_add(&perms.net, "*.githubusercontent.com");
	strlist_add(&perms.net, "api.anthropic.com");
	strlist_add(&perms.net, "127.0.0.1");
	strlist_add(&perms.run, "gh");
	strlist_add(&perms.run, "grep");
	strlist_add(&perms.run, "head");
	strlist_add(&perms.run, "ls");
	strlist_add(&perms.read, "/usr/share/doc");
	snprintf(p, sizeof(p), "%s/ws", root);
	strlist_add(&perms.read, p);
	snprintf(p, sizeof(p), "%s/ws/out", root);
	strlist_add(&perms.write, p);
}

int
main(void)
{
	double net, run, rd, wr, rrd, rwr;
	struct perm_result res;

	setup();
	/* The inputs must decide as intended, or the numbers mean nothing. */
	if (!perm_check_path(&perms, PERM_READ, read_paths[3], &res) ||
	    !perm_check_path(&perms, PERM_WRITE, write_paths[1], &res) ||
	    !perm_check_net(&perms, net_inputs[1], &res)) {
		fprintf(stderr, "bench: unexpected denial: %s\n", res.reason);
		return 1;
	}
	net = measure(do_net);
	run = measure(do_run);
	measure_pair(do_read, real_read, &rd, &rrd);
	measure_pair(do_write, real_write, &wr, &rwr);
	printf("net      %.0f decisions/s\n", net);
	printf("run      %.0f decisions/s\n", run);
	printf("read     %.0f decisions/s  (realpath %.0f/s, ratio %.2fx)\n",
	    rd, rrd, rrd / rd);
	printf("write    %.0f decisions/s  (realpath %.0f/s, ratio %.2fx)\n",
	    wr, rwr, rwr / wr);
	nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
