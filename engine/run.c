/*
 * Runs and their scheduler. A run is a small state machine on the loop:
 * model step -> tool calls in order -> model step ... until the model stops,
 * max_steps is reached or the run's deadline passes. No run has a thread.
 *
 * Every accepted event is in the journal before it is acknowledged (when
 * run_submit returns, or when run_submit_async's callback runs after the
 * loop turn's group commit); it is marked done only when its run has ended,
 * so a crash or a stop with events still queued or running replays them at
 * the next start.
 */
#include "run.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "audit/audit.h"
#include "loop.h"
#include "model.h"
#include "state.h"
#include "tool.h"
#include "util.h"

#define RUN_SKILL_DESC_MAX	300
#define RUN_REPLY_MAX		(256 << 10)
#define RUN_RECOVER_TAIL	(4 << 20)	/* audit bytes read at start */
#define RUN_TRIM_MS		2000		/* idle this long: heap handed back */

struct pending {
	TAILQ_ENTRY(pending)	 entry;
	char			 id[RUN_ID_LEN];
	char			*trigger;
	char			*prompt;
	char			*conv;
	char			*meta;
};
TAILQ_HEAD(pendq, pending);

struct run {
	LIST_ENTRY(run)		 entry;
	struct pending		*ev;		/* owned */
	cJSON			*messages;
	cJSON			*tools;
	int			 steps;
	long			 in_tokens;
	long			 out_tokens;
	double			 cost;		/* USD, from the models' pricing */
	/* Tokens of the conversation as of the last reply (its input and
	 * output): the least the next call reads. */
	long			 context;
	size_t			 model;		/* 0: primary, then the fallbacks */
	int64_t			 started_ms;
	struct model_call	*mc;
	cJSON			*uses;		/* tool_use blocks of this step */
	int			 next_use;
	cJSON			*results;	/* tool_result blocks so far */
	struct tool_call	*tc;		/* in flight */
	struct loop_timer	*deadline;
	struct loop_timer	*kick;		/* deferred continuation */
	int			 ended;
	int			 interrupted;	/* stop: leave the journal pending */
	int			 forget;	/* /reset came: keep no history */
};
LIST_HEAD(runlist, run);

static const struct cfg *run_cfg;
static struct pendq queue = TAILQ_HEAD_INITIALIZER(queue);
static struct runlist running = LIST_HEAD_INITIALIZER(running);
static struct run_stats stats;
static int accepting = 1;
static char *system_text;		/* system prompt + skills index */
static struct loop_timer *dispatch_timer;
static struct loop_timer *trim_timer;

/* Events waiting for the group commit at the end of this loop turn. */
struct incoming {
	TAILQ_ENTRY(incoming)	 entry;
	struct pending		*ev;
	run_accept_cb		 cb;
	void			*arg;
};
TAILQ_HEAD(incomingq, incoming);
static struct incomingq batch = TAILQ_HEAD_INITIALIZER(batch);
static long nbatch;
static struct loop_timer *commit_timer;

static void dispatch(void *);
static void step(struct run *);
static void run_end(struct run *, const char *status, const char *error);

const struct run_stats *
run_stats(void)
{
	return &stats;
}

long
run_inflight(void)
{
	return stats.inflight;
}

void
run_forget_history(const char *conv)
{
	struct run *r;

	LIST_FOREACH(r, &running, entry)
		if (r->ev->conv != NULL && strcmp(r->ev->conv, conv) == 0)
			r->forget = 1;
}

void
run_delivered(const char *id)
{
	state_outbox_del(id);
}

/* One unsent answer, read out before any is handed on: delivering may
 * delete rows of the table being read. */
struct unsent {
	char	*v[6];	/* id, trigger, conv, meta, status, reply */
};

struct unsent_list {
	struct unsent	*v;
	size_t		 n;
};

static void
unsent_add(const char *id, const char *trigger, const char *conv,
    const char *meta, const char *status, const char *reply, void *arg)
{
	struct unsent_list *l = arg;
	const char *f[6] = { id, trigger, conv, meta, status, reply };
	struct unsent *u;

	l->v = xreallocarray(l->v, l->n + 1, sizeof(*l->v));
	u = &l->v[l->n++];
	for (size_t i = 0; i < nitems(f); i++)
		u->v[i] = f[i] != NULL ? xstrdup(f[i]) : NULL;
}

