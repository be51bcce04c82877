/*
 * The GitHub trigger: GitHub's webhook deliveries on their own listener and
 * path. Every delivery must be signed (X-Hub-Signature-256 under the
 * configured secret). Deliveries are filtered by event (and action) and by
 * repository; what the filters leave out is answered 202 "ignored", since
 * GitHub shows any other status as a failed delivery.
 *
 * GitHub redelivers (by hand, or after a timeout) with the same
 * X-GitHub-Delivery id. The ids of accepted deliveries are kept in the state
 * database, committed in one transaction with the run's journal entry, so a
 * redelivery, even after a restart, is answered "duplicate" and starts
 * nothing. The signature covers only the body, not the headers, so whoever
 * captured one signed delivery could send its body again under a new id:
 * each accepted delivery's body digest is kept in the same row, and a body
 * seen before is a duplicate whatever id it comes with.
 */
#include <sys/queue.h>

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "audit/audit.h"
#include "config.h"
#include "run.h"
#include "state.h"
#include "trigger.h"
#include "triggers/webhook.h"
#include "util.h"

#define GH_NAME			"github"
#define GH_DELIVERY_KEEP	10000	/* deliveries remembered (id, digest) */
#define GH_DELIVERY_MAX		128	/* bytes of one X-GitHub-Delivery */
#define GH_EVENT_MAX		64	/* bytes of one X-GitHub-Event */
#define GH_REASON_MAX		512
#define GH_DIGEST_HEX		(2 * WH_SHA256_LEN)

/* What seen() found; -1: the table cannot be read. */
#define GH_NEW			0
#define GH_SEEN_ID		1	/* this delivery id */
#define GH_SEEN_BODY		2	/* this signed body, under another id */

/* sig is the body's HMAC-SHA256 in lower-case hex; tables made before it
 * existed get the column in gh_prepare (their old rows have none). */
static const char gh_schema[] =
    "CREATE TABLE IF NOT EXISTS github_delivery ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL,"
    "  run TEXT, ts_ms INTEGER, sig TEXT);";
static const char gh_index[] =
    "CREATE INDEX IF NOT EXISTS github_delivery_sig ON github_delivery(sig);";

static struct {
	const struct cfg	*cfg;
	struct wh_server	 srv;
} gh;

/* What one delivery says about itself. */
struct delivery {
	const char	*id;		/* X-GitHub-Delivery */
	const char	*sig;		/* the body's digest, lower-case hex */
	const char	*event;		/* X-GitHub-Event */
	const char	*action;	/* payload's action, or "" */
	const char	*repo;		/* repository.full_name, or "" */
	const char	*payload;	/* the JSON text */
	size_t		 len;
};

static int
gh_enabled(const struct cfg *cfg)
{
	return cfg->trig.github.enabled;
}

/* Delivery ids are GUIDs and event names are words; anything else is not
 * GitHub and is refused before it reaches SQL or a prompt. */
static int
token_ok(const char *s, size_t max, const char *extra)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		    (*s >= '0' && *s <= '9') || strchr(extra, *s) != NULL))
			return 0;
	return 1;
}

static int
event_wanted(const struct cfg_github *c, const char *event,
    const char *action)
{
	size_t el = strlen(event);

	for (size_t i = 0; i < c->events.n; i++) {
		const char *w = c->events.v[i];

		if (strcmp(w, "*") == 0 || strcmp(w, event) == 0)
			return 1;
		if (strncmp(w, event, el) == 0 && w[el] == '.' &&
		    strcmp(w + el + 1, action) == 0)
			return 1;
	}
	return 0;
}

/* owner/name, or owner followed by a slash and a star; case-insensitive as
 * GitHub treats names. */
static int
repo_wanted(const struct cfg_github *c, const char *repo)
{
	const char *slash = strchr(repo, '/');

	if (c->repos.n == 0)
		return 1;
	if (slash == NULL || slash == repo || slash[1] == '\0')
		return 0;
	for (size_t i = 0; i < c->repos.n; i++) {
		const char *w = c->repos.v[i];
		size_t ol = (size_t)(slash - repo);

		if (strcasecmp(w, repo) == 0)
			return 1;
		if (strlen(w) == ol + 2 && strncasecmp(w, repo, ol) == 0 &&
		    strcmp(w + ol, "/*") == 0)
			return 1;
	}
	return 0;
}

