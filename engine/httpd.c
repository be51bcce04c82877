/*
 * Per-request deadlines for evhttp servers (see httpd.h).
 *
 * libevent 2.1 has no hook for a new connection, nor one for its end, but it
 * lets the server make each connection's bufferevent (evhttp_set_bevcb). We
 * make the usual socket bufferevent, watch its input buffer so that the first
 * byte of each request arms the deadline, and keep a reference to it so that
 * it stays valid memory until we have seen evhttp let go of it (evhttp
 * clears its callbacks when it frees a connection); a sweep each second
 * drops those. A request that arrives whole reaches on_request, which
 * disarms the deadline; the connection is found there by its descriptor,
 * unique among the connections evhttp still holds.
 *
 * (A filtering bufferevent would see the bytes too, but evhttp 2.1 on a
 * filter stalls the second response of a kept-alive connection and loses
 * the last one before a close.)
 */
#include "httpd.h"

#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define HTTPD_SWEEP_S	1

struct conn {
	LIST_ENTRY(conn)	 entry;
	struct httpd		*srv;
	struct bufferevent	*bev;		/* one reference is ours */
	struct event		*deadline;
	int			 fd;		/* -1 until the first byte */
};

static LIST_HEAD(, conn)  conns = LIST_HEAD_INITIALIZER(conns);
static struct conn	**byfd;			/* live connections by fd */
static size_t		  nbyfd;
static struct event	 *sweeper;
static unsigned long	  nexpired;

static int
gone(const struct conn *c)
{
	bufferevent_data_cb r, w;
	bufferevent_event_cb e;

	bufferevent_getcb(c->bev, &r, &w, &e, NULL);
	return r == NULL && w == NULL && e == NULL;
}

static struct conn *
find(int fd)
{
	struct conn *c = fd >= 0 && (size_t)fd < nbyfd ? byfd[fd] : NULL;

	return c != NULL && !gone(c) ? c : NULL;
}

static void
track(struct conn *c, int fd)
{
	if ((size_t)fd >= nbyfd) {
		size_t n = nbyfd == 0 ? 256 : nbyfd;

		while (n <= (size_t)fd)
			n *= 2;
		byfd = xreallocarray(byfd, n, sizeof(*byfd));
		memset(byfd + nbyfd, 0, (n - nbyfd) * sizeof(*byfd));
		nbyfd = n;
	}
	byfd[fd] = c;
	c->fd = fd;
}

static void
release(struct conn *c)
{
	if (c->fd >= 0 && (size_t)c->fd < nbyfd && byfd[c->fd] == c)
		byfd[c->fd] = NULL;
	LIST_REMOVE(c, entry);
	event_free(c->deadline);
	bufferevent_decref(c->bev);
	free(c);
}

/* Hand back the connections evhttp has freed (and with them, through the
 * last reference, their sockets). */
static void
sweep(evutil_socket_t unused, short what, void *arg)
{
	struct conn *c, *next;

	for (c = LIST_FIRST(&conns); c != NULL; c = next) {
		next = LIST_NEXT(c, entry);
		if (gone(c))
			release(c);
	}
}

/* The deadline passed with the request still incomplete. Shutting the socket
 * down makes evhttp read the end of the stream and free the connection in
 * its own time. */
static void
expire(evutil_socket_t unused, short what, void *arg)
{
	struct conn *c = arg;

	if (gone(c) || c->fd < 0)
		return;
	nexpired++;
	log_info("%s: a request took longer than %d s to arrive; its "
	    "connection is closed", c->srv->name, c->srv->request_s);
	shutdown(c->fd, SHUT_RDWR);
}

/* Bytes came in: the first of a request starts its clock. */
static void
input_added(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct conn *c = arg;
	struct timeval tv;
	int fd;

	if (info->n_added == 0 || evtimer_pending(c->deadline, NULL))
		return;
	if ((fd = bufferevent_getfd(c->bev)) >= 0 && c->fd != fd)
		track(c, fd);
	tv.tv_sec = c->srv->request_s;
	tv.tv_usec = 0;
	evtimer_add(c->deadline, &tv);
}

static struct bufferevent *
new_conn(struct event_base *base, void *arg)
{
	struct conn *c = xcalloc(1, sizeof(*c));
	struct timeval tv = { HTTPD_SWEEP_S, 0 };

	c->srv = arg;
	c->fd = -1;
	if ((c->bev = bufferevent_socket_new(base, -1,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL ||
	    (c->deadline = evtimer_new(base, expire, c)) == NULL ||
	    evbuffer_add_cb(bufferevent_get_input(c->bev), input_added,
	    c) == NULL)
		fatalx("%s: out of memory for a connection", c->srv->name);
	bufferevent_incref(c->bev);
	LIST_INSERT_HEAD(&conns, c, entry);
	if (sweeper == NULL) {
		if ((sweeper = event_new(base, -1, EV_PERSIST, sweep,
		    NULL)) == NULL)
			fatalx("%s: out of memory", c->srv->name);
		evtimer_add(sweeper, &tv);
	}
	return c->bev;
}

static void
on_request(struct evhttp_request *req, void *arg)
{
	struct httpd *h = arg;
	struct evhttp_connection *evc = evhttp_request_get_connection(req);
	struct bufferevent *bev = evc != NULL ?
	    evhttp_connection_get_bufferevent(evc) : NULL;
	struct conn *c = bev != NULL ? find(bufferevent_getfd(bev)) : NULL;

	if (c != NULL && c->bev == bev)
		evtimer_del(c->deadline);
	h->cb(req, h->arg);
}

void
httpd_setup(struct httpd *h, struct evhttp *http, const char *name,
    const struct httpd_limits *lim,
    void (*cb)(struct evhttp_request *, void *), void *arg)
{
	h->name = name;
	h->request_s = lim->request_s;
	h->cb = cb;
	h->arg = arg;
	evhttp_set_max_body_size(http, (ev_ssize_t)lim->max_body);
	evhttp_set_max_headers_size(http, (ev_ssize_t)lim->max_headers);
	evhttp_set_timeout(http, lim->idle_s);
	/* Let every method through so that the answer is 405, not 501. */
	evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
	    EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
	    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT |
	    EVHTTP_REQ_PATCH);
	evhttp_set_bevcb(http, new_conn, h);
	evhttp_set_gencb(http, on_request, h);
}

void
httpd_shutdown(void)
{
	struct conn *c;

	while ((c = LIST_FIRST(&conns)) != NULL)
		release(c);
	if (sweeper != NULL)
		event_free(sweeper);
	sweeper = NULL;
	free(byfd);
	byfd = NULL;
	nbyfd = 0;
}

unsigned long
httpd_expired(void)
{
	return nexpired;
}
