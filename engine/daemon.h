/* `af run`: start-up in the order the sandbox needs, the loop, the drain. */
#ifndef AF_DAEMON_H
#define AF_DAEMON_H

#include "config.h"

#define DAEMON_EXIT_OK		0
#define DAEMON_EXIT_RUNTIME	1
#define DAEMON_EXIT_CONFIG	2

/* Resolves the config's secrets, runs until SIGTERM/SIGINT and the drain;
 * returns the process exit status. */
int daemon_run(struct cfg *);

#endif