static void
redeliver(const struct unsent *u)
{
	const struct trigger_def *t = trig_answerer(u->v[1], run_cfg);
	struct run_outcome o;
	int ok;

	if (t == NULL) {
		log_warnx("run %s: its answer was never sent and trigger %s is "
		    "off now; it is dropped", u->v[0], u->v[1]);
		run_delivered(u->v[0]);
		return;
	}
	ok = strcmp(u->v[4], "ok") == 0;
	memset(&o, 0, sizeof(o));
	o.run_id = u->v[0];
	o.trigger = u->v[1];
	o.conversation = u->v[2];
	o.meta = u->v[3];
	o.status = u->v[4];
	o.reply = ok && u->v[5] != NULL ? u->v[5] : "";
	o.again = 1;
	log_info("run %s: its answer was never sent; sending it again",
	    o.run_id);
	t->deliver(&o);
}

int
run_outbox_replay(void)
{
	struct unsent_list l = { NULL, 0 };
	int rc = state_outbox_each(unsent_add, &l);

	for (size_t i = 0; i < l.n; i++) {
		if (rc == 0)
			redeliver(&l.v[i]);
		for (size_t k = 0; k < nitems(l.v[i].v); k++)
			free(l.v[i].v[k]);
	}
	free(l.v);
	return rc;
}

/* The skills index: each skill's name and the description from its SKILL.md
 * front matter (or its first line of text), so the model knows what
 * read_skill can give it. Read once, before the sandbox. */
static void
skill_description(const struct cfg *cfg, const char *name, struct buf *out)
{
	char *path = xasprintf("%s/%s/SKILL.md", cfg->skills_dir, name);
	struct buf b;
	char *line, *save = NULL, *desc = NULL;

	buf_init(&b);
	if (read_file_max(path, 1 << 20, &b) == -1) {
		log_warn("skill %s: %s", name, path);
		buf_addf(out, "- %s\n", name);
		goto done;
	}
	for (line = strtok_r(b.data, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "description:", 12) == 0) {
			desc = line + 12;
			break;
		}
		if (desc == NULL && line[0] != '\0' && line[0] != '#' &&
		    strcmp(line, "---") != 0 && strchr(line, ':') == NULL)
			desc = line;
	}
	while (desc != NULL && (*desc == ' ' || *desc == '"'))
		desc++;
	buf_addf(out, "- %s: %.*s\n", name, RUN_SKILL_DESC_MAX,
	    desc ? desc : "");
done:
	buf_free(&b);
	free(path);
}

int
run_init(const struct cfg *cfg)
{
	struct buf b;

	run_cfg = cfg;
	buf_init(&b);
	if (cfg->system != NULL)
		buf_adds(&b, cfg->system);
	if (cfg->skills.n > 0) {
		buf_adds(&b, "\n\nSkills (read one with the read_skill tool "
		    "before using it):\n");
		for (size_t i = 0; i < cfg->skills.n; i++)
			skill_description(cfg, cfg->skills.v[i], &b);
	}
	system_text = buf_steal(&b);
	return 0;
}

static void
pending_free(struct pending *p)
{
	if (p == NULL)
		return;
	free(p->trigger);
	free(p->prompt);
	free(p->conv);
	free(p->meta);
	free(p);
}

static struct pending *
pending_new(const char *id, const char *trigger, const char *prompt,
    const char *conv, const char *meta)
{
	struct pending *p = xcalloc(1, sizeof(*p));

	snprintf(p->id, sizeof(p->id), "%s", id);
	p->trigger = xstrdup(trigger);
	p->prompt = xstrdup(prompt);
	p->conv = conv ? xstrdup(conv) : NULL;
	p->meta = meta ? xstrdup(meta) : NULL;
	return p;
}

static void
schedule_dispatch(void)
{
	if (dispatch_timer == NULL)
		dispatch_timer = loop_timer_add(0, dispatch, NULL);
}

/* Why an event cannot be taken now, as an errno; 0 when it can. */
static int
refusal(void)
{
	if (!accepting || loop_stopping())
		return ESHUTDOWN;
	if (audit_failed() != NULL || state_failed() != NULL)
		return EIO;
	if (stats.queued + nbatch >= run_cfg->limits.queue)
		return EAGAIN;
	return 0;
}

