/* Who may read the status server's detail endpoints (/runs, /audit): they
 * show what the agent did, so they are answered to loopback clients only,
 * or, when status.token is set, to any client that presents it. Kept apart
 * from the server so the decision can be tested with made-up addresses. */
#ifndef AF_STATUS_AUTH_H
#define AF_STATUS_AUTH_H

#include <sys/socket.h>

#define STATUS_AUTH_OK		0
#define STATUS_AUTH_NEED_TOKEN	401	/* token missing or wrong */
#define STATUS_AUTH_FORBIDDEN	403	/* not loopback, and no token is set */

/* 1 for 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104. */
int status_addr_loopback(const struct sockaddr *);
/*
 * The decision for one request. peer may be NULL (unknown: not loopback);
 * authorization is the Authorization header or NULL; token is status.token
 * or NULL. With a token, only "Bearer TOKEN" passes, from any address,
 * compared in constant time.
 */
int status_authorize(const struct sockaddr *peer, const char *authorization,
    const char *token);

#endif
