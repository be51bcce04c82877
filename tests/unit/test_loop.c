/* The event loop: timers, cancels, posts from another thread, the drained
 * stop and the signals that start it. */
#include <pthread.h>
#include <stdint.h>
#include <signal.h>
#include <unistd.h>

#include "loop.h"
#include "tt.h"
#include "util.h"

/* Stands in for engine/run.c's count, which loop.c reads through a weak
 * reference: the drain tests set how many runs are "in flight". */
long run_inflight(void);
static long fake_inflight;

long
run_inflight(void)
{
	return fake_inflight;
}

/* Dispatch until a callback calls event_base_loopexit, bounded so that a
 * broken loop fails the case instead of hanging the suite. */
static void
guard_fire(void *arg)
{
	int *hit = arg;

	*hit = 1;
	event_base_loopexit(loop_base(), NULL);
}

static int
dispatch_bounded(long ms)
{
	int hit = 0;
	struct loop_timer *guard = loop_timer_add(ms, guard_fire, &hit);

	event_base_dispatch(loop_base());
	if (!hit)
		loop_timer_cancel(guard);
	return hit ? -1 : 0;
}

struct order {
	int	seen[8];
	int	n;
	int	last;
};

struct step {
	struct order	*o;
	int		 id;
};

static void
record(void *arg)
{
	struct step *s = arg;

	s->o->seen[s->o->n++] = s->id;
	if (s->id == s->o->last)
		event_base_loopexit(loop_base(), NULL);
}

static void
test_timer_order(void)
{
	struct order o = { .last = 3 };
	struct step s[4] = { { &o, 3 }, { &o, 1 }, { &o, 2 }, { &o, 0 } };

	tt_int_op(loop_init(), ==, 0);
	loop_timer_add(60, record, &s[0]);
	loop_timer_add(20, record, &s[1]);
	loop_timer_add(40, record, &s[2]);
	loop_timer_add(0, record, &s[3]);
	tt_int_op(dispatch_bounded(2000), ==, 0);
	tt_int_op(o.n, ==, 4);
	for (int i = 0; i < 4; i++)
		tt_int_op(o.seen[i], ==, i);
end:
	loop_free();
}

struct canceller {
	struct loop_timer	*victim;
	struct loop_timer	*self;
	int			 fired;
};

static void
cancel_other(void *arg)
{
	struct canceller *c = arg;

	c->fired++;
	loop_timer_cancel(c->victim);
	/* Cancelling the timer that is firing must be harmless. */
	loop_timer_cancel(c->self);
}

static void
count_fire(void *arg)
{
	(*(int *)arg)++;
}

static void
exit_loop(void *arg)
{
	event_base_loopexit(loop_base(), NULL);
}

static void
test_timer_cancel(void)
{
	struct canceller c = { 0 };
	int early = 0, late = 0;
	struct loop_timer *t;

	tt_int_op(loop_init(), ==, 0);
	t = loop_timer_add(10, count_fire, &early);
	loop_timer_cancel(t);
	loop_timer_cancel(NULL);

	/* Both timers are due before the loop first looks, so the victim is
	 * already active when the canceller runs: it must still not fire. */
	c.self = loop_timer_add(5, cancel_other, &c);
	c.victim = loop_timer_add(10, count_fire, &late);
	loop_timer_add(100, exit_loop, NULL);
	usleep(50 * 1000);
	tt_int_op(dispatch_bounded(2000), ==, 0);
	tt_int_op(c.fired, ==, 1);
	tt_int_op(early, ==, 0);
	tt_int_op(late, ==, 0);
end:
	loop_free();
}

/* Leaves timers pending on purpose: loop_free must release them. */
static void
test_timer_pending_at_free(void)
{
	int n = 0;

	tt_int_op(loop_init(), ==, 0);
	loop_timer_add(60000, count_fire, &n);
	loop_timer_add(60000, count_fire, &n);
	tt_int_op(n, ==, 0);
end:
	loop_free();
}

#define POSTS	1000

/* What the poster thread handed over, as the loop saw it. */
static struct {
	int		 next;
	int		 in_order;
	int		 on_loop;
	pthread_t	 loop_thread;
} posted;

static void
take_post(void *arg)
{
	if (!pthread_equal(pthread_self(), posted.loop_thread))
		posted.on_loop = 0;
	if ((intptr_t)arg != posted.next)
		posted.in_order = 0;
	if (++posted.next == POSTS)
		event_base_loopexit(loop_base(), NULL);
}

static void *
poster(void *arg)
{
	for (intptr_t i = 0; i < POSTS; i++) {
		loop_post(take_post, (void *)i);
		if (i % 100 == 0)
			usleep(1000);
	}
	return NULL;
}