static void
refused(const struct run_request *req, int err)
{
	cJSON *rec;

	stats.refused++;
	if (err == EIO)
		return;		/* the trail may be what failed */
	rec = audit_new(NULL, "event_refused");
	cJSON_AddStringToObject(rec, "trigger", req->trigger);
	cJSON_AddStringToObject(rec, "reason", err == EAGAIN ? "queue full" :
	    "stopping");
	audit_emit(rec);
}

/* The loop turn's events in one transaction, so they share one sync; each
 * is acknowledged (or refused) only after it. */
static void
commit_batch(void *arg)
{
	struct incoming *a;
	int err = 0;

	commit_timer = NULL;
	if (state_tx_begin() == -1)
		err = EIO;
	else {
		TAILQ_FOREACH(a, &batch, entry)
			if (err == 0 && state_journal_add(a->ev->id,
			    a->ev->trigger, a->ev->conv, a->ev->prompt,
			    a->ev->meta) == -1)
				err = EIO;
		if (err != 0)
			state_tx_rollback();
		else if (state_tx_commit() == -1)
			err = EIO;
	}
	while ((a = TAILQ_FIRST(&batch)) != NULL) {
		TAILQ_REMOVE(&batch, a, entry);
		nbatch--;
		if (err == 0) {
			TAILQ_INSERT_TAIL(&queue, a->ev, entry);
			stats.queued++;
		} else
			stats.refused++;
		a->cb(a->arg, a->ev->id, err);
		if (err != 0)
			pending_free(a->ev);
		free(a);
	}
	if (err == 0)
		schedule_dispatch();
}

/* The gate both submits pass: -1 with errno set when events are refused
 * now (counted and recorded), else rid is the new run's id. */
static int
admit(const struct run_request *req, char rid[RUN_ID_LEN])
{
	int err;

	if ((err = refusal()) != 0) {
		refused(req, err);
		errno = err;
		return -1;
	}
	make_sorted_id("r-", rid, RUN_ID_LEN);
	return 0;
}

int
run_submit_async(const struct run_request *req, run_accept_cb cb, void *arg)
{
	struct incoming *a;
	char rid[RUN_ID_LEN];

	if (admit(req, rid) == -1)
		return -1;
	a = xcalloc(1, sizeof(*a));
	a->ev = pending_new(rid, req->trigger, req->prompt, req->conversation,
	    req->meta);
	a->cb = cb;
	a->arg = arg;
	TAILQ_INSERT_TAIL(&batch, a, entry);
	nbatch++;
	if (commit_timer == NULL)
		commit_timer = loop_timer_add(0, commit_batch, NULL);
	return 0;
}

int
run_submit(const struct run_request *req, char *id, size_t idlen)
{
	char rid[RUN_ID_LEN];
	struct pending *p;

	if (admit(req, rid) == -1)
		return -1;
	if (state_journal_add(rid, req->trigger, req->conversation,
	    req->prompt, req->meta) == -1) {
		stats.refused++;
		errno = EIO;
		return -1;
	}
	/* The queue macros evaluate the element more than once. */
	p = pending_new(rid, req->trigger, req->prompt, req->conversation,
	    req->meta);
	TAILQ_INSERT_TAIL(&queue, p, entry);
	stats.queued++;
	snprintf(id, idlen, "%s", rid);
	schedule_dispatch();
	return 0;
}

/* Runs that ended just before a crash, found in the audit trail's tail. */
struct recover_ctx {
	struct strlist	ended;		/* "ID STATUS" */
	int		n;
};

static void
note_run_end(const char *run, const char *status, void *arg)
{
	struct recover_ctx *rc = arg;
	char line[128];

	snprintf(line, sizeof(line), "%s %s", run, status);
	strlist_add(&rc->ended, line);
}

static const char *
ended_status(const struct recover_ctx *rc, const char *id)
{
	size_t len = strlen(id);

	for (size_t i = 0; i < rc->ended.n; i++)
		if (strncmp(rc->ended.v[i], id, len) == 0 &&
		    rc->ended.v[i][len] == ' ')
			return rc->ended.v[i] + len + 1;
	return NULL;
}

