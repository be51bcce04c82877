/* `af init NAME [--trigger KIND] [--provider PROVIDER]`: a commented starter
 * NAME/agent.yaml that `af validate` accepts, so a new agent starts from a
 * file that works and explains itself. */
#ifndef AF_INIT_H
#define AF_INIT_H

#include <stddef.h>

/* The command: argv holds what follows "init". Returns the exit status (0
 * written, 1 the file exists or cannot be written, 2 usage). */
int init_main(int argc, char **argv);

/* The starter config as text (caller frees); NULL when the trigger or the
 * provider is unknown. Secret names the file references are appended to
 * secrets (comma-separated), when not NULL. */
char *init_template(const char *name, const char *trigger,
    const char *provider, char *secrets, size_t secretslen);

#endif
