/* libFuzzer: the config loader on arbitrary YAML. */
#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define FUZZ_MAX	(256 << 10)

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct cfg_dirs dirs = { "/tmp/af-fuzz-data", "/tmp/af-fuzz-skills",
	    "/tmp/af-fuzz-secrets" };
	char err[1024];
	struct cfg *c;

	if (len > FUZZ_MAX)
		return 0;
	c = cfg_load_buf("fuzz.yaml", (const char *)data, len, &dirs, err,
	    sizeof(err));
	if (c != NULL) {
		struct strlist why = { 0 };

		cfg_hermetic_reasons(c, &why);
		strlist_free(&why);
		cfg_free(c);
	}
	return 0;
}