static void
recover_one(const char *id, const char *trigger, const char *conv,
    const char *prompt, const char *meta, void *arg)
{
	struct recover_ctx *rc = arg;
	const char *done;
	struct pending *p;

	if (id == NULL || trigger == NULL || prompt == NULL)
		return;
	if ((done = ended_status(rc, id)) != NULL &&
	    strcmp(done, "interrupted") != 0) {
		log_info("run %s had ended (%s) before the stop; not run again",
		    id, done);
		state_journal_done(id, done);
		return;
	}
	p = pending_new(id, trigger, prompt, conv, meta);
	TAILQ_INSERT_TAIL(&queue, p, entry);
	stats.queued++;
	rc->n++;
}

int
run_recover(void)
{
	struct recover_ctx rc = { { NULL, 0 }, 0 };
	int n;

	audit_tail_run_ends(run_cfg->audit_path, RUN_RECOVER_TAIL, note_run_end,
	    &rc);
	n = state_journal_pending(recover_one, &rc);
	strlist_free(&rc.ended);
	if (n == -1)
		return -1;
	n = rc.n;
	if (n > 0) {
		log_info("replaying %d accepted event%s from the journal", n,
		    n == 1 ? "" : "s");
		schedule_dispatch();
	}
	return 0;
}

static int
conv_busy(const char *conv)
{
	struct run *r;

	if (conv == NULL)
		return 0;
	LIST_FOREACH(r, &running, entry)
		if (r->ev->conv != NULL && strcmp(r->ev->conv, conv) == 0)
			return 1;
	return 0;
}

/* The next event that may start: the oldest one whose conversation has no
 * run in flight, so messages of one chat are answered in order. */
static struct pending *
next_eligible(void)
{
	struct pending *p;

	TAILQ_FOREACH(p, &queue, entry)
		if (!conv_busy(p->conv))
			return p;
	return NULL;
}

static void
on_deadline(void *arg)
{
	struct run *r = arg;

	r->deadline = NULL;
	run_end(r, "error_timeout", "the run took longer than "
	    "limits.run_timeout");
}

static void
run_begin(struct pending *ev)
{
	struct run *r = xcalloc(1, sizeof(*r));
	char *prompt;
	cJSON *rec;

	r->ev = ev;
	r->started_ms = now_ms();
	LIST_INSERT_HEAD(&running, r, entry);
	stats.inflight++;
	stats.runs_total++;
	r->messages = cJSON_CreateArray();
	if (ev->conv != NULL)
		state_history_get(ev->conv, r->messages);
	/* A secret value that reached the event (an echoed header, say) is
	 * taken out before the model sees it, and before the conversation
	 * history keeps the prompt for the next run. */
	prompt = redact_secrets(ev->prompt, &run_cfg->secret_values);
	free(ev->prompt);
	ev->prompt = prompt;
	cJSON_AddItemToArray(r->messages, model_text_message("user", prompt));
	r->tools = tool_schemas(run_cfg);
	r->deadline = loop_timer_add(run_cfg->limits.run_timeout_ms,
	    on_deadline, r);

	rec = audit_new(ev->id, "run_start");
	cJSON_AddStringToObject(rec, "trigger", ev->trigger);
	if (ev->conv != NULL)
		cJSON_AddStringToObject(rec, "conversation", ev->conv);
	if (audit_emit(rec) == -1) {
		run_end(r, "error_internal", "the audit trail cannot be written");
		return;
	}
	step(r);
}

static void
dispatch(void *arg)
{
	struct pending *p;

	dispatch_timer = NULL;
	while (accepting && stats.inflight < run_cfg->limits.concurrent_runs &&
	    (p = next_eligible()) != NULL) {
		TAILQ_REMOVE(&queue, p, entry);
		stats.queued--;
		run_begin(p);
	}
}

/* The model's final text: its text blocks joined. */
static char *
reply_text(const cJSON *content)
{
	const cJSON *b;
	struct buf out;

	buf_init(&out);
	cJSON_ArrayForEach(b, content) {
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type");
		const cJSON *text = cJSON_GetObjectItemCaseSensitive(b, "text");

		if (cJSON_IsString(type) && strcmp(type->valuestring, "text") == 0
		    && cJSON_IsString(text) && out.len < RUN_REPLY_MAX) {
			if (out.len > 0)
				buf_addc(&out, '\n');
			buf_adds(&out, text->valuestring);
		}
	}
	return buf_steal(&out);
}

static void next_tool(void *);
static void on_reply(struct model_reply *, void *);