/* Why the filters leave a delivery out, or 0 when they do not. */
static int
filtered_out(const struct delivery *d, char *why, size_t whylen)
{
	const struct cfg_github *c = &gh.cfg->trig.github;

	if (!event_wanted(c, d->event, d->action)) {
		snprintf(why, whylen, "event %s%s%s is not in "
		    "triggers.github.events", d->event, d->action[0] ? "." : "",
		    d->action);
		return 1;
	}
	if (!repo_wanted(c, d->repo)) {
		if (d->repo[0] == '\0')
			snprintf(why, whylen, "the delivery names no repository "
			    "and triggers.github.repos is set");
		else
			snprintf(why, whylen, "repository %s is not in "
			    "triggers.github.repos", d->repo);
		return 1;
	}
	return 0;
}

/* Was this delivery, or its signed body under another id, accepted before?
 * GH_SEEN_ID or GH_SEEN_BODY (with the earlier delivery's id in prev),
 * GH_NEW, or -1: a check that cannot be made lets nothing through. */
static int
seen(const struct delivery *d, char *prev, size_t prevlen)
{
	sqlite3_stmt *st;
	int rc, found = -1;

	if (state_db() == NULL || sqlite3_prepare_v2(state_db(),
	    "SELECT id, id = ?1 FROM github_delivery WHERE id = ?1 OR "
	    "sig = ?2 ORDER BY id = ?1 DESC LIMIT 1", -1, &st, NULL) !=
	    SQLITE_OK)
		return -1;
	sqlite3_bind_text(st, 1, d->id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, d->sig, -1, SQLITE_TRANSIENT);
	if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		snprintf(prev, prevlen, "%s", (const char *)
		    sqlite3_column_text(st, 0));
		found = sqlite3_column_int(st, 1) ? GH_SEEN_ID : GH_SEEN_BODY;
	} else if (rc == SQLITE_DONE)
		found = GH_NEW;
	else
		log_warnx("github: the delivery table cannot be read: %s",
		    sqlite3_errmsg(state_db()));
	sqlite3_finalize(st);
	return found;
}

