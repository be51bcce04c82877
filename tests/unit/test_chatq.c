/* The per-chat outbound queue: order, one send at a time, retries that keep
 * the head at the head, the hold before a send, the queue bound, typing while
 * runs are in progress, and an idle entry freed. The hooks start requests
 * that http refuses before the wire (a bad method), so every answer comes
 * back through the loop without a server; what it means is the script's. */
#include <stdio.h>
#include <string.h>

#include "http.h"
#include "loop.h"
#include "triggers/chatq.h"
#include "tt.h"
#include "util.h"

#define GUARD_MS	3000

static struct {
	char	 log[512];	/* "send a 1;" per attempt, "typing;" */
	int	 retry_b;	/* first tries of "b" answered CHATQ_RETRY */
	int	 holds;		/* hold answers > 0 left */
	int	 typing;
	int	 stop_after_typing;
	int	 sends;
	int	 stop_after_sends;
} s;

static void
note(const char *fmt, const char *a, int n)
{
	size_t l = strlen(s.log);

	snprintf(s.log + l, sizeof(s.log) - l, fmt, a, n);
}

static struct http_call *
refused_call(http_cb cb, void *arg)
{
	struct http_request req = { .method = "GET /x HTTP/1.1\r\n",
	    .url = "http://127.0.0.1:9/" };

	return http_start(&req, cb, arg);
}

static long
hold(struct chatq *q)
{
	return s.holds-- > 0 ? 30 : 0;
}

static struct http_call *
send_start(struct chatq *q, const char *body, http_cb cb, void *arg)
{
	return refused_call(cb, arg);
}

static enum chatq_verdict
sent(struct chatq *q, const struct http_response *resp, int attempts,
    long *delay)
{
	const char *body = TAILQ_FIRST(&q->outq)->body;

	note("send %s %d;", body, attempts);
	if (++s.sends == s.stop_after_sends)
		event_base_loopexit(loop_base(), NULL);
	if (strcmp(body, "b") == 0 && attempts <= s.retry_b) {
		*delay = 10;
		return CHATQ_RETRY;
	}
	if (strcmp(body, "x") == 0)
		return CHATQ_DROP;
	return CHATQ_SENT;
}

static struct http_call *
typing(struct chatq *q, http_cb cb, void *arg)
{
	return refused_call(cb, arg);
}

static void
typing_done(struct chatq *q, const struct http_response *resp)
{
	note("typing%s%d;", "", ++s.typing);
	if (s.typing == s.stop_after_typing)
		event_base_loopexit(loop_base(), NULL);
}

static const struct chatq_def def = {
	.queue_max = 3,
	.typing_every_ms = 20,
	.hold = hold,
	.send = send_start,
	.sent = sent,
	.typing = typing,
	.typing_done = typing_done,
};

static void
guard_fire(void *arg)
{
	*(int *)arg = 1;
	event_base_loopexit(loop_base(), NULL);
}

/* Dispatch until a hook ends it; -1 when the guard had to. */
static int
dispatch(void)
{
	int hit = 0;
	struct loop_timer *g = loop_timer_add(GUARD_MS, guard_fire, &hit);

	event_base_dispatch(loop_base());
	if (!hit)
		loop_timer_cancel(g);
	return hit ? -1 : 0;
}

static int
setup(struct chatq_table *t)
{
	memset(&s, 0, sizeof(s));
	chatq_init(t, &def);
	if (loop_init() == -1 || http_init() == -1)
		return -1;
	return 0;
}

static void
teardown(struct chatq_table *t)
{
	chatq_free_all(t);
	http_shutdown();
	loop_free();
}

/* A retried head keeps its place; a dropped one lets the next go; the entry
 * is gone once its last message is answered. */
