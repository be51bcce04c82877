/* libFuzzer target for the run axis: any byte string as a command line, with
 * a fixed grant set that includes wrappers, so the parser, the wrapper option
 * parsers and the nested bash -c / eval paths are all reached. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "perm.h"
#include "shell.h"

#define FUZZ_MAX_INPUT	(64 << 10)

int LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static struct cfg_perms perms;
static int ready;

static void
setup(void)
{
	static const char *run[] = { "gh", "grep", "cat", "env", "xargs",
	    "find", "bash", "sh", "nice", "timeout", "sudo", "eval", "exec",
	    "command", "busybox", "trap", "read", "time" };

	for (size_t i = 0; i < sizeof(run) / sizeof(run[0]); i++)
		strlist_add(&perms.run, run[i]);
	strlist_add(&perms.read, "/tmp");
	strlist_add(&perms.write, "/tmp");
	ready = 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct perm_result	 res;
	struct sh_script	 sc;
	struct sh_error		 err;
	char			*s;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	if (!ready)
		setup();
	/* The parser sees the raw bytes, NULs included... */
	if (sh_parse((const char *)data, size, 0, &sc, &err) == 0)
		sh_script_free(&sc);
	if (sh_parse((const char *)data, size, SH_POSIX, &sc, &err) == 0)
		sh_script_free(&sc);
	/* ...and the engine the C string the tool would pass on. */
	s = malloc(size + 1);
	memcpy(s, data, size);
	s[size] = '\0';
	memset(&res, 0, sizeof(res));
	perm_check_run(&perms, s, &res);
	if (strlen(res.reason) >= PERM_REASON_MAX)
		abort();
	free(s);
	return 0;
}