static int
exec_sql(const char *sql)
{
	char *msg = NULL;

	if (sqlite3_exec(state_db(), sql, NULL, NULL, &msg) != SQLITE_OK) {
		log_warnx("github: %s: %s", sql, msg ? msg : "?");
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

/* Remember a delivery (accepted as run, or ignored: run NULL) and its
 * body's digest, and forget the oldest beyond the bound. */
static int
remember(const struct delivery *d, const char *run)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(state_db(), "INSERT INTO github_delivery(id, "
	    "run, ts_ms, sig) VALUES (?1, ?2, ?3, ?4)", -1, &st, NULL) !=
	    SQLITE_OK)
		return -1;
	sqlite3_bind_text(st, 1, d->id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, run, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 3, now_ms());
	sqlite3_bind_text(st, 4, d->sig, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return -1;
	if (sqlite3_prepare_v2(state_db(), "DELETE FROM github_delivery WHERE "
	    "seq <= (SELECT MAX(seq) FROM github_delivery) - ?1", -1, &st,
	    NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_int(st, 1, GH_DELIVERY_KEEP);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -1;
}

static void
audit_ignored(const struct delivery *d, const char *why)
{
	cJSON *rec = audit_new(NULL, "github_ignored");

	if (rec == NULL)
		return;
	cJSON_AddStringToObject(rec, "delivery", d->id);
	cJSON_AddStringToObject(rec, "github_event", d->event);
	cJSON_AddStringToObject(rec, "action", d->action);
	cJSON_AddStringToObject(rec, "repo", d->repo);
	cJSON_AddStringToObject(rec, "reason", why);
	if (audit_emit(rec) == -1)
		log_warnx("github: the ignored delivery could not be audited");
}

static char *
meta_of(const struct delivery *d)
{
	cJSON *m = cJSON_CreateObject();
	char *text;

	cJSON_AddStringToObject(m, "delivery", d->id);
	cJSON_AddStringToObject(m, "event", d->event);
	cJSON_AddStringToObject(m, "action", d->action);
	cJSON_AddStringToObject(m, "repo", d->repo);
	if ((text = cJSON_PrintUnformatted(m)) == NULL)
		fatalx("github: out of memory");
	cJSON_Delete(m);
	return text;
}

/*
 * Journal the run and remember the delivery in one transaction, committed
 * before the 202: after a crash either both are there (a redelivery is a
 * duplicate, the run is replayed) or neither (a redelivery runs).
 */
static void
submit(struct evhttp_request *req, const struct delivery *d)
{
	const struct cfg_github *c = &gh.cfg->trig.github;
	struct wh_var vars[4] = {
		{ "event", d->event, strlen(d->event) },
		{ "action", d->action, strlen(d->action) },
		{ "repo", d->repo, strlen(d->repo) },
		{ "body", d->payload, d->len },
	};
	char id[RUN_ID_LEN], *prompt, *meta;
	struct run_request rr;
	int tx = state_db() != NULL, rc, e = 0;
	cJSON *obj;

	if ((prompt = wh_render_vars(c->prompt, vars, nitems(vars))) == NULL) {
		wh_reply_error(req, 413, "Payload Too Large",
		    "the rendered prompt would be too large");
		return;
	}
	meta = meta_of(d);
	memset(&rr, 0, sizeof(rr));
	rr.trigger = GH_NAME;
	rr.prompt = prompt;
	rr.meta = meta;
	if (tx && exec_sql("BEGIN IMMEDIATE") == -1) {
		rc = -1;
		e = EIO;
		goto refused;
	}
	if ((rc = run_submit(&rr, id, sizeof(id))) == -1)
		e = errno;
	else if (tx && (remember(d, id) == -1 ||
	    exec_sql("COMMIT") == -1)) {
		/* The run is queued already and will run; only the
		 * acknowledgement is withheld, so GitHub retries. */
		log_warnx("github: delivery %s could not be committed: %s",
		    d->id, sqlite3_errmsg(state_db()));
		rc = -1;
		e = EIO;
	}
refused:
	if (rc == -1) {
		if (tx)
			sqlite3_exec(state_db(), "ROLLBACK", NULL, NULL, NULL);
		wh_reply_refused(req, e);
		goto out;
	}
	log_info("github: delivery %s (%s%s%s, %s) started run %s",
	    d->id, d->event, d->action[0] ? "." : "", d->action,
	    d->repo[0] ? d->repo : "no repository", id);
	obj = cJSON_CreateObject();
	cJSON_AddStringToObject(obj, "run", id);
	cJSON_AddStringToObject(obj, "status", "accepted");
	wh_reply_json(req, 202, "Accepted", obj);
out:
	free(prompt);
	free(meta);
}

/*
 * The payload: the body itself (content type application/json), or the
 * `payload` field of a form (application/x-www-form-urlencoded), both of
 * which GitHub can send. Returns the parsed object and points d at its text;
 * *form holds the decoded text the caller frees.
 */
static cJSON *
payload_of(struct evhttp_request *req, const unsigned char *body, size_t len,
    struct delivery *d, char **form)
{
	const char *ct = evhttp_find_header(evhttp_request_get_input_headers(
	    req), "Content-Type");
	cJSON *obj;

	*form = NULL;
	d->payload = (const char *)body;
	d->len = len;
	if (ct != NULL && strncasecmp(ct, "application/x-www-form-urlencoded",
	    33) == 0) {
		struct evkeyvalq q;
		char *text = xstrndup((const char *)body, len);
		const char *p;

		TAILQ_INIT(&q);
		if (evhttp_parse_query_str(text, &q) == 0 &&
		    (p = evhttp_find_header(&q, "payload")) != NULL)
			*form = xstrdup(p);
		evhttp_clear_headers(&q);
		free(text);
		if (*form == NULL)
			return NULL;
		d->payload = *form;
		d->len = strlen(*form);
	}
	obj = cJSON_ParseWithLength(d->payload, d->len);
	if (obj != NULL && !cJSON_IsObject(obj)) {
		cJSON_Delete(obj);
		obj = NULL;
	}
	return obj;
}

static const char *
str_at(const cJSON *obj, const char *a, const char *b)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, a);

	if (b != NULL)
		v = cJSON_GetObjectItemCaseSensitive(v, b);
	return cJSON_IsString(v) ? v->valuestring : "";
}

static void
reply_status(struct evhttp_request *req, int code, const char *phrase,
    const char *status, const struct delivery *d, const char *reason)
{
	cJSON *obj = cJSON_CreateObject();

	cJSON_AddStringToObject(obj, "status", status);
	if (d != NULL)
		cJSON_AddStringToObject(obj, "delivery", d->id);
	if (reason != NULL)
		cJSON_AddStringToObject(obj, "reason", reason);
	wh_reply_json(req, code, phrase, obj);
}

/* A redelivery (the same id) or a replay (the same signed body under
 * another id) is answered alike and starts nothing; only the log and the
 * reason tell them apart. */
static void
reply_duplicate(struct evhttp_request *req, const struct delivery *d,
    int how, const char *prev)
{
	char why[GH_REASON_MAX];

	if (how == GH_SEEN_ID) {
		log_info("github: delivery %s was seen before: duplicate",
		    d->id);
		reply_status(req, 200, "OK", "duplicate", d, NULL);
		return;
	}
	log_warnx("github: delivery %s repeats the signed body of delivery "
	    "%s: duplicate (a replay?)", d->id, prev);
	snprintf(why, sizeof(why), "the same signed body as delivery %s",
	    prev);
	reply_status(req, 200, "OK", "duplicate", d, why);
}

/*
 * One delivery; after the signature, every answer GitHub can see as a
 * success is a 2xx (ping 200, duplicate 200, ignored 202, accepted 202).
 * X-GitHub-Delivery is required: GitHub always sends it, and a delivery
 * without one could not be told from a redelivery.
 */
static void
handle(struct evhttp_request *req, const unsigned char *body, size_t len,
    const char *sig)
{
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	struct delivery d;
	char why[GH_REASON_MAX], prev[GH_DELIVERY_MAX + 1], *form = NULL;
	cJSON *payload;
	int how;

	memset(&d, 0, sizeof(d));
	d.sig = sig;
	d.event = evhttp_find_header(in, "X-GitHub-Event");
	d.id = evhttp_find_header(in, "X-GitHub-Delivery");
	if (d.event == NULL || !token_ok(d.event, GH_EVENT_MAX, "_")) {
		wh_reply_error(req, 400, "Bad Request", "missing or malformed "
		    "X-GitHub-Event header");
		return;
	}
	if (d.id == NULL || !token_ok(d.id, GH_DELIVERY_MAX, "-_.")) {
		wh_reply_error(req, 400, "Bad Request", "missing or malformed "
		    "X-GitHub-Delivery header (required: it tells a new "
		    "delivery from a repeated one)");
		return;
	}
	if (strcmp(d.event, "ping") == 0) {
		log_info("github: ping (delivery %s)", d.id);
		reply_status(req, 200, "OK", "pong", &d, NULL);
		return;
	}
	if ((payload = payload_of(req, body, len, &d, &form)) == NULL) {
		wh_reply_error(req, 400, "Bad Request", "the payload is not a "
		    "JSON object");
		goto out;
	}
	d.action = str_at(payload, "action", NULL);
	d.repo = str_at(payload, "repository", "full_name");
	if ((how = seen(&d, prev, sizeof(prev))) == -1)
		wh_reply_error(req, 503, "Service Unavailable", "the delivery "
		    "table cannot be read, so a repeat cannot be told; retry "
		    "later");
	else if (how != GH_NEW)
		reply_duplicate(req, &d, how, prev);
	else if (filtered_out(&d, why, sizeof(why))) {
		log_info("github: delivery %s ignored: %s", d.id, why);
		/* Kept like an accepted one: the event name is a header the
		 * signature does not cover, and this body must not come back
		 * under a name the filters let through. */
		if (remember(&d, NULL) == -1)
			log_warnx("github: the ignored delivery %s could not be "
			    "remembered: %s", d.id, sqlite3_errmsg(state_db()));
		audit_ignored(&d, why);
		reply_status(req, 202, "Accepted", "ignored", &d, why);
	} else
		submit(req, &d);
	cJSON_Delete(payload);
out:
	free(form);
}

/* The header was just found to hold the body's HMAC, so its digits, in
 * lower case (senders differ in case), are the digest of the signed body. */
static void
digest_of(const char *header, char out[GH_DIGEST_HEX + 1])
{
	const char *hex = header + strlen(WH_SIG_PREFIX);

	for (size_t i = 0; i < GH_DIGEST_HEX; i++)
		out[i] = (hex[i] >= 'A' && hex[i] <= 'F') ? hex[i] - 'A' + 'a' :
		    hex[i];
	out[GH_DIGEST_HEX] = '\0';
}

static void
gh_request(struct evhttp_request *req, void *arg)
{
	const struct cfg_github *c = &gh.cfg->trig.github;
	struct evbuffer *in;
	const unsigned char *body;
	const char *sighdr;
	char sig[GH_DIGEST_HEX + 1];
	size_t len;
	int r;

	if (wh_precheck(&gh.srv, req, c->path) == -1)
		return;
	in = evhttp_request_get_input_buffer(req);
	len = evbuffer_get_length(in);
	body = len > 0 ? evbuffer_pullup(in, -1) : (const unsigned char *)"";
	if (body == NULL)
		fatalx("github: out of memory");
	sighdr = evhttp_find_header(evhttp_request_get_input_headers(req),
	    WH_SIG_HEADER);
	r = wh_verify_signature(c->secret, body, len, sighdr);
	if (r != WH_SIG_OK) {
		wh_audit_refusal(GH_NAME, req, 401, wh_sig_reason(r));
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "WWW-Authenticate", WH_SIG_HEADER);
		wh_reply_error(req, 401, "Unauthorized", wh_sig_reason(r));
		return;
	}
	digest_of(sighdr, sig);
	handle(req, body, len, sig);
}

