/*
 * Per-chat outbound queues for the chat triggers (Telegram, Discord). A
 * chat's messages go out in order, one at a time: the head stays at the head
 * while it waits or is retried, so a reply in several parts never arrives
 * shuffled. Typing is shown from a run's acceptance until its reply, and
 * repeated because the APIs clear it after a few seconds.
 *
 * Every callback that touches an entry ends with chatq_gc, which frees it
 * once nothing refers to it (no call, no timer, no run, no message), so the
 * table only holds chats with something going on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "loop.h"
#include "run.h"
#include "triggers/chatq.h"
#include "util.h"

static void send_next(struct chatq *);
static void typing_tick(void *);

void
chatq_init(struct chatq_table *t, const struct chatq_def *def)
{
	t->def = def;
	LIST_INIT(&t->all);
}

struct chatq *
chatq_find(struct chatq_table *t, const char *id, int create)
{
	struct chatq *q;

	LIST_FOREACH(q, &t->all, entry)
		if (strcmp(q->id, id) == 0)
			return q;
	if (!create)
		return NULL;
	q = xcalloc(1, sizeof(*q));
	q->def = t->def;
	snprintf(q->id, sizeof(q->id), "%s", id);
	TAILQ_INIT(&q->outq);
	LIST_INSERT_HEAD(&t->all, q, entry);
	return q;
}

static void
drop_head(struct chatq *q)
{
	struct chatq_msg *m = TAILQ_FIRST(&q->outq);

	TAILQ_REMOVE(&q->outq, m, entry);
	q->nout--;
	free(m->body);
	free(m->run_id);
	free(m);
	loop_release();
}

static void
chatq_free(struct chatq *q)
{
	http_cancel(q->send);
	http_cancel(q->typing);
	loop_timer_cancel(q->send_wait);
	loop_timer_cancel(q->typing_timer);
	while (!TAILQ_EMPTY(&q->outq))
		drop_head(q);
	LIST_REMOVE(q, entry);
	free(q);
}

void
chatq_gc(struct chatq *q)
{
	if (q->runs == 0 && TAILQ_EMPTY(&q->outq) && q->send == NULL &&
	    q->send_wait == NULL && q->typing == NULL &&
	    q->typing_timer == NULL)
		chatq_free(q);
}

size_t
chatq_free_all(struct chatq_table *t)
{
	struct chatq *q;
	size_t lost = 0;

	while ((q = LIST_FIRST(&t->all)) != NULL) {
		lost += q->nout;
		chatq_free(q);
	}
	return lost;
}

int
chatq_push(struct chatq *q, char *body, const char *run_id)
{
	struct chatq_msg *m;

	if (q->nout >= q->def->queue_max) {
		free(body);
		return -1;
	}
	m = xcalloc(1, sizeof(*m));
	m->body = body;
	m->run_id = run_id != NULL ? xstrdup(run_id) : NULL;
	TAILQ_INSERT_TAIL(&q->outq, m, entry);
	q->nout++;
	/* A stop waits (within its bound) for the replies already queued. */
	loop_hold();
	send_next(q);
	return 0;
}

static void
send_resume(void *arg)
{
	struct chatq *q = arg;

	q->send_wait = NULL;
	send_next(q);
	chatq_gc(q);
}

/* The head answered; the trigger's hook says what that means. */
static void
sent(struct http_response *resp, void *arg)
{
	struct chatq *q = arg;
	struct chatq_msg *m = TAILQ_FIRST(&q->outq);
	long delay = 0;

	q->send = NULL;
	switch (q->def->sent(q, resp, m->attempts, &delay)) {
	case CHATQ_RETRY:
		q->send_wait = loop_timer_add(delay, send_resume, q);
		break;
	case CHATQ_SENT:
		q->backoff = 0;
		/* FALLTHROUGH */
	case CHATQ_DROP:
		if (m->run_id != NULL)
			run_delivered(m->run_id);
		drop_head(q);
		send_next(q);
		break;
	}
	chatq_gc(q);
}