static void
test_order_retry_drop(void)
{
	struct chatq_table t;
	struct chatq *q;

	tt_int_op(setup(&t), ==, 0);
	s.retry_b = 2;
	s.stop_after_sends = 5;
	q = chatq_find(&t, "42", 1);
	tt_assert(chatq_find(&t, "42", 1) == q);
	tt_int_op(chatq_push(q, xstrdup("a"), NULL), ==, 0);
	tt_int_op(chatq_push(q, xstrdup("b"), NULL), ==, 0);
	tt_int_op(chatq_push(q, xstrdup("x"), NULL), ==, 0);
	tt_assert(q->send != NULL);
	chatq_gc(q);		/* messages waiting: kept */
	tt_assert(chatq_find(&t, "42", 0) == q);
	tt_int_op(dispatch(), ==, 0);
	tt_str_op(s.log, ==, "send a 1;send b 1;send b 2;send b 3;send x 1;");
	tt_assert(chatq_find(&t, "42", 0) == NULL);
	tt_assert(chatq_find(&t, "7", 0) == NULL);
end:
	teardown(&t);
}

/* A spent rate limit holds the head back without counting an attempt. */
static void
test_hold(void)
{
	struct chatq_table t;
	struct chatq *q;
	int64_t t0;

	tt_int_op(setup(&t), ==, 0);
	s.holds = 2;
	s.stop_after_sends = 1;
	q = chatq_find(&t, "42", 1);
	t0 = mono_ms();
	tt_int_op(chatq_push(q, xstrdup("a"), NULL), ==, 0);
	tt_assert(q->send == NULL && q->send_wait != NULL);
	tt_int_op(dispatch(), ==, 0);
	tt_int_op(mono_ms() - t0, >=, 55);
	tt_str_op(s.log, ==, "send a 1;");
end:
	teardown(&t);
}

/* Past queue_max a message is refused (and freed); what never went out is
 * counted when the table is freed. */
static void
test_queue_bound(void)
{
	struct chatq_table t;
	struct chatq *q;

	tt_int_op(setup(&t), ==, 0);
	q = chatq_find(&t, "42", 1);
	for (int i = 0; i < 3; i++)
		tt_int_op(chatq_push(q, xstrdup("a"), NULL), ==, 0);
	tt_int_op(chatq_push(q, xstrdup("a"), NULL), ==, -1);
	tt_int_op(q->nout, ==, 3);
	tt_int_op(chatq_find(&t, "43", 1) != NULL, ==, 1);
	tt_int_op(chatq_free_all(&t), ==, 3);
	tt_assert(LIST_EMPTY(&t.all));
end:
	teardown(&t);
}

/* Typing repeats while a run is in progress and stops with the last one;
 * the entry then goes once the last typing call has answered. */
static void
test_typing(void)
{
	struct chatq_table t;
	struct chatq *q;

	tt_int_op(setup(&t), ==, 0);
	s.stop_after_typing = 3;
	q = chatq_find(&t, "42", 1);
	chatq_run_begin(q);
	chatq_run_begin(q);
	tt_int_op(q->runs, ==, 2);
	tt_assert(q->typing != NULL && q->typing_timer != NULL);
	tt_int_op(dispatch(), ==, 0);
	tt_int_op(s.typing, ==, 3);
	chatq_run_end(q);
	tt_assert(q->typing_timer != NULL);
	chatq_run_end(q);
	chatq_run_end(q);	/* one too many: harmless */
	tt_int_op(q->runs, ==, 0);
	tt_assert(q->typing_timer == NULL);
	chatq_gc(q);
	if (chatq_find(&t, "42", 0) != NULL) {
		/* A typing call still out: the entry goes when it answers. */
		s.stop_after_typing = 4;
		tt_int_op(dispatch(), ==, 0);
	}
	tt_assert(chatq_find(&t, "42", 0) == NULL);
end:
	teardown(&t);
}

static const struct tt_case cases[] = {
	{ "order_retry_drop", test_order_retry_drop },
	{ "hold", test_hold },
	{ "queue_bound", test_queue_bound },
	{ "typing", test_typing },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return tt_main(argc, argv, cases);
}
