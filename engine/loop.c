/* The event loop: one libevent base, the cross-thread post queue, one-shot
 * timers, signals and the drained stop. */
#include <sys/queue.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "loop.h"
#include "util.h"

/* How long runs in flight get to finish after SIGTERM or SIGINT. */
#define LOOP_DRAIN_MS		30000
/* How often a stop in progress checks whether the runs have drained. */
#define LOOP_DRAIN_POLL_MS	50

/*
 * Runs in flight, from engine/run.c. Weak so that the unit tests of this file
 * link without the run engine; absent, nothing is in flight. A weak reference
 * does not pull run.o out of libaf.a by itself, which is fine: af references
 * run.o strongly from main.c, so the real one is always there in the binary.
 */
extern long run_inflight(void) __attribute__((weak));

struct loop_post {
	STAILQ_ENTRY(loop_post)	 entry;
	void			(*fn)(void *);
	void			*arg;
};
STAILQ_HEAD(loop_posts, loop_post);

struct loop_timer {
	TAILQ_ENTRY(loop_timer)	 entry;
	struct event		*ev;
	void			(*fn)(void *);
	void			*arg;
	int			 firing;
};
TAILQ_HEAD(loop_timers, loop_timer);

struct loop_stopcb {
	STAILQ_ENTRY(loop_stopcb) entry;
	void			(*fn)(void *);
	void			*arg;
};
STAILQ_HEAD(loop_stopcbs, loop_stopcb);

static struct event_base	*base;
static struct event		*post_ev;
static struct event		*drain_ev;
static const int		 loop_sigs[] = { SIGTERM, SIGINT, SIGHUP };
static struct event		*sig_evs[nitems(loop_sigs)];
static pthread_mutex_t		 post_mtx = PTHREAD_MUTEX_INITIALIZER;
static struct loop_posts	 posts = STAILQ_HEAD_INITIALIZER(posts);
static struct loop_timers	 timers = TAILQ_HEAD_INITIALIZER(timers);
static struct loop_stopcbs	 stopcbs = STAILQ_HEAD_INITIALIZER(stopcbs);
static int			 stopping;
static int64_t			 drain_deadline;

static void post_run(evutil_socket_t, short, void *);
static void drain_check(evutil_socket_t, short, void *);
static void on_signal(evutil_socket_t, short, void *);

/* Thread support must be on before the base exists: worker threads wake it
 * through loop_post, and libevent only makes a base lockable at creation. */
int
loop_init(void)
{
	if (base != NULL)
		return 0;
	if (evthread_use_pthreads() == -1) {
		log_warnx("loop: libevent has no pthread support");
		return -1;
	}
	if ((base = event_base_new()) == NULL) {
		log_warnx("loop: cannot create the event base");
		return -1;
	}
	/* A peer that closes its end must give EPIPE, not kill af. */
	signal(SIGPIPE, SIG_IGN);

	post_ev = event_new(base, -1, 0, post_run, NULL);
	drain_ev = event_new(base, -1, EV_PERSIST, drain_check, NULL);
	if (post_ev == NULL || drain_ev == NULL)
		goto fail;
	for (size_t i = 0; i < nitems(loop_sigs); i++) {
		sig_evs[i] = evsignal_new(base, loop_sigs[i], on_signal, NULL);
		if (sig_evs[i] == NULL || evsignal_add(sig_evs[i], NULL) == -1)
			goto fail;
	}
	stopping = 0;
	return 0;
fail:
	log_warnx("loop: cannot set up the loop's own events");
	loop_free();
	return -1;
}

struct event_base *
loop_base(void)
{
	return base;
}

/* Returns 0 once a requested stop has finished (drained, or cut short by the
 * drain bound or a second signal); -1 if the loop failed or ran dry without a
 * stop, which would mean every event af depends on is gone. */
int
loop_run(void)
{
	if (base == NULL)
		return -1;
	if (event_base_dispatch(base) == -1) {
		log_warnx("loop: event dispatch failed");
		return -1;
	}
	if (!stopping) {
		log_warnx("loop: the loop ran out of events");
		return -1;
	}
	return 0;
}

static long holds;

void
loop_hold(void)
{
	holds++;
}

void
loop_release(void)
{
	if (holds > 0)
		holds--;
}

/* Runs in flight, and other work that holds the drain open. */
static long
inflight(void)
{
	return holds + (run_inflight == NULL ? 0 : run_inflight());
}

/* Runs on the loop while a stop drains: exit as soon as nothing is in
 * flight, or when the bound passes, whichever comes first. */
static void
drain_check(evutil_socket_t fd, short what, void *arg)
{
	long n;

	if ((n = inflight()) <= 0) {
		log_info("loop: drained, stopping");
		event_base_loopexit(base, NULL);
		return;
	}
	if (mono_ms() >= drain_deadline) {
		log_warnx("loop: stopping with %ld run(s) or replies still in "
		    "flight", n);
		event_base_loopexit(base, NULL);
	}
}

void
loop_stop(long drain_ms)
{
	struct timeval tv = { 0, LOOP_DRAIN_POLL_MS * 1000 };
	struct loop_stopcb *s;
	int64_t deadline;

	if (base == NULL)
		return;
	if (drain_ms < 0)
		drain_ms = 0;
	deadline = mono_ms() + drain_ms;
	if (stopping) {
		/* A later stop may only shorten the drain, never extend it. */
		if (deadline < drain_deadline)
			drain_deadline = deadline;
		event_active(drain_ev, EV_TIMEOUT, 0);
		return;
	}
	stopping = 1;
	drain_deadline = deadline;
	log_info("loop: stopping, draining for up to %ld ms", drain_ms);

	/* Each callback runs once; the list is consumed so that a callback
	 * registering another one cannot make this loop run forever. */
	while ((s = STAILQ_FIRST(&stopcbs)) != NULL) {
		STAILQ_REMOVE_HEAD(&stopcbs, entry);
		s->fn(s->arg);
		free(s);
	}
	event_add(drain_ev, &tv);
	event_active(drain_ev, EV_TIMEOUT, 0);
}

