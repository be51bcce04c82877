/* The outbound side a chat trigger needs per chat or channel: replies sent in
 * order, one request in flight at a time, a wait before a retry, a typing
 * indicator repeated while runs are in progress, and the entry forgotten once
 * it is idle. The trigger keeps what is its API's own (the request, the rate
 * limits, what an answer means) and plugs it in through struct chatq_def. */
#ifndef AF_CHATQ_H
#define AF_CHATQ_H

#include <sys/queue.h>

#include <stddef.h>

#include "http.h"
#include "trigger.h"
#include "util.h"

#define CHATQ_ID_MAX	24	/* Telegram chat ids, Discord snowflakes */

struct chatq;

/* What became of the message at the head of a queue. */
enum chatq_verdict {
	CHATQ_SENT,	/* delivered: the next one goes */
	CHATQ_RETRY,	/* send it again after the delay */
	CHATQ_DROP	/* given up: the next one goes */
};

/* One trigger's hooks and bounds; static, outlives its table. */
struct chatq_def {
	size_t	 queue_max;		/* messages waiting per chat */
	long	 typing_every_ms;	/* how often typing is shown again */
	/* Milliseconds the head must wait before it is sent (a rate limit
	 * already known to be spent); NULL: never. */
	long	(*hold)(struct chatq *);
	/* Start sending body; cb(arg) gets the answer. Never NULL. */
	struct http_call *(*send)(struct chatq *, const char *body,
		    http_cb cb, void *arg);
	/* Judge the answer to the head's attempts-th try. CHATQ_RETRY sets
	 * *delay (ms). The hook logs and counts; it must not free q. */
	enum chatq_verdict (*sent)(struct chatq *,
		    const struct http_response *, int attempts, long *delay);
	/* Show typing once; NULL when it is skipped this time. */
	struct http_call *(*typing)(struct chatq *, http_cb cb, void *arg);
	/* The typing call answered (logging, rate-limit bookkeeping). */
	void	(*typing_done)(struct chatq *, const struct http_response *);
};

struct chatq_msg {
	TAILQ_ENTRY(chatq_msg)	 entry;
	char			*body;		/* owned */
	char			*run_id;	/* the last of a run's answer */
	int			 attempts;
};
TAILQ_HEAD(chatq_msgs, chatq_msg);

/* A chat with something going on: runs not yet answered or messages not yet
 * sent. The trigger reads id and nout and may use backoff in its sent hook
 * (chatq clears it after a success); the rest is chatq's. */
struct chatq {
	LIST_ENTRY(chatq)	 entry;
	const struct chatq_def	*def;
	char			 id[CHATQ_ID_MAX];
	struct chatq_msgs	 outq;
	size_t			 nout;
	struct http_call	*send;		/* the head, in flight */
	struct loop_timer	*send_wait;	/* the head's wait */
	long			 backoff;
	int			 runs;		/* accepted, not yet answered */
	struct http_call	*typing;
	struct loop_timer	*typing_timer;
};

struct chatq_table {
	const struct chatq_def	*def;
	LIST_HEAD(, chatq)	 all;
};

void chatq_init(struct chatq_table *, const struct chatq_def *);
/* The entry for id, created when create is set (else NULL when none). */
struct chatq *chatq_find(struct chatq_table *, const char *id, int create);
/* Queue body (allocated; taken in every case) and start sending if idle.
 * -1 when queue_max messages wait already: body is freed, the caller says
 * so. run_id, on the last message of a run's answer: once it is sent (or
 * given up), the run's answer leaves the outbox (run_delivered). */
int chatq_push(struct chatq *, char *body, const char *run_id);
/* A run for this chat was accepted: typing shows until the last one ends. */
void chatq_run_begin(struct chatq *);
void chatq_run_end(struct chatq *);
/* Call at the end of anything that touched q: an idle entry is freed. */
void chatq_gc(struct chatq *);
/* Free every entry, cancelling its calls and timers; returns the messages
 * that were never sent. */
size_t chatq_free_all(struct chatq_table *);

/* Check and copy one id as the trigger's API spells it (0: ok). */
typedef int (*chatq_id_fn)(const char *in, char *out, size_t outlen);
/* The chat and the message a run answers, from the meta its trigger
 * journaled: {"<chat_key>": "...", "message_id": "..."}. -1 when either is
 * missing or fails id. */
int chatq_meta_target(const char *meta, const char *chat_key, chatq_id_fn id,
    char chat[CHATQ_ID_MAX], char msg[CHATQ_ID_MAX]);

/* How a chat trigger answers a run; static, the trigger's. */
struct chatq_reply {
	const char	*name;		/* the trigger, for the log */
	const char	*chat_key;	/* the meta's chat field */
	chatq_id_fn	 id;
	/* Cut text into at most max_parts messages of at most max each. */
	void		(*split)(const char *text, size_t max,
			    size_t max_parts, struct strlist *out);
	size_t		 max;
	size_t		 max_parts;
	/* Queue one message (chatq_push with the trigger's body). */
	void		(*send)(struct chatq *, const char *text,
			    const char *reply_to, const char *run_id);
};
/* Run o of the trigger ended: its reply, cut in parts (or the note on how
 * it failed), goes to the chat its meta names, the first part quoting the
 * message; the last takes the answer out of the outbox once it is sent. A
 * meta that is not the trigger's has nowhere to go: logged and settled. */
void chatq_deliver(struct chatq_table *, const struct run_outcome *o,
    const struct chatq_reply *);

#endif