/* The model in use: the primary, or the fallback a provider error moved the
 * run to. A fallback stays for the rest of the run. */
static const struct cfg_model *
run_model(const struct run *r)
{
	return r->model == 0 ? &run_cfg->model : &run_cfg->fallbacks[r->model - 1];
}

static void
send_step(struct run *r)
{
	r->mc = model_send(run_model(r), system_text, r->messages, r->tools,
	    on_reply, r);
}

static void
on_tool_done(struct tool_call *tc, const char *out, size_t len, int is_error)
{
	struct run *r = tc->owner;
	cJSON *res;

	stats.tool_calls++;
	if (tc->denied)
		stats.denials++;
	if (r->ended) {
		/* The run ended while the tool was busy; it waited for this. */
		if (r->kick == NULL)
			r->kick = loop_timer_add(0, next_tool, r);
		return;
	}
	res = cJSON_CreateObject();
	cJSON_AddStringToObject(res, "type", "tool_result");
	cJSON_AddStringToObject(res, "tool_use_id", tc->use_id);
	cJSON_AddStringToObject(res, "content", out);
	if (is_error)
		cJSON_AddTrueToObject(res, "is_error");
	cJSON_AddItemToArray(r->results, res);
	(void)len;
	/* Continue from the loop, not from inside the tool's callback: the
	 * tool may still be unwinding. */
	r->kick = loop_timer_add(0, next_tool, r);
}

static void
free_tc(struct run *r)
{
	if (r->tc != NULL) {
		tool_call_free(r->tc);
		r->tc = NULL;
	}
}

static void run_free(struct run *);

/* Run the step's tool calls one after the other, in the model's order; when
 * all have answered, their results go back in one user message. */
static void
next_tool(void *arg)
{
	struct run *r = arg;
	cJSON *use, *msg;

	r->kick = NULL;
	free_tc(r);
	if (r->ended) {
		run_free(r);
		return;
	}
	use = cJSON_GetArrayItem(r->uses, r->next_use);
	if (use != NULL) {
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(use, "id");
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(use, "name");
		cJSON *input = cJSON_GetObjectItemCaseSensitive(use, "input");

		r->next_use++;
		if (!cJSON_IsString(id) || !cJSON_IsString(name)) {
			run_end(r, "error_provider", "the model sent a tool call "
			    "without an id or a name");
			return;
		}
		r->tc = tool_invoke(run_cfg, r->ev->id, r->ev->trigger,
		    r->ev->conv, r->ev->meta, id->valuestring,
		    name->valuestring, input, on_tool_done, r);
		return;
	}
	msg = cJSON_CreateObject();
	cJSON_AddStringToObject(msg, "role", "user");
	cJSON_AddItemToObject(msg, "content", r->results);
	r->results = NULL;
	cJSON_AddItemToArray(r->messages, msg);
	cJSON_Delete(r->uses);
	r->uses = NULL;
	step(r);
}

static void
on_reply(struct model_reply *rep, void *arg)
{
	struct run *r = arg;
	cJSON *content, *b, *msg;

	const struct cfg_model *m = run_model(r);

	r->mc = NULL;
	r->in_tokens += rep->in_tokens;
	r->out_tokens += rep->out_tokens;
	r->cost += ((double)rep->in_tokens * m->price_in +
	    (double)rep->out_tokens * m->price_out) / 1e6;
	if (rep->ok)
		r->context = rep->in_tokens + rep->out_tokens;
	stats.tokens_in += (uint64_t)rep->in_tokens;
	stats.tokens_out += (uint64_t)rep->out_tokens;
	if (!rep->ok) {
		if (r->model < run_cfg->nfallbacks) {
			cJSON *rec = audit_new(r->ev->id, "model_fallback");

			cJSON_AddStringToObject(rec, "from", m->name);
			cJSON_AddStringToObject(rec, "to",
			    run_cfg->fallbacks[r->model].name);
			cJSON_AddStringToObject(rec, "error", rep->error);
			if (audit_emit(rec) == -1) {
				run_end(r, "error_internal", "the audit trail "
				    "cannot be written");
				return;
			}
			log_warnx("run %s: model %s failed (%s); falling back to "
			    "%s", r->ev->id, m->name, rep->error,
			    run_cfg->fallbacks[r->model].name);
			r->model++;
			send_step(r);
			return;
		}
		run_end(r, "error_provider", rep->error);
		return;
	}
	if (run_cfg->limits.max_cost > 0 && r->cost > run_cfg->limits.max_cost) {
		run_end(r, "error_max_cost", "the run went over limits.max_cost");
		return;
	}
	content = rep->content;
	rep->content = NULL;
	r->uses = cJSON_CreateArray();
	cJSON_ArrayForEach(b, content) {
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type");

		if (cJSON_IsString(type) &&
		    strcmp(type->valuestring, "tool_use") == 0)
			cJSON_AddItemReferenceToArray(r->uses, b);
	}
	msg = cJSON_CreateObject();
	cJSON_AddStringToObject(msg, "role", "assistant");
	cJSON_AddItemToObject(msg, "content", content);
	cJSON_AddItemToArray(r->messages, msg);
	if (cJSON_GetArraySize(r->uses) == 0) {
		char *text = reply_text(content);

		cJSON_Delete(r->uses);
		r->uses = NULL;
		if (strcmp(rep->stop, "max_tokens") == 0 && text[0] == '\0')
			run_end(r, "error_provider", "the model hit max_tokens "
			    "without an answer");
		else
			run_end(r, "ok", text);
		free(text);
		return;
	}
	r->next_use = 0;
	r->results = cJSON_CreateArray();
	next_tool(r);
}