/* A table from before body digests were kept gets the column; its old rows
 * keep deduplicating by id. */
static int
add_sig_column(char **msg)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(state_db(), "SELECT sig FROM github_delivery "
	    "LIMIT 0", -1, &st, NULL) == SQLITE_OK) {
		sqlite3_finalize(st);
		return 0;
	}
	if (sqlite3_exec(state_db(), "ALTER TABLE github_delivery ADD COLUMN "
	    "sig TEXT", NULL, NULL, msg) != SQLITE_OK)
		return -1;
	log_info("github: the delivery table now keeps body digests");
	return 0;
}

static int
gh_prepare(const struct cfg *cfg, char *err, size_t errlen)
{
	const struct cfg_github *c = &cfg->trig.github;
	char *msg = NULL;

	if (c->secret == NULL || c->secret[0] == '\0') {
		snprintf(err, errlen, "triggers.github.secret is empty");
		return -1;
	}
	if (state_db() == NULL || sqlite3_exec(state_db(), gh_schema, NULL,
	    NULL, &msg) != SQLITE_OK || add_sig_column(&msg) == -1 ||
	    sqlite3_exec(state_db(), gh_index, NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, errlen, "github: state database: %s",
		    msg ? msg : "not open");
		sqlite3_free(msg);
		return -1;
	}
	gh.cfg = cfg;
	return wh_server_bind(&gh.srv, GH_NAME, &c->listen, gh_request, err,
	    errlen);
}

static int
gh_start(const struct cfg *cfg, char *err, size_t errlen)
{
	if (wh_server_start(&gh.srv, err, errlen) == -1)
		return -1;
	trig_set_state(GH_NAME, TRIG_UP, NULL);
	return 0;
}

static void
gh_stop(void)
{
	wh_server_stop(&gh.srv);
}

static void
gh_free(void)
{
	wh_server_free(&gh.srv);
	gh.cfg = NULL;
}

const struct trigger_def trigger_github = {
	.name = GH_NAME,
	.enabled = gh_enabled,
	.prepare = gh_prepare,
	.start = gh_start,
	.stop = gh_stop,
	.deliver = NULL,
	.status = NULL,
	.free = gh_free,
};
