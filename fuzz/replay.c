/*
 * A main() for the fuzz targets outside libFuzzer: each file named on the
 * command line is read whole and handed to LLVMFuzzerTestOneInput once. The
 * Makefile links it with each target and the plain library for `make
 * valgrind`, which runs the corpora under Valgrind: memory errors that the
 * sanitizers do not see (reads of uninitialised memory) and leaks, in the
 * binary as gcc builds it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
main(int argc, char **argv)
{
	struct buf b;
	int n = 0;

	for (int i = 1; i < argc; i++) {
		buf_init(&b);
		if (read_file_max(argv[i], 1 << 20, &b) == -1) {
			fprintf(stderr, "replay: %s: %s\n", argv[i],
			    strerror(errno));
			buf_free(&b);
			return 2;
		}
		LLVMFuzzerTestOneInput((const uint8_t *)(b.data ? b.data : ""),
		    b.len);
		buf_free(&b);
		n++;
	}
	printf("replay: %d input%s\n", n, n == 1 ? "" : "s");
	return 0;
}