static void
test_post_from_thread(void)
{
	pthread_t thread;
	int started = 0;

	tt_int_op(loop_init(), ==, 0);
	posted.next = 0;
	posted.in_order = posted.on_loop = 1;
	posted.loop_thread = pthread_self();
	tt_int_op(pthread_create(&thread, NULL, poster, NULL), ==, 0);
	started = 1;
	tt_int_op(dispatch_bounded(5000), ==, 0);
	tt_int_op(posted.next, ==, POSTS);
	tt_int_op(posted.on_loop, ==, 1);
	tt_int_op(posted.in_order, ==, 1);
end:
	if (started)
		pthread_join(thread, NULL);
	loop_free();
}

struct stops {
	int	calls[2];
	int	order;
};

static void
on_stop0(void *arg)
{
	struct stops *s = arg;

	s->calls[0]++;
	s->order = s->order * 10 + 1;
}

static void
on_stop1(void *arg)
{
	struct stops *s = arg;

	s->calls[1]++;
	s->order = s->order * 10 + 2;
}

static void
stop_soon(void *arg)
{
	loop_stop(*(long *)arg);
}

static void
stop_again(void *arg)
{
	loop_stop(5000);
}

static void
test_stop_runs_callbacks(void)
{
	struct stops s = { { 0, 0 }, 0 };
	long drain = 1000;
	int64_t t0;

	fake_inflight = 0;
	tt_int_op(loop_init(), ==, 0);
	loop_on_stop(on_stop0, &s);
	loop_on_stop(on_stop1, &s);
	tt_int_op(loop_stopping(), ==, 0);
	loop_timer_add(10, stop_soon, &drain);
	loop_timer_add(20, stop_again, NULL);
	t0 = mono_ms();
	tt_int_op(loop_run(), ==, 0);
	tt_int_op(mono_ms() - t0, <, 1000);
	tt_int_op(loop_stopping(), ==, 1);
	tt_int_op(s.calls[0], ==, 1);
	tt_int_op(s.calls[1], ==, 1);
	tt_int_op(s.order, ==, 12);
end:
	loop_free();
}

static void
runs_finish(void *arg)
{
	fake_inflight = 0;
}

static void
test_stop_waits_for_runs(void)
{
	long drain = 5000;
	int64_t t0, took;

	fake_inflight = 2;
	tt_int_op(loop_init(), ==, 0);
	loop_timer_add(0, stop_soon, &drain);
	loop_timer_add(200, runs_finish, NULL);
	t0 = mono_ms();
	tt_int_op(loop_run(), ==, 0);
	took = mono_ms() - t0;
	tt_int_op(took, >=, 190);
	tt_int_op(took, <, 2000);
end:
	fake_inflight = 0;
	loop_free();
}

static void
test_stop_drain_bound(void)
{
	long drain = 150;
	int64_t t0, took;

	fake_inflight = 1;
	tt_int_op(loop_init(), ==, 0);
	loop_timer_add(0, stop_soon, &drain);
	t0 = mono_ms();
	tt_int_op(loop_run(), ==, 0);
	took = mono_ms() - t0;
	tt_int_op(took, >=, 140);
	tt_int_op(took, <, 2000);
end:
	fake_inflight = 0;
	loop_free();
}

static void
send_signal(void *arg)
{
	raise(*(int *)arg);
}

static void
test_signal_stops(void)
{
	static int term = SIGTERM, hup = SIGHUP;
	struct stops s = { { 0, 0 }, 0 };
	int64_t t0;

	fake_inflight = 0;
	tt_int_op(loop_init(), ==, 0);
	loop_on_stop(on_stop0, &s);
	loop_timer_add(10, send_signal, &hup);
	loop_timer_add(50, send_signal, &term);
	t0 = mono_ms();
	tt_int_op(loop_run(), ==, 0);
	tt_int_op(mono_ms() - t0, >=, 45);
	tt_int_op(mono_ms() - t0, <, 2000);
	tt_int_op(s.calls[0], ==, 1);
end:
	loop_free();
}

/* A run that never ends holds the drain for 30 s; the second signal must cut
 * it short. */
static void
test_signal_twice(void)
{
	static int term = SIGTERM, intr = SIGINT;
	int64_t t0;

	fake_inflight = 1;
	tt_int_op(loop_init(), ==, 0);
	loop_timer_add(10, send_signal, &term);
	loop_timer_add(100, send_signal, &intr);
	t0 = mono_ms();
	tt_int_op(loop_run(), ==, 0);
	tt_int_op(mono_ms() - t0, >=, 95);
	tt_int_op(mono_ms() - t0, <, 2000);
end:
	fake_inflight = 0;
	loop_free();
}

static const struct tt_case cases[] = {
	{ "timer_order", test_timer_order },
	{ "timer_cancel", test_timer_cancel },
	{ "timer_pending_at_free", test_timer_pending_at_free },
	{ "post_from_thread", test_post_from_thread },
	{ "stop_runs_callbacks", test_stop_runs_callbacks },
	{ "stop_waits_for_runs", test_stop_waits_for_runs },
	{ "stop_drain_bound", test_stop_drain_bound },
	{ "signal_stops", test_signal_stops },
	{ "signal_twice", test_signal_twice },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	log_init(LOG_TEXT, 0);
	return tt_main(argc, argv, cases);
}
