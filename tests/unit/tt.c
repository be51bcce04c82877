#include "tt.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

int tt_failed_now;

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(path);
}

void
tt_rmtree(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int
tt_main(int argc, char **argv, const struct tt_case *cases)
{
	int passed = 0, failed = 0;
	const char *only = argc > 1 ? argv[1] : NULL;

	for (const struct tt_case *c = cases; c->name != NULL; c++) {
		if (only != NULL && strstr(c->name, only) == NULL)
			continue;
		tt_failed_now = 0;
		c->fn();
		if (tt_failed_now) {
			printf("FAIL %s\n", c->name);
			failed++;
		} else {
			if (getenv("TT_VERBOSE") != NULL)
				printf("ok   %s\n", c->name);
			passed++;
		}
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