static void
send_next(struct chatq *q)
{
	struct chatq_msg *m = TAILQ_FIRST(&q->outq);
	long wait;

	if (m == NULL || q->send != NULL || q->send_wait != NULL)
		return;
	if (q->def->hold != NULL && (wait = q->def->hold(q)) > 0) {
		q->send_wait = loop_timer_add(wait, send_resume, q);
		return;
	}
	m->attempts++;
	q->send = q->def->send(q, m->body, sent, q);
}

/* Typing is cosmetic: what its answer means is only the trigger's to log. */
static void
typing_done(struct http_response *resp, void *arg)
{
	struct chatq *q = arg;

	q->typing = NULL;
	q->def->typing_done(q, resp);
	chatq_gc(q);
}

static void
typing_send(struct chatq *q)
{
	if (q->typing == NULL)
		q->typing = q->def->typing(q, typing_done, q);
	loop_timer_cancel(q->typing_timer);
	q->typing_timer = loop_timer_add(q->def->typing_every_ms, typing_tick,
	    q);
}

/* The indicator stops with the last run, and when af is stopping. */
static void
typing_tick(void *arg)
{
	struct chatq *q = arg;

	q->typing_timer = NULL;
	if (q->runs > 0 && !loop_stopping())
		typing_send(q);
	else
		chatq_gc(q);
}

void
chatq_run_begin(struct chatq *q)
{
	if (q->runs++ == 0)
		typing_send(q);
}

void
chatq_run_end(struct chatq *q)
{
	if (q->runs > 0 && --q->runs == 0) {
		loop_timer_cancel(q->typing_timer);
		q->typing_timer = NULL;
	}
}

int
chatq_meta_target(const char *meta, const char *chat_key, chatq_id_fn id,
    char chat[CHATQ_ID_MAX], char msg[CHATQ_ID_MAX])
{
	const cJSON *c, *m;
	cJSON *root;
	int rc = -1;

	if (meta == NULL || (root = cJSON_Parse(meta)) == NULL)
		return -1;
	c = cJSON_GetObjectItemCaseSensitive(root, chat_key);
	m = cJSON_GetObjectItemCaseSensitive(root, "message_id");
	if (cJSON_IsString(c) && cJSON_IsString(m) &&
	    id(c->valuestring, chat, CHATQ_ID_MAX) == 0 &&
	    id(m->valuestring, msg, CHATQ_ID_MAX) == 0)
		rc = 0;
	cJSON_Delete(root);
	return rc;
}

void
chatq_deliver(struct chatq_table *t, const struct run_outcome *o,
    const struct chatq_reply *r)
{
	char chat[CHATQ_ID_MAX], msg[CHATQ_ID_MAX];
	struct strlist parts = { 0 };
	struct chatq *q;

	/* The meta is attached at submit; one that is not ours (a journal
	 * written by another version, say) has nowhere to go. */
	if (chatq_meta_target(o->meta, r->chat_key, r->id, chat, msg) == -1) {
		log_warnx("%s: run %s has nowhere to answer", r->name,
		    o->run_id);
		run_delivered(o->run_id);
		return;
	}
	q = chatq_find(t, chat, 1);
	/* Typing was shown for the trigger's own runs of this process only
	 * (not for a schedule's answer, nor one from the outbox). */
	if (!o->again && strcmp(o->trigger, r->name) == 0)
		chatq_run_end(q);
	if (strcmp(o->status, "ok") == 0)
		r->split(o->reply != NULL ? o->reply : "", r->max, r->max_parts,
		    &parts);
	else
		strlist_add(&parts, trig_error_note(o->status));
	if (parts.n == 0)
		strlist_add(&parts, "(The agent finished without a reply.)");
	for (size_t i = 0; i < parts.n; i++)
		r->send(q, parts.v[i], i == 0 ? msg : NULL,
		    i + 1 == parts.n ? o->run_id : NULL);
	strlist_free(&parts);
	chatq_gc(q);
}
