/* The server side every evhttp listener shares (webhook, GitHub, status):
 * the size limits, the methods let through, and a deadline per request.
 *
 * evhttp's own timeout is an idle timer that every byte resets, so a client
 * that trickles one header line every few seconds (slow loris) would hold its
 * connection, and a descriptor, for as long as it likes. Here a request must
 * arrive whole within request_s of its first byte, or its connection is shut. */
#ifndef AF_HTTPD_H
#define AF_HTTPD_H

#include <stddef.h>

#include <event2/http.h>

struct httpd_limits {
	size_t	max_body;	/* larger bodies get 413 */
	size_t	max_headers;	/* larger header blocks get 400 */
	int	idle_s;		/* evhttp's idle read/write timeout */
	int	request_s;	/* first byte to whole request */
};

/* One server; owned by its caller, and kept until its evhttp is freed. */
struct httpd {
	const char	*name;		/* for logs; not copied */
	int		 request_s;
	void		(*cb)(struct evhttp_request *, void *);
	void		*arg;
};

/* Set the limits on http and route its requests to cb (which answers each
 * one). */
void httpd_setup(struct httpd *, struct evhttp *http, const char *name,
    const struct httpd_limits *lim,
    void (*cb)(struct evhttp_request *, void *), void *arg);

/* After every server's evhttp is freed: hand back what is left. */
void httpd_shutdown(void);

/* Connections shut for missing their deadline, since start. */
unsigned long httpd_expired(void);

#endif