int
loop_stopping(void)
{
	return stopping;
}

/* Libevent turns the signal into an ordinary callback on the loop, so the
 * stop runs outside signal context. A second SIGTERM or SIGINT means the
 * operator will not wait for the drain. */
static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	const char *name = sig == SIGTERM ? "SIGTERM" : "SIGINT";

	switch (sig) {
	case SIGHUP:
		log_info("loop: SIGHUP ignored: af does not reload; restart it to "
		    "change its config or capabilities");
		break;
	case SIGTERM:
	case SIGINT:
		if (stopping) {
			log_warnx("loop: %s again, stopping without draining",
			    name);
			loop_stop(0);
		} else {
			log_info("loop: %s", name);
			loop_stop(LOOP_DRAIN_MS);
		}
		break;
	}
}

void
loop_on_stop(void (*fn)(void *), void *arg)
{
	struct loop_stopcb *s;

	s = xcalloc(1, sizeof(*s));
	s->fn = fn;
	s->arg = arg;
	STAILQ_INSERT_TAIL(&stopcbs, s, entry);
}

/* Take the whole queue under the lock and run it without: a callback may
 * post again, and a worker must never wait behind a slow callback. */
static void
post_run(evutil_socket_t fd, short what, void *arg)
{
	struct loop_posts todo = STAILQ_HEAD_INITIALIZER(todo);
	struct loop_post *p;

	pthread_mutex_lock(&post_mtx);
	STAILQ_CONCAT(&todo, &posts);
	pthread_mutex_unlock(&post_mtx);

	while ((p = STAILQ_FIRST(&todo)) != NULL) {
		STAILQ_REMOVE_HEAD(&todo, entry);
		p->fn(p->arg);
		free(p);
	}
}

/* The base was made with thread support, so event_active from another
 * thread is locked and wakes the loop through libevent's own notify fd. */
void
loop_post(void (*fn)(void *), void *arg)
{
	struct loop_post *p;

	if (base == NULL)
		fatalx("loop_post before loop_init");
	p = xcalloc(1, sizeof(*p));
	p->fn = fn;
	p->arg = arg;
	pthread_mutex_lock(&post_mtx);
	STAILQ_INSERT_TAIL(&posts, p, entry);
	pthread_mutex_unlock(&post_mtx);
	event_active(post_ev, EV_TIMEOUT, 0);
}

static void
timer_free(struct loop_timer *t)
{
	TAILQ_REMOVE(&timers, t, entry);
	event_free(t->ev);
	free(t);
}

/* The handle lives until fn returns, so a cancel of this very timer from
 * inside fn is a harmless no-op rather than a use after free. */
static void
timer_fire(evutil_socket_t fd, short what, void *arg)
{
	struct loop_timer *t = arg;

	t->firing = 1;
	t->fn(t->arg);
	timer_free(t);
}

struct loop_timer *
loop_timer_add(long ms, void (*fn)(void *), void *arg)
{
	struct loop_timer *t;
	struct timeval tv;

	if (base == NULL)
		fatalx("loop_timer_add before loop_init");
	if (ms < 0)
		ms = 0;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;

	t = xcalloc(1, sizeof(*t));
	t->fn = fn;
	t->arg = arg;
	if ((t->ev = evtimer_new(base, timer_fire, t)) == NULL)
		fatalx("loop: cannot create a timer event");
	if (evtimer_add(t->ev, &tv) == -1)
		fatalx("loop: cannot add a timer event");
	TAILQ_INSERT_TAIL(&timers, t, entry);
	return t;
}

/* event_del on the loop thread guarantees the callback will not run, even
 * when the timer is already active in this turn of the loop. */
void
loop_timer_cancel(struct loop_timer *t)
{
	if (t == NULL || t->firing)
		return;
	event_del(t->ev);
	timer_free(t);
}

/* Pending posts and timers are dropped without running: their owners are
 * being torn down too, and a callback at this point would see half of af. */
void
loop_free(void)
{
	struct loop_post *p;
	struct loop_timer *t;
	struct loop_stopcb *s;

	pthread_mutex_lock(&post_mtx);
	while ((p = STAILQ_FIRST(&posts)) != NULL) {
		STAILQ_REMOVE_HEAD(&posts, entry);
		free(p);
	}
	pthread_mutex_unlock(&post_mtx);
	while ((t = TAILQ_FIRST(&timers)) != NULL)
		timer_free(t);
	while ((s = STAILQ_FIRST(&stopcbs)) != NULL) {
		STAILQ_REMOVE_HEAD(&stopcbs, entry);
		free(s);
	}
	for (size_t i = 0; i < nitems(sig_evs); i++) {
		if (sig_evs[i] != NULL)
			event_free(sig_evs[i]);
		sig_evs[i] = NULL;
	}
	if (post_ev != NULL)
		event_free(post_ev);
	if (drain_ev != NULL)
		event_free(drain_ev);
	post_ev = drain_ev = NULL;
	if (base != NULL)
		event_base_free(base);
	base = NULL;
	stopping = 0;
}