static void
step(struct run *r)
{
	cJSON *rec;

	if (r->ended)
		return;
	if (r->steps >= run_cfg->model.max_steps) {
		run_end(r, "error_max_steps", "the run reached model.max_steps");
		return;
	}
	if (run_cfg->limits.max_cost > 0 && r->cost >= run_cfg->limits.max_cost) {
		run_end(r, "error_max_cost", "the run reached limits.max_cost");
		return;
	}
	/* The next call reads at least the conversation so far: when that
	 * alone would cross the limit, the call is not made. (Its output
	 * cannot be known; the check after the reply covers it.) */
	if (run_cfg->limits.max_cost > 0 && r->cost + (double)r->context *
	    run_model(r)->price_in / 1e6 > run_cfg->limits.max_cost) {
		run_end(r, "error_max_cost", "the next model call would go over "
		    "limits.max_cost");
		return;
	}
	r->steps++;
	rec = audit_new(r->ev->id, "model_call");
	cJSON_AddNumberToObject(rec, "step", r->steps);
	cJSON_AddStringToObject(rec, "model", run_model(r)->name);
	if (audit_emit(rec) == -1) {
		run_end(r, "error_internal", "the audit trail cannot be written");
		return;
	}
	send_step(r);
}

static void
run_free(struct run *r)
{
	if (r->tc != NULL && !r->tc->finished)
		return;		/* freed when the tool finally answers */
	free_tc(r);
	loop_timer_cancel(r->kick);
	cJSON_Delete(r->messages);
	cJSON_Delete(r->tools);
	cJSON_Delete(r->uses);
	cJSON_Delete(r->results);
	pending_free(r->ev);
	free(r);
}

static void
free_later(void *arg)
{
	run_free(arg);
}

/* A burst leaves glibc's heap holding the freed conversations of a thousand
 * runs, which it keeps for reuse; once nothing has run for a while, give the
 * free pages back (bench/REPORT.md: after a 1,000-run burst, 20 MiB of
 * anonymous memory before this, 7 MiB with it). */
static void
trim_idle(void *arg)
{
	trim_timer = NULL;
	if (stats.inflight == 0 && TAILQ_EMPTY(&queue))
		malloc_trim(0);
}

/* End a run once: record it, tell its trigger, and start what waits. The
 * reply or error is redacted first: it goes to a chat, a mail, an HTTP reply
 * and the conversation history, none of which may hold a secret. */
