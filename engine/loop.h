/* The event loop: one libevent base on the main thread. Runs, tools, triggers,
 * the audit trail and the status server all live on it; nothing on this thread
 * may block. Worker threads (Discord gateway, IMAP) hand work over with
 * loop_post, the one call that is safe from another thread. */
#ifndef AF_LOOP_H
#define AF_LOOP_H

#include <event2/event.h>

/* Also turns on libevent's pthread support, ignores SIGPIPE and takes
 * SIGTERM, SIGINT (loop_stop with a 30 s drain; a second one stops at once)
 * and SIGHUP (logged and ignored: af does not reload). */
int loop_init(void);
struct event_base *loop_base(void);
/* Run until loop_stop; returns after the drain: 0 once a requested stop is
 * done (drained, or cut short by the bound or a second signal), -1 if the
 * loop failed. */
int loop_run(void);
/* Begin a stop: the loop_on_stop callbacks run once, now; then the loop
 * exits when run_inflight() reaches 0 or drain_ms pass. Signals reach it
 * through the loop, never from signal context. A later call may shorten the
 * drain, never extend it. Loop thread only. */
void loop_stop(long drain_ms);
int loop_stopping(void);
/* Pending posts and timers are dropped without running. After http_shutdown,
 * whose events live on this base. */
void loop_free(void);

/* Call fn(arg) on the loop thread soon. Safe from any thread. */
void loop_post(void (*fn)(void *), void *arg);

/* A one-shot timer; returns a handle for loop_timer_cancel (NULL-safe). The
 * handle is freed when fn returns or on cancel: forget it in fn. Cancelling
 * from any callback is safe, even one due in the same turn of the loop; from
 * inside fn, cancelling its own timer is a no-op. */
struct loop_timer;
struct loop_timer *loop_timer_add(long ms, void (*fn)(void *), void *arg);
void loop_timer_cancel(struct loop_timer *);

/* Work that a drain should wait for besides runs (a reply still being
 * sent): each hold is released once; the drain's bound still applies. */
void loop_hold(void);
void loop_release(void);

/* Callbacks that run when the stop begins (close listeners, stop polling). */
void loop_on_stop(void (*fn)(void *), void *arg);

#endif
