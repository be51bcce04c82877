/* The status server (SPEC section 5): /healthz, /status and /metrics on its
 * own listener (status.listen, default 127.0.0.1:9090). Read-only: it shows
 * counters and states, never a secret or an event's content. */
#ifndef AF_STATUS_H
#define AF_STATUS_H

#include <stddef.h>

#include "config.h"

#define STATUS_MAX_BODY		(4 << 10)	/* requests carry no body */
#define STATUS_MAX_HEADERS	(16 << 10)	/* larger header blocks get 400 */
#define STATUS_TIMEOUT_S	10		/* idle read/write, per connection */
#define STATUS_REQUEST_S	20		/* first byte to whole request */

/* Bind the listener (before the sandbox) on the loop's base, which must
 * exist; logs "status listening on HOST:PORT" with the port actually bound.
 * cfg must outlive the server. */
int status_prepare(const struct cfg *, char *err, size_t errlen);
/* Start accepting connections (after the sandbox). 0, or -1. */
int status_start(void);
/* Close the listening socket; open connections live until status_free. */
void status_stop(void);
/* Free the server and its connections (after the loop has ended). */
void status_free(void);

#endif