static void
run_end(struct run *r, const char *status, const char *raw)
{
	int ok = strcmp(status, "ok") == 0;
	const struct trigger_def *t;
	struct run_outcome o;
	cJSON *rec;
	char *text;

	if (r->ended)
		return;
	r->ended = 1;
	text = redact_secrets(raw, &run_cfg->secret_values);
	loop_timer_cancel(r->deadline);
	r->deadline = NULL;
	if (r->mc != NULL)
		model_cancel(r->mc);
	r->mc = NULL;
	if (r->tc != NULL && !r->tc->finished && r->tc->cancel != NULL)
		r->tc->cancel(r->tc);
	LIST_REMOVE(r, entry);
	stats.inflight--;
	if (ok)
		stats.runs_ok++;
	else
		stats.runs_failed++;

	/* The answer is in the outbox before anything says the run ended: a
	 * crash after this point resends it (the run_end below lets
	 * run_recover settle the event without running it again), and a
	 * crash before it leaves the event to run again. Never lost; at worst
	 * sent twice. */
	t = trig_find(r->ev->trigger);
	if (!r->interrupted && t != NULL && t->outbox)
		state_outbox_add(r->ev->id, r->ev->trigger, r->ev->conv,
		    r->ev->meta, status, ok ? text : NULL);
	rec = audit_new(r->ev->id, "run_end");
	cJSON_AddStringToObject(rec, "status", r->interrupted ? "interrupted" :
	    status);
	cJSON_AddNumberToObject(rec, "steps", r->steps);
	cJSON_AddNumberToObject(rec, "tokens_in", (double)r->in_tokens);
	cJSON_AddNumberToObject(rec, "tokens_out", (double)r->out_tokens);
	cJSON_AddNumberToObject(rec, "cost_usd", r->cost);
	if (!ok)
		cJSON_AddStringToObject(rec, "error", text);
	audit_emit(rec);
	log_info("run %s ended: %s (%d step%s)", r->ev->id, r->interrupted ?
	    "interrupted" : status, r->steps, r->steps == 1 ? "" : "s");
	/* The reply may carry a user's data: only at debug level. */
	log_debug("run %s reply: %.500s", r->ev->id, text);
	/* The run_end record comes first, the journal second: a crash in
	 * between leaves the event pending, and run_recover finds its run_end
	 * in the trail's tail and settles it instead of running it again. */
	if (!r->interrupted) {
		state_journal_done(r->ev->id, status);
		state_run_record(r->ev->id, r->ev->trigger, status, r->steps,
		    r->in_tokens, r->out_tokens, r->cost, r->started_ms,
		    ok ? NULL : text);
	}

	if (!r->interrupted) {
		if (ok && r->ev->conv != NULL && !r->forget) {
			state_history_add(r->ev->conv, "user", r->ev->prompt);
			state_history_add(r->ev->conv, "assistant", text);
		}
		memset(&o, 0, sizeof(o));
		o.run_id = r->ev->id;
		o.trigger = r->ev->trigger;
		o.meta = r->ev->meta;
		o.conversation = r->ev->conv;
		o.status = status;
		o.reply = ok ? text : "";
		o.error = ok ? NULL : text;
		o.steps = r->steps;
		o.in_tokens = r->in_tokens;
		o.out_tokens = r->out_tokens;
		o.cost_usd = r->cost;
		if (t != NULL && t->deliver != NULL)
			t->deliver(&o);
	}
	free(text);
	if (r->kick == NULL)
		r->kick = loop_timer_add(0, free_later, r);
	schedule_dispatch();
	if (stats.inflight == 0 && trim_timer == NULL)
		trim_timer = loop_timer_add(RUN_TRIM_MS, trim_idle, NULL);
}

void
run_stop_accepting(void)
{
	accepting = 0;
}

/* At the end of a drain: what still runs is stopped but stays pending in the
 * journal, so the next start runs it again rather than losing it. */
void
run_cancel_all(const char *why)
{
	struct run *r;

	while ((r = LIST_FIRST(&running)) != NULL) {
		r->interrupted = 1;
		run_end(r, "error_internal", why);
	}
}

void
run_shutdown(void)
{
	struct incoming *a;
	struct pending *p;

	/* Events never committed were never acknowledged: drop them. */
	loop_timer_cancel(commit_timer);
	commit_timer = NULL;
	while ((a = TAILQ_FIRST(&batch)) != NULL) {
		TAILQ_REMOVE(&batch, a, entry);
		pending_free(a->ev);
		free(a);
	}
	nbatch = 0;

	while ((p = TAILQ_FIRST(&queue)) != NULL) {
		TAILQ_REMOVE(&queue, p, entry);
		pending_free(p);
	}
	loop_timer_cancel(dispatch_timer);
	dispatch_timer = NULL;
	loop_timer_cancel(trim_timer);
	trim_timer = NULL;
	free(system_text);
	system_text = NULL;
}
