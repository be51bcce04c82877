/*
 * The IMAP mailbox trigger (SPEC section 2): each new mail in one mailbox
 * becomes a run; with `smtp:` configured, the run's answer goes back to the
 * sender as a threaded reply.
 *
 * libetpan is blocking, so the mailbox lives on a worker thread created in
 * start (after the sandbox, which refuses to apply once threads exist). The
 * worker never touches the loop's state: it asks the loop thread to submit a
 * run and commit the cursor (loop_post) and waits for the answer, and
 * deliver() hands finished runs back through a locked queue and a wake-up
 * pipe that the worker polls next to the IMAP socket while it IDLEs.
 *
 * TLS: libetpan built with GnuTLS checks no certificate, so before LOGIN the
 * worker verifies the chain the server sent, and the host name, against the
 * system trust plus ca_file (loaded in prepare, before the sandbox). There is
 * no plaintext path: STARTTLS that is not offered is an error, never a login
 * in the clear.
 *
 * New mail is found by UID. The cursor "imap.<mailbox>" holds
 * "UIDVALIDITY:UID" of the last mail whose run was accepted: it advances
 * only after run_submit journaled the mail, in the same loop callback, so a
 * restart or reconnect fetches exactly what lies above it. The one gap, a
 * crash between the journal commit and the cursor commit, is closed at
 * start: a pending journal event carries its UID in the meta.
 *
 * A first start, and a changed UIDVALIDITY (the mailbox was rebuilt and the
 * old UIDs mean nothing), begin at the mailbox's end: mail already there is
 * left alone, since af cannot know which of it was answered before; only
 * mail arriving afterwards starts runs. Both are logged.
 *
 * Conversations: From, References and In-Reply-To are whatever the sender
 * wrote, so a mail that names Alice and her thread's ids proves nothing and
 * must not load her history or memories. A mail continues a conversation
 * only by answering a reply af sent in it, to the address it came from: each
 * reply gets a random Message-ID, remembered in the state database with its
 * conversation and recipient (reply_id_new, reply_conv). Any other mail
 * starts a conversation of its own under a fresh key.
 */
#include <sys/queue.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <libetpan/libetpan.h>

#include "audit/audit.h"
#include "config.h"
#include "loop.h"
#include "run.h"
#include "state.h"
#include "trigger.h"
#include "triggers/mime.h"
#include "triggers/smtp.h"
#include "util.h"

#define IMAP_NAME		"imap"
#define IMAP_TIMEOUT_S		30		/* one IMAP command */
#define IMAP_IDLE_MS		(25 * 60 * 1000) /* RFC 2177: before 29 min */
#define IMAP_POLL_MS		30000		/* no IDLE: look this often */
#define IMAP_STALL_MS		2000		/* a refused mail is retried */
#define IMAP_BACKOFF_MIN_MS	1000
#define IMAP_BACKOFF_MAX_MS	60000
#define IMAP_MAX_MESSAGE	(10 << 20)	/* bodies fetched up to this */
#define IMAP_MAX_HEADER		(256 << 10)	/* headers of a bigger mail */
#define IMAP_BATCH		50		/* mails per round */
#define IMAP_OUTQ_MAX		256		/* finished runs waiting */
#define IMAP_QUIT_GRACE_MS	5000		/* then connections are cut */
#define IMAP_CHAIN_MAX		16		/* certificates verified */
#define IMAP_CONV_MAX		300
#define IMAP_REPLY_KEY		"imap-reply."	/* + slot: a reply af sent */
#define IMAP_REPLY_NEXT		"imap-reply.next"	/* the slot to use next */
#define IMAP_REPLIES_KEEP	10000		/* replies that can be answered */
#define IMAP_REPLY_VALUE_MAX	2048

/* A finished run, handed from deliver() to the worker. */
struct imap_job {
	TAILQ_ENTRY(imap_job)	 entry;
	uint32_t		 uidvalidity;
	uint32_t		 uid;
	int			 seen;		/* mark \Seen */
	char			*reply;		/* body to send, or NULL */
	char			*to;
	char			*subject;
	char			*message_id;
	char			*references;
	char			*reply_id;	/* our reply's Message-ID */
	char			 run_id[RUN_ID_LEN];
};
TAILQ_HEAD(imap_jobq, imap_job);

/* A request the worker makes of the loop thread and waits for. It lives on
 * the worker's stack: the loop answers before the worker returns, or never
 * runs it at all (loop_free drops posts unrun). */
enum call_kind { CALL_SUBMIT, CALL_CURSOR };
struct imap_call {
	enum call_kind		 kind;
	const char		*prompt;
	const char		*meta;
	const char		*from_addr;	/* the mail's, or NULL */
	const char		*ids;		/* its References, In-Reply-To */
	uint32_t		 uidvalidity;
	uint32_t		 uid;
	const char		*why;		/* CALL_CURSOR: for the log */
	int			 done;
	int			 rc;		/* 0, or an errno */
	int			 cursor_failed;
	char			 run_id[RUN_ID_LEN];
};

enum round { ROUND_OK, ROUND_MORE, ROUND_STALL, ROUND_STOP, ROUND_ERROR };

static struct {
	const struct cfg	*cfg;
	const struct cfg_imap	*ic;
	char			*cursor_key;
	char			*from;		/* our address for replies */
	char			*capath;	/* libcurl's system CA folder */
	uint32_t		 reply_next;	/* loop thread only */
	gnutls_x509_trust_list_t trust;
	int			 wake[2];
	pthread_t		 thread;
	int			 started;

	pthread_mutex_t		 mu;	/* guards everything below */
	pthread_cond_t		 cv;
	int			 stopping;	/* no new mail: stop() */
	int			 quit;		/* leave: free() */
	int			 exited;
	int			 sock;		/* live IMAP socket, or -1 */
	struct imap_jobq	 jobs;
	size_t			 njobs;
	/* Jobs the worker finished: the loop takes their answers out of
	 * the outbox (run_delivered), since the database is the loop's. */
	struct imap_jobq	 finished;
	enum trig_state		 state;
	char			 error[256];
	int			 have_cursor;
	uint32_t		 uidvalidity;
	uint32_t		 last_uid;
	int			 idle;
	uint64_t		 received;
	uint64_t		 refused;
	uint64_t		 skipped;
	uint64_t		 sent;
	uint64_t		 send_failed;
	atomic_int		 abort;		/* cut blocking transfers */
} im = { .wake = { -1, -1 }, .sock = -1 };

static int
imap_enabled(const struct cfg *cfg)
{
	return cfg->trig.imap.enabled;
}

/* Worker-side helpers for the shared state. */

static int
flag(const int *f)
{
	int v;

	pthread_mutex_lock(&im.mu);
	v = *f;
	pthread_mutex_unlock(&im.mu);
	return v;
}

static void
wake_worker(void)
{
	char c = 1;

	if (im.wake[1] != -1 && write(im.wake[1], &c, 1) == -1 &&
	    errno != EAGAIN)
		log_warn("imap: wake");
}

static void
drain_wake(void)
{
	char b[64];

	while (read(im.wake[0], b, sizeof(b)) > 0)
		;
}

static void
post_state(void *arg)
{
	enum trig_state st;
	char err[256];

	pthread_mutex_lock(&im.mu);
	st = im.state;
	snprintf(err, sizeof(err), "%s", im.error);
	pthread_mutex_unlock(&im.mu);
	trig_set_state(IMAP_NAME, st, err[0] ? err : NULL);
}

/* The status port is the loop's: the worker records and posts. */
static void
set_state(enum trig_state st, const char *err)
{
	pthread_mutex_lock(&im.mu);
	im.state = st;
	snprintf(im.error, sizeof(im.error), "%s", err != NULL ? err : "");
	pthread_mutex_unlock(&im.mu);
	loop_post(post_state, NULL);
}

/* Loop-thread side of the calls. */

static int
cursor_save(uint32_t v, uint32_t uid)
{
	char val[32];

	snprintf(val, sizeof(val), "%u:%u", v, uid);
	return state_cursor_set(im.cursor_key, val);
}

/*
 * A Message-ID for the reply to a run of conv, remembered with the address
 * it goes to, so that an answer to it continues conv. The ids live in a
 * ring of IMAP_REPLIES_KEEP slots: the oldest is forgotten first, and an
 * answer to it starts a new conversation. The next slot is saved before the
 * slot, so a crash between the two skips a slot rather than reuses one.
 * NULL when the database cannot be written. Caller frees.
 */
static char *
reply_id_new(const char *conv, const char *to)
{
	char key[32], next[16], tok[SMTP_TOKEN_LEN], *val;
	uint32_t slot = im.reply_next;
	cJSON *o;
	int rc;

	im.reply_next = (slot + 1) % IMAP_REPLIES_KEEP;
	snprintf(next, sizeof(next), "%u", im.reply_next);
	snprintf(key, sizeof(key), IMAP_REPLY_KEY "%u", slot);
	smtp_token(tok);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "token", tok);
	cJSON_AddStringToObject(o, "to", to);
	cJSON_AddStringToObject(o, "conv", conv);
	if ((val = cJSON_PrintUnformatted(o)) == NULL)
		fatalx("imap: out of memory");
	cJSON_Delete(o);
	rc = state_cursor_set(IMAP_REPLY_NEXT, next) == 0 &&
	    state_cursor_set(key, val) == 0;
	cJSON_free(val);
	if (!rc)
		return NULL;
	return xasprintf("<af.%u.%s@%s>", slot, tok, strchr(im.from, '@') + 1);
}

/* The slot and token of an id in reply_id_new's shape, "<af.SLOT.TOKEN@
 * domain>"; -1 for any other. The token is only a claim until checked. */
static int
reply_id_parse(const char *id, uint32_t *slot, char tok[SMTP_TOKEN_LEN])
{
	size_t n = SMTP_TOKEN_LEN - 1;
	unsigned long v;
	const char *p;
	char *end;

	if (strncmp(id, "<af.", 4) != 0 || !isdigit((unsigned char)id[4]))
		return -1;
	errno = 0;
	v = strtoul(id + 4, &end, 10);
	if (errno != 0 || v >= IMAP_REPLIES_KEEP || *end != '.')
		return -1;
	p = end + 1;
	if (strspn(p, "0123456789abcdef") != n || p[n] != '@')
		return -1;
	memcpy(tok, p, n);
	tok[n] = '\0';
	*slot = (uint32_t)v;
	return 0;
}

/*
 * The conversation of the reply that id names, when af sent that reply to
 * from: the token must be the one stored for the slot (a reused slot holds
 * a newer reply's), and the mail must come from the address the reply went
 * to, so an id passed on (a forwarded reply) opens nothing. NULL otherwise.
 * Caller frees.
 */
static char *
reply_conv(const char *id, const char *from)
{
	char key[32], val[IMAP_REPLY_VALUE_MAX], tok[SMTP_TOKEN_LEN];
	const cJSON *t, *to, *conv;
	uint32_t slot;
	char *c = NULL;
	cJSON *o;

	if (reply_id_parse(id, &slot, tok) == -1)
		return NULL;
	snprintf(key, sizeof(key), IMAP_REPLY_KEY "%u", slot);
	if (state_cursor_get(key, val, sizeof(val)) != 1 ||
	    (o = cJSON_Parse(val)) == NULL)
		return NULL;
	t = cJSON_GetObjectItemCaseSensitive(o, "token");
	to = cJSON_GetObjectItemCaseSensitive(o, "to");
	conv = cJSON_GetObjectItemCaseSensitive(o, "conv");
	if (cJSON_IsString(t) && cJSON_IsString(to) && cJSON_IsString(conv) &&
	    strlen(t->valuestring) == SMTP_TOKEN_LEN - 1 &&
	    ct_equal(t->valuestring, tok, SMTP_TOKEN_LEN - 1) &&
	    strcasecmp(to->valuestring, from) == 0)
		c = xstrdup(conv->valuestring);
	cJSON_Delete(o);
	return c;
}

/*
 * The conversation of a mail from `from` (NULL: no usable address) that
 * refers to ids (its References, then In-Reply-To): the one of the newest
 * id that is a reply af sent to from, else a new one of its own. Never a key
 * made from what the mail says, which anyone can write. Caller frees.
 */
static char *
conv_for(const char *from, const char *ids)
{
	struct strlist v = { 0 };
	char fresh[32], *copy, *tok, *save = NULL, *c = NULL;

	if (from != NULL && ids != NULL) {
		copy = xstrdup(ids);
		for (tok = strtok_r(copy, " ", &save); tok != NULL;
		    tok = strtok_r(NULL, " ", &save))
			strlist_add(&v, tok);
		free(copy);
		for (size_t i = v.n; i > 0 && c == NULL; i--)
			c = reply_conv(v.v[i - 1], from);
		strlist_free(&v);
		if (c != NULL)
			return c;
	}
	make_id("c-", fresh, sizeof(fresh));
	c = xasprintf("imap:%s %s", from != NULL ? from : "(no address)",
	    fresh);
	if (strlen(c) > IMAP_CONV_MAX)
		c[IMAP_CONV_MAX] = '\0';
	return c;
}

static void
on_call(void *arg)
{
	struct imap_call *c = arg;
	struct run_request req;
	char id[RUN_ID_LEN] = "", *conv;
	int rc = 0, cfail = 0;
	cJSON *rec;

	if (c->kind == CALL_SUBMIT) {
		conv = conv_for(c->from_addr, c->ids);
		memset(&req, 0, sizeof(req));
		req.trigger = IMAP_NAME;
		req.prompt = c->prompt;
		req.conversation = conv;
		req.meta = c->meta;
		if (run_submit(&req, id, sizeof(id)) == -1)
			rc = errno;
		free(conv);
	} else {
		rec = audit_new(NULL, "imap_skipped");
		cJSON_AddNumberToObject(rec, "uid", c->uid);
		cJSON_AddStringToObject(rec, "reason", c->why);
		if (audit_emit(rec) == -1)
			rc = EIO;
	}
	if (rc == 0 && cursor_save(c->uidvalidity, c->uid) == -1)
		cfail = 1;
	pthread_mutex_lock(&im.mu);
	c->rc = rc;
	c->cursor_failed = cfail;
	snprintf(c->run_id, sizeof(c->run_id), "%s", id);
	c->done = 1;
	pthread_cond_broadcast(&im.cv);
	pthread_mutex_unlock(&im.mu);
}

/* Run c on the loop thread and wait; -1 when af quits first. */
static int
loop_call(struct imap_call *c)
{
	int done;

	c->done = 0;
	loop_post(on_call, c);
	pthread_mutex_lock(&im.mu);
	while (!c->done && !im.quit)
		pthread_cond_wait(&im.cv, &im.mu);
	done = c->done;
	pthread_mutex_unlock(&im.mu);
	return done ? 0 : -1;
}

/* TLS verification. */

/* SNI for a host name; an IP address is sent without one (RFC 6066). */
static void
sni_cb(struct mailstream_ssl_context *ctx, void *arg)
{
	const char *host = arg;

	if (strspn(host, "0123456789.") != strlen(host) &&
	    strchr(host, ':') == NULL)
		mailstream_ssl_set_server_name(ctx, (char *)host);
}

/*
 * The chain the server sent, checked against the trust list and the
 * configured host name (DNS name or IP address in the certificate). Done
 * before LOGIN sends the password; a failure says why in err.
 */
static int
verify_peer(mailimap *s, char *err, size_t errlen)
{
	gnutls_x509_crt_t crts[IMAP_CHAIN_MAX];
	gnutls_typed_vdata_st vd;
	gnutls_datum_t txt = { NULL, 0 };
	unsigned int n = 0, status = 0;
	carray *chain;
	int rc = -1, r;

	chain = mailstream_get_certificate_chain(s->imap_stream);
	if (chain == NULL || carray_count(chain) == 0) {
		snprintf(err, errlen, "the server sent no certificate");
		goto out;
	}
	for (unsigned int i = 0; i < carray_count(chain) &&
	    n < IMAP_CHAIN_MAX; i++) {
		MMAPString *der = carray_get(chain, i);
		gnutls_datum_t d = { (unsigned char *)der->str,
		    (unsigned int)der->len };

		if (gnutls_x509_crt_init(&crts[n]) < 0) {
			snprintf(err, errlen, "out of memory for certificates");
			goto out;
		}
		if (gnutls_x509_crt_import(crts[n], &d, GNUTLS_X509_FMT_DER)
		    < 0) {
			gnutls_x509_crt_deinit(crts[n]);
			snprintf(err, errlen, "the server's certificate cannot "
			    "be read");
			goto out;
		}
		n++;
	}
	memset(&vd, 0, sizeof(vd));
	vd.type = GNUTLS_DT_DNS_HOSTNAME;
	vd.data = (unsigned char *)im.ic->host;
	r = gnutls_x509_trust_list_verify_crt2(im.trust, crts, n, &vd, 1, 0,
	    &status, NULL);
	if (r < 0) {
		snprintf(err, errlen, "certificate check failed: %s",
		    gnutls_strerror(r));
		goto out;
	}
	if (status != 0) {
		gnutls_certificate_verification_status_print(status,
		    GNUTLS_CRT_X509, &txt, 0);
		snprintf(err, errlen, "certificate not trusted for %s: %s",
		    im.ic->host, txt.data != NULL ? (char *)txt.data :
		    "verification failed");
		gnutls_free(txt.data);
		goto out;
	}
	rc = 0;
out:
	for (unsigned int i = 0; i < n; i++)
		gnutls_x509_crt_deinit(crts[i]);
	if (chain != NULL)
		mailstream_certificate_chain_free(chain);
	return rc;
}

/* The session. */

struct sess {
	mailimap	*s;
	uint32_t	 uidvalidity;
	uint32_t	 uidnext;
	int		 idle;
};

static const char *
imap_strerror(mailimap *s, int r)
{
	if (s != NULL && s->imap_response != NULL && s->imap_response[0])
		return s->imap_response;
	switch (r) {
	case MAILIMAP_ERROR_STREAM:
		return "connection lost";
	case MAILIMAP_ERROR_CONNECTION_REFUSED:
		return "connection refused";
	case MAILIMAP_ERROR_SSL:
		return "TLS handshake failed";
	case MAILIMAP_ERROR_LOGIN:
		return "login refused";
	case MAILIMAP_ERROR_PARSE:
		return "unreadable server response";
	}
	return "IMAP error";
}

static void
sess_close(struct sess *ss)
{
	if (ss->s == NULL)
		return;
	pthread_mutex_lock(&im.mu);
	im.sock = -1;
	pthread_mutex_unlock(&im.mu);
	mailimap_free(ss->s);
	ss->s = NULL;
}

static int
capability(mailimap *s, char *err, size_t errlen)
{
	struct mailimap_capability_data *caps = NULL;
	int r;

	if ((r = mailimap_capability(s, &caps)) != MAILIMAP_NO_ERROR) {
		snprintf(err, errlen, "CAPABILITY: %s", imap_strerror(s, r));
		return -1;
	}
	mailimap_capability_data_free(caps);
	return 0;
}

/* Connect with TLS (implicit, or STARTTLS that must be offered), verify the
 * server, then LOGIN and SELECT. *fatal is set for errors a retry will not
 * cure by itself (certificate, credentials, no STARTTLS). */
static int
sess_open(struct sess *ss, char *err, size_t errlen, int *fatal)
{
	const struct cfg_imap *ic = im.ic;
	struct mailimap_selection_info *sel;
	int r, preauth;

	*fatal = 0;
	memset(ss, 0, sizeof(*ss));
	if ((ss->s = mailimap_new(0, NULL)) == NULL)
		fatalx("imap: out of memory");
	mailimap_set_timeout(ss->s, IMAP_TIMEOUT_S);
	if (ic->tls == TLS_IMPLICIT)
		r = mailimap_ssl_connect_with_callback(ss->s, ic->host,
		    (uint16_t)ic->port, sni_cb, ic->host);
	else
		r = mailimap_socket_connect(ss->s, ic->host,
		    (uint16_t)ic->port);
	if (r != MAILIMAP_NO_ERROR_AUTHENTICATED &&
	    r != MAILIMAP_NO_ERROR_NON_AUTHENTICATED) {
		snprintf(err, errlen, "cannot connect to %s:%ld: %s", ic->host,
		    ic->port, imap_strerror(NULL, r));
		return -1;
	}
	preauth = r == MAILIMAP_NO_ERROR_AUTHENTICATED;
	pthread_mutex_lock(&im.mu);
	im.sock = mailstream_low_get_fd(mailstream_get_low(ss->s->imap_stream));
	pthread_mutex_unlock(&im.mu);
	if (ic->tls == TLS_STARTTLS) {
		if (preauth) {
			*fatal = 1;
			snprintf(err, errlen, "the server logged us in before "
			    "TLS (PREAUTH); af never uses a plaintext session");
			return -1;
		}
		if (capability(ss->s, err, errlen) == -1)
			return -1;
		if (!mailimap_has_extension(ss->s, "STARTTLS")) {
			*fatal = 1;
			snprintf(err, errlen, "the server does not offer "
			    "STARTTLS; af never logs in without TLS");
			return -1;
		}
		r = mailimap_socket_starttls_with_callback(ss->s, sni_cb,
		    ic->host);
		if (r != MAILIMAP_NO_ERROR) {
			snprintf(err, errlen, "STARTTLS failed: %s",
			    imap_strerror(ss->s, r));
			return -1;
		}
		pthread_mutex_lock(&im.mu);
		im.sock = mailstream_low_get_fd(mailstream_get_low(
		    ss->s->imap_stream));
		pthread_mutex_unlock(&im.mu);
	}
	if (verify_peer(ss->s, err, errlen) == -1) {
		*fatal = 1;
		return -1;
	}
	if (!preauth && (r = mailimap_login(ss->s, ic->username,
	    ic->password)) != MAILIMAP_NO_ERROR) {
		*fatal = r == MAILIMAP_ERROR_LOGIN;
		snprintf(err, errlen, "LOGIN as %s: %s", ic->username,
		    imap_strerror(ss->s, r));
		return -1;
	}
	/* Capabilities may change after LOGIN; IDLE is looked up there. */
	if (capability(ss->s, err, errlen) == -1)
		return -1;
	ss->idle = mailimap_has_idle(ss->s);
	if ((r = mailimap_select(ss->s, ic->mailbox)) != MAILIMAP_NO_ERROR) {
		snprintf(err, errlen, "SELECT %s: %s", ic->mailbox,
		    imap_strerror(ss->s, r));
		return -1;
	}
	sel = ss->s->imap_selection_info;
	if (sel == NULL || sel->sel_uidvalidity == 0) {
		snprintf(err, errlen, "SELECT %s gave no UIDVALIDITY",
		    ic->mailbox);
		return -1;
	}
	ss->uidvalidity = sel->sel_uidvalidity;
	ss->uidnext = sel->sel_uidnext;
	return 0;
}

/* Attribute helpers over libetpan's fetch results. */

struct fetched {
	uint32_t	 uid;
	uint32_t	 size;
	const char	*body;
	size_t		 len;
};

static void
read_att(const struct mailimap_msg_att *ma, struct fetched *f)
{
	clistiter *it;

	memset(f, 0, sizeof(*f));
	for (it = clist_begin(ma->att_list); it != NULL; it = clist_next(it)) {
		const struct mailimap_msg_att_item *item = clist_content(it);
		const struct mailimap_msg_att_static *st;

		if (item->att_type != MAILIMAP_MSG_ATT_ITEM_STATIC ||
		    (st = item->att_data.att_static) == NULL)
			continue;
		switch (st->att_type) {
		case MAILIMAP_MSG_ATT_UID:
			f->uid = st->att_data.att_uid;
			break;
		case MAILIMAP_MSG_ATT_RFC822_SIZE:
			f->size = st->att_data.att_rfc822_size;
			break;
		case MAILIMAP_MSG_ATT_BODY_SECTION:
			if (st->att_data.att_body_section != NULL &&
			    st->att_data.att_body_section->sec_body_part !=
			    NULL) {
				f->body = st->att_data.att_body_section->
				    sec_body_part;
				f->len = st->att_data.att_body_section->
				    sec_length;
			}
			break;
		}
	}
}

/* The highest UID in the mailbox, 0 when it is empty. */
static int
highest_uid(struct sess *ss, uint32_t *out, char *err, size_t errlen)
{
	struct mailimap_fetch_type *ft;
	struct mailimap_set *set;
	struct fetched f;
	clist *res = NULL;
	clistiter *it;
	int r;

	*out = 0;
	if (ss->uidnext > 0) {
		*out = ss->uidnext - 1;
		return 0;
	}
	set = mailimap_set_new_single(0);	/* "*" */
	ft = mailimap_fetch_type_new_fetch_att_list_empty();
	mailimap_fetch_type_new_fetch_att_list_add(ft,
	    mailimap_fetch_att_new_uid());
	r = mailimap_uid_fetch(ss->s, set, ft, &res);
	mailimap_set_free(set);
	mailimap_fetch_type_free(ft);
	if (r == MAILIMAP_ERROR_FETCH)
		return 0;	/* an empty mailbox has no "*" */
	if (r != MAILIMAP_NO_ERROR) {
		snprintf(err, errlen, "UID FETCH *: %s", imap_strerror(ss->s,
		    r));
		return -1;
	}
	for (it = clist_begin(res); it != NULL; it = clist_next(it)) {
		read_att(clist_content(it), &f);
		if (f.uid > *out)
			*out = f.uid;
	}
	mailimap_fetch_list_free(res);
	return 0;
}

/* Decide where this session starts: the cursor, or the mailbox's end on a
 * first start or a new UIDVALIDITY (see the top of the file). */
static int
sess_cursor(struct sess *ss, char *err, size_t errlen)
{
	struct imap_call c;
	uint32_t end;
	int have;
	uint32_t v, last;

	pthread_mutex_lock(&im.mu);
	have = im.have_cursor;
	v = im.uidvalidity;
	last = im.last_uid;
	pthread_mutex_unlock(&im.mu);
	if (have && v == ss->uidvalidity)
		return 0;
	if (highest_uid(ss, &end, err, errlen) == -1)
		return -1;
	if (!have)
		log_info("imap: first start on %s: mail from UID %u on starts "
		    "runs; the %u message(s) already there are left alone",
		    im.ic->mailbox, end + 1, end);
	else
		log_warnx("imap: %s UIDVALIDITY changed from %u to %u (the "
		    "mailbox was rebuilt; last UID was %u): its current mail "
		    "is left alone, mail from UID %u on starts runs",
		    im.ic->mailbox, v, ss->uidvalidity, last, end + 1);
	memset(&c, 0, sizeof(c));
	c.kind = CALL_CURSOR;
	c.uidvalidity = ss->uidvalidity;
	c.uid = end;
	c.why = have ? "uidvalidity changed: mailbox start" : "first start";
	if (loop_call(&c) == -1)
		return -1;
	if (c.rc != 0 || c.cursor_failed) {
		snprintf(err, errlen, "the mailbox cursor cannot be saved");
		return -1;
	}
	pthread_mutex_lock(&im.mu);
	im.have_cursor = 1;
	im.uidvalidity = ss->uidvalidity;
	im.last_uid = end;
	pthread_mutex_unlock(&im.mu);
	return 0;
}

/* Mail: list, fetch, submit. */

static int
cmp_fetched(const void *a, const void *b)
{
	const struct fetched *x = a, *y = b;

	return x->uid < y->uid ? -1 : x->uid > y->uid;
}

/* UIDs above last with their sizes, ascending, at most IMAP_BATCH; *more
 * when there were more. */
static int
list_new(struct sess *ss, uint32_t last, struct fetched *out, size_t *n,
    int *more, char *err, size_t errlen)
{
	struct mailimap_fetch_type *ft;
	struct mailimap_set *set;
	struct fetched f;
	clist *res = NULL;
	clistiter *it;
	size_t cap = 0;
	int r;

	*n = 0;
	*more = 0;
	set = mailimap_set_new_interval(last + 1, 0);	/* last+1:* */
	ft = mailimap_fetch_type_new_fetch_att_list_empty();
	mailimap_fetch_type_new_fetch_att_list_add(ft,
	    mailimap_fetch_att_new_uid());
	mailimap_fetch_type_new_fetch_att_list_add(ft,
	    mailimap_fetch_att_new_rfc822_size());
	r = mailimap_uid_fetch(ss->s, set, ft, &res);
	mailimap_set_free(set);
	mailimap_fetch_type_free(ft);
	if (r != MAILIMAP_NO_ERROR) {
		snprintf(err, errlen, "UID FETCH: %s", imap_strerror(ss->s, r));
		return -1;
	}
	for (it = clist_begin(res); it != NULL; it = clist_next(it)) {
		read_att(clist_content(it), &f);
		/* "last+1:*" also names the highest UID when nothing is
		 * newer (RFC 3501 6.4.8): what is not above last is old. */
		if (f.uid <= last)
			continue;
		if (cap < IMAP_BATCH * 4)
			out[cap++] = f;
	}
	mailimap_fetch_list_free(res);
	qsort(out, cap, sizeof(*out), cmp_fetched);
	if (cap > IMAP_BATCH) {
		cap = IMAP_BATCH;
		*more = 1;
	}
	*n = cap;
	return 0;
}

/* The whole mail (BODY.PEEK[], which leaves \Seen alone) when it is within
 * the bound, else only its header block. res is the caller's to free. */
static int
fetch_one(struct sess *ss, uint32_t uid, int whole, clist **res,
    struct fetched *f, char *err, size_t errlen)
{
	struct mailimap_fetch_type *ft;
	struct mailimap_set *set;
	struct mailimap_fetch_att *fa;
	int r;

	*res = NULL;
	memset(f, 0, sizeof(*f));
	set = mailimap_set_new_single(uid);
	ft = mailimap_fetch_type_new_fetch_att_list_empty();
	mailimap_fetch_type_new_fetch_att_list_add(ft,
	    mailimap_fetch_att_new_uid());
	if (whole)
		fa = mailimap_fetch_att_new_body_peek_section(
		    mailimap_section_new(NULL));
	else
		fa = mailimap_fetch_att_new_body_peek_section_partial(
		    mailimap_section_new_header(), 0, IMAP_MAX_HEADER);
	mailimap_fetch_type_new_fetch_att_list_add(ft, fa);
	r = mailimap_uid_fetch(ss->s, set, ft, res);
	mailimap_set_free(set);
	mailimap_fetch_type_free(ft);
	if (r != MAILIMAP_NO_ERROR) {
		snprintf(err, errlen, "UID FETCH %u: %s", uid,
		    imap_strerror(ss->s, r));
		*res = NULL;
		return -1;
	}
	for (clistiter *it = clist_begin(*res); it != NULL;
	    it = clist_next(it)) {
		struct fetched g;

		read_att(clist_content(it), &g);
		if (g.uid == uid && g.body != NULL) {
			*f = g;
			break;
		}
	}
	return 0;
}

static char *
make_meta(const struct mime_msg *m, uint32_t v, uint32_t uid, int reply)
{
	cJSON *o = cJSON_CreateObject();
	char num[16], *s, *copy;

	snprintf(num, sizeof(num), "%u", v);
	cJSON_AddStringToObject(o, "uidvalidity", num);
	snprintf(num, sizeof(num), "%u", uid);
	cJSON_AddStringToObject(o, "uid", num);
	if (reply) {
		cJSON_AddStringToObject(o, "reply_to", m->from_addr);
		cJSON_AddStringToObject(o, "subject", m->subject);
		if (m->message_id != NULL)
			cJSON_AddStringToObject(o, "message_id",
			    m->message_id);
		if (m->references != NULL)
			cJSON_AddStringToObject(o, "references",
			    m->references);
	}
	if ((s = cJSON_PrintUnformatted(o)) == NULL)
		fatalx("imap: out of memory");
	cJSON_Delete(o);
	copy = xstrdup(s);
	cJSON_free(s);
	return copy;
}

/* What the prompt says after the mail, about its size and the answer. */
static char *
prompt_note(uint32_t size, int whole, int reply, const struct mime_msg *m)
{
	struct buf b;

	buf_init(&b);
	buf_add(&b, "", 0);
	if (!whole)
		buf_addf(&b, "(The email is %u bytes, over af's %d MiB bound: "
		    "only its headers were read, not its text or "
		    "attachments.)\n", size, IMAP_MAX_MESSAGE >> 20);
	if (reply)
		buf_addf(&b, "Your final answer is sent to %s as the reply "
		    "email's text.", m->from_addr);
	else
		buf_adds(&b, "No reply email will be sent; your final answer "
		    "is only recorded.");
	return buf_steal(&b);
}

/* One mail to one run. */
static enum round
take_mail(struct sess *ss, const struct fetched *lf, char *err, size_t errlen)
{
	int whole = lf->size <= IMAP_MAX_MESSAGE, reply;
	struct imap_call c;
	struct fetched f;
	struct mime_msg m;
	char nonce[RUN_ID_LEN], *prompt, *meta, *ids, *note;
	clist *res;

	if (fetch_one(ss, lf->uid, whole, &res, &f, err, errlen) == -1)
		return ROUND_ERROR;
	memset(&c, 0, sizeof(c));
	c.uidvalidity = ss->uidvalidity;
	c.uid = lf->uid;
	if (f.body == NULL) {
		/* Expunged between the listing and the fetch. */
		if (res != NULL)
			mailimap_fetch_list_free(res);
		c.kind = CALL_CURSOR;
		c.why = "gone before it could be read";
		log_info("imap: UID %u is gone before it could be read",
		    lf->uid);
		if (loop_call(&c) == -1)
			return ROUND_STOP;
		pthread_mutex_lock(&im.mu);
		im.skipped++;
		pthread_mutex_unlock(&im.mu);
		goto accepted;
	}
	mime_parse(f.body, f.len, MIME_TEXT_MAX, &m);
	mailimap_fetch_list_free(res);
	reply = im.ic->smtp.enabled && m.from_addr != NULL &&
	    !m.auto_submitted;
	make_id("m-", nonce, sizeof(nonce));
	note = prompt_note(lf->size, whole, reply, &m);
	prompt = mime_prompt(&m, im.ic->mailbox, nonce, note);
	meta = make_meta(&m, ss->uidvalidity, lf->uid, reply);
	ids = xasprintf("%s %s", m.references != NULL ? m.references : "",
	    m.in_reply_to != NULL ? m.in_reply_to : "");
	c.kind = CALL_SUBMIT;
	c.prompt = prompt;
	c.meta = meta;
	c.from_addr = m.from_addr;
	c.ids = ids;
	if (loop_call(&c) == -1)
		c.rc = ESHUTDOWN;
	free(note);
	free(prompt);
	free(meta);
	free(ids);
	mime_msg_free(&m);
	pthread_mutex_lock(&im.mu);
	im.received++;
	if (c.rc != 0 && c.rc != ESHUTDOWN)
		im.refused++;
	pthread_mutex_unlock(&im.mu);
	if (c.rc == ESHUTDOWN)
		return ROUND_STOP;
	if (c.rc != 0) {
		log_warnx("imap: UID %u waits: %s", lf->uid, c.rc == EAGAIN ?
		    "the run queue is full" : "events cannot be journaled");
		return ROUND_STALL;
	}
	log_info("imap: UID %u is run %s", lf->uid, c.run_id);
accepted:
	if (c.cursor_failed) {
		snprintf(err, errlen, "the mailbox cursor cannot be saved in "
		    "the state database");
		return ROUND_ERROR;
	}
	pthread_mutex_lock(&im.mu);
	im.last_uid = lf->uid;
	pthread_mutex_unlock(&im.mu);
	return ROUND_OK;
}

static enum round
fetch_new(struct sess *ss, char *err, size_t errlen)
{
	struct fetched *list = xcalloc(IMAP_BATCH * 4, sizeof(*list));
	enum round rd = ROUND_OK;
	size_t n;
	int more;

	uint32_t last;

	pthread_mutex_lock(&im.mu);
	last = im.last_uid;
	pthread_mutex_unlock(&im.mu);
	if (list_new(ss, last, list, &n, &more, err, errlen) == -1) {
		free(list);
		return ROUND_ERROR;
	}
	for (size_t i = 0; i < n && rd == ROUND_OK; i++) {
		if (flag(&im.stopping) || flag(&im.quit))
			rd = ROUND_STOP;
		else
			rd = take_mail(ss, &list[i], err, errlen);
	}
	free(list);
	return rd == ROUND_OK && more ? ROUND_MORE : rd;
}

/* Finished runs: replies out, then \Seen. */

static void
job_free(struct imap_job *j)
{
	free(j->reply);
	free(j->to);
	free(j->subject);
	free(j->message_id);
	free(j->references);
	free(j->reply_id);
	free(j);
}

static void
send_reply(struct imap_job *j)
{
	struct smtp_reply r;
	struct buf msg;
	char err[512];
	int rc;

	memset(&r, 0, sizeof(r));
	r.from = im.from;
	r.to = j->to;
	r.subject = j->subject;
	r.in_reply_to = j->message_id;
	r.references = j->references;
	r.message_id = j->reply_id;
	r.body = j->reply;
	buf_init(&msg);
	rc = smtp_build(&r, now_ms(), &msg, err, sizeof(err));
	if (rc == 0)
		rc = smtp_send(&im.cfg->trig.imap.smtp, im.capath, im.from,
		    j->to, msg.data, msg.len, &im.abort, err, sizeof(err));
	buf_free(&msg);
	pthread_mutex_lock(&im.mu);
	if (rc == 0)
		im.sent++;
	else
		im.send_failed++;
	pthread_mutex_unlock(&im.mu);
	if (rc == 0)
		log_info("imap: run %s: reply sent to %s", j->run_id, j->to);
	else
		log_warnx("imap: run %s: the reply to %s was not sent: %s",
		    j->run_id, j->to, err);
	free(j->reply);
	j->reply = NULL;
}

static int
mark_seen(struct sess *ss, const struct imap_job *j, char *err,
    size_t errlen)
{
	struct mailimap_flag_list *fl;
	struct mailimap_store_att_flags *sa;
	struct mailimap_set *set;
	int r;

	if (j->uidvalidity != ss->uidvalidity)
		return 0;	/* that UID means another mail now */
	fl = mailimap_flag_list_new_empty();
	mailimap_flag_list_add(fl, mailimap_flag_new_seen());
	sa = mailimap_store_att_flags_new_add_flags_silent(fl);
	set = mailimap_set_new_single(j->uid);
	r = mailimap_uid_store(ss->s, set, sa);
	mailimap_set_free(set);
	mailimap_store_att_flags_free(sa);
	if (r != MAILIMAP_NO_ERROR) {
		snprintf(err, errlen, "UID STORE %u +FLAGS (\\Seen): %s",
		    j->uid, imap_strerror(ss->s, r));
		return -1;
	}
	return 0;
}

/* Loop side: the answers of finished jobs leave the outbox. */
static void
take_finished(void *arg)
{
	struct imap_jobq q = TAILQ_HEAD_INITIALIZER(q);
	struct imap_job *j;

	pthread_mutex_lock(&im.mu);
	TAILQ_CONCAT(&q, &im.finished, entry);
	pthread_mutex_unlock(&im.mu);
	while ((j = TAILQ_FIRST(&q)) != NULL) {
		TAILQ_REMOVE(&q, j, entry);
		run_delivered(j->run_id);
		job_free(j);
	}
}

/* Take the queue, send what has a reply, mark what is done; without a
 * session the \Seen marks wait (they go back on the queue). */
static int
run_jobs(struct sess *ss, char *err, size_t errlen)
{
	struct imap_jobq q = TAILQ_HEAD_INITIALIZER(q), keep =
	    TAILQ_HEAD_INITIALIZER(keep);
	struct imap_job *j;
	size_t finished = 0;
	int rc = 0;

	pthread_mutex_lock(&im.mu);
	TAILQ_CONCAT(&q, &im.jobs, entry);
	im.njobs = 0;
	pthread_mutex_unlock(&im.mu);
	while ((j = TAILQ_FIRST(&q)) != NULL) {
		TAILQ_REMOVE(&q, j, entry);
		if (j->reply != NULL)
			send_reply(j);
		if (j->seen && (ss == NULL || ss->s == NULL || rc == -1)) {
			TAILQ_INSERT_TAIL(&keep, j, entry);
			continue;
		}
		if (j->seen && mark_seen(ss, j, err, errlen) == -1) {
			rc = -1;
			TAILQ_INSERT_TAIL(&keep, j, entry);
			continue;
		}
		pthread_mutex_lock(&im.mu);
		TAILQ_INSERT_TAIL(&im.finished, j, entry);
		pthread_mutex_unlock(&im.mu);
		finished++;
	}
	/* One wake-up takes every job this pass finished. */
	if (finished > 0)
		loop_post(take_finished, NULL);
	pthread_mutex_lock(&im.mu);
	while ((j = TAILQ_LAST(&keep, imap_jobq)) != NULL) {
		TAILQ_REMOVE(&keep, j, entry);
		TAILQ_INSERT_HEAD(&im.jobs, j, entry);
		im.njobs++;
	}
	pthread_mutex_unlock(&im.mu);
	return rc;
}

/* Waiting: IDLE where offered, else a plain wait; both end early on the
 * wake pipe. -1 when the connection failed. */
static int
wait_mail(struct sess *ss, long ms, char *err, size_t errlen)
{
	struct pollfd pfd[2];
	int r, n = 1;

	pfd[0].fd = im.wake[0];
	pfd[0].events = POLLIN;
	if (ss->idle) {
		if ((r = mailimap_idle(ss->s)) != MAILIMAP_NO_ERROR) {
			snprintf(err, errlen, "IDLE: %s", imap_strerror(ss->s,
			    r));
			return -1;
		}
		pfd[1].fd = mailimap_idle_get_fd(ss->s);
		pfd[1].events = POLLIN;
		n = 2;
	}
	/* A response that came with IDLE's continuation is buffered
	 * already: the socket would never say so. */
	if (!(ss->idle && ss->s->imap_stream->read_buffer_len > 0) &&
	    !flag(&im.stopping) && !flag(&im.quit))
		while (poll(pfd, (nfds_t)n, (int)ms) == -1 && errno == EINTR)
			;
	drain_wake();
	if (ss->idle && (r = mailimap_idle_done(ss->s)) != MAILIMAP_NO_ERROR) {
		snprintf(err, errlen, "IDLE ended badly: %s",
		    imap_strerror(ss->s, r));
		return -1;
	}
	return 0;
}

/* One connected session until an error, a stop or a quit. While af drains
 * (stopping) no new mail is taken, but runs that end still get their
 * replies and \Seen marks. */
static int
sess_run(struct sess *ss, char *err, size_t errlen)
{
	enum round rd = ROUND_OK;
	long wait;

	for (;;) {
		if (run_jobs(ss, err, errlen) == -1)
			return -1;
		if (flag(&im.quit))
			return 0;
		if (flag(&im.stopping)) {
			struct pollfd p = { im.wake[0], POLLIN, 0 };

			if (!flag(&im.quit))
				poll(&p, 1, IMAP_POLL_MS);
			drain_wake();
			continue;
		}
		rd = fetch_new(ss, err, errlen);
		if (rd == ROUND_ERROR)
			return -1;
		if (rd == ROUND_MORE)
			continue;
		wait = rd == ROUND_STALL ? IMAP_STALL_MS : ss->idle ?
		    IMAP_IDLE_MS : IMAP_POLL_MS;
		if (wait_mail(ss, wait, err, errlen) == -1)
			return -1;
	}
}

/* Sleep ms unless stopped; replies still go out meanwhile. */
static void
nap(long ms)
{
	int64_t until = mono_ms() + ms;
	struct pollfd p = { im.wake[0], POLLIN, 0 };
	char err[256];

	while (!flag(&im.quit) && !flag(&im.stopping) && mono_ms() < until) {
		poll(&p, 1, (int)(until - mono_ms()));
		drain_wake();
		run_jobs(NULL, err, sizeof(err));
	}
}

static void *
worker(void *arg)
{
	char err[512];
	struct sess ss;
	long backoff = 0;
	int fatal;

	memset(&ss, 0, sizeof(ss));
	while (!flag(&im.quit)) {
		if (flag(&im.stopping)) {
			nap(IMAP_POLL_MS);
			continue;
		}
		set_state(TRIG_CONNECTING, NULL);
		if (sess_open(&ss, err, sizeof(err), &fatal) == 0 &&
		    sess_cursor(&ss, err, sizeof(err)) == 0) {
			pthread_mutex_lock(&im.mu);
			im.idle = ss.idle;
			pthread_mutex_unlock(&im.mu);
			log_info("imap: %s selected (UIDVALIDITY %u, %s)",
			    im.ic->mailbox, ss.uidvalidity, ss.idle ? "IDLE" :
			    "polling");
			set_state(TRIG_UP, NULL);
			backoff = 0;
			if (sess_run(&ss, err, sizeof(err)) == 0) {
				mailimap_logout(ss.s);
				sess_close(&ss);
				break;
			}
		}
		sess_close(&ss);
		if (flag(&im.quit))
			break;
		/* Certificates and credentials need a person: "down", but
		 * still retried, slowly. */
		set_state(fatal ? TRIG_DOWN : TRIG_BACKOFF, err);
		nap(fatal ? IMAP_BACKOFF_MAX_MS : backoff_next(&backoff,
		    IMAP_BACKOFF_MIN_MS, IMAP_BACKOFF_MAX_MS));
	}
	/* Last replies of runs that ended during the drain. */
	run_jobs(NULL, err, sizeof(err));
	pthread_mutex_lock(&im.mu);
	im.exited = 1;
	pthread_cond_broadcast(&im.cv);
	pthread_mutex_unlock(&im.mu);
	return NULL;
}

/* Lifecycle. */

static int
parse_cursor(const char *s, uint32_t *v, uint32_t *uid)
{
	unsigned long a, b;
	char *end;

	errno = 0;
	a = strtoul(s, &end, 10);
	if (errno != 0 || end == s || *end != ':' || a == 0 || a > UINT32_MAX)
		return -1;
	s = end + 1;
	b = strtoul(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || b > UINT32_MAX)
		return -1;
	*v = (uint32_t)a;
	*uid = (uint32_t)b;
	return 0;
}

static int
meta_uid(const char *meta, uint32_t *v, uint32_t *uid)
{
	const cJSON *a, *b;
	cJSON *o;
	char buf[32];
	int rc = -1;

	if (meta == NULL || (o = cJSON_Parse(meta)) == NULL)
		return -1;
	a = cJSON_GetObjectItemCaseSensitive(o, "uidvalidity");
	b = cJSON_GetObjectItemCaseSensitive(o, "uid");
	if (cJSON_IsString(a) && cJSON_IsString(b)) {
		snprintf(buf, sizeof(buf), "%s:%s", a->valuestring,
		    b->valuestring);
		rc = parse_cursor(buf, v, uid);
	}
	cJSON_Delete(o);
	return rc;
}

/* An event journaled just before a crash, whose cursor never got
 * committed. */
static void
journal_scan(const char *id, const char *trigger, const char *conv,
    const char *prompt, const char *meta, void *arg)
{
	uint32_t v, uid;

	if (trigger == NULL || strcmp(trigger, IMAP_NAME) != 0 ||
	    meta_uid(meta, &v, &uid) == -1)
		return;
	if (im.have_cursor && v == im.uidvalidity && uid > im.last_uid)
		im.last_uid = uid;
}

/* libcurl's system CA folder, so that smtp.ca_file adds to it. */
static void
find_capath(void)
{
	CURL *e;
	char *p = NULL;

	if ((e = curl_easy_init()) == NULL)
		return;
	if (curl_easy_getinfo(e, CURLINFO_CAPATH, &p) == CURLE_OK && p != NULL)
		im.capath = xstrdup(p);
	curl_easy_cleanup(e);
}

static int
imap_prepare(const struct cfg *cfg, char *err, size_t errlen)
{
	const struct cfg_imap *ic = &cfg->trig.imap;
	int r;

	im.cfg = cfg;
	im.ic = ic;
	if (ic->host == NULL || ic->username == NULL || ic->password == NULL) {
		snprintf(err, errlen, "triggers.imap needs host, username and "
		    "password");
		return -1;
	}
	if (ic->smtp.enabled) {
		if (smtp_addr_ok(ic->username))
			im.from = xstrdup(ic->username);
		else if (ic->smtp.username != NULL &&
		    smtp_addr_ok(ic->smtp.username))
			im.from = xstrdup(ic->smtp.username);
		else {
			snprintf(err, errlen, "triggers.imap.smtp: replies "
			    "need an address to come from: make "
			    "triggers.imap.username (or smtp.username) a "
			    "mail address");
			return -1;
		}
	}
	im.cursor_key = xasprintf("imap.%s", ic->mailbox);
	/* The trust anchors are read now: after the sandbox only ca_file
	 * itself stays readable, and reading once is enough. */
	if (gnutls_x509_trust_list_init(&im.trust, 0) < 0)
		fatalx("imap: gnutls_x509_trust_list_init failed");
	if (gnutls_x509_trust_list_add_system_trust(im.trust, 0, 0) < 0)
		log_warnx("imap: the system trust store cannot be read");
	if (ic->ca_file != NULL && (r = gnutls_x509_trust_list_add_trust_file(
	    im.trust, ic->ca_file, NULL, GNUTLS_X509_FMT_PEM, 0, 0)) <= 0) {
		snprintf(err, errlen, "triggers.imap.ca_file %s: %s",
		    ic->ca_file, r < 0 ? gnutls_strerror(r) :
		    "no certificate in it");
		return -1;
	}
	find_capath();
	if (pipe2(im.wake, O_CLOEXEC | O_NONBLOCK) == -1) {
		snprintf(err, errlen, "imap: pipe: %s", strerror(errno));
		return -1;
	}
	pthread_mutex_init(&im.mu, NULL);
	pthread_cond_init(&im.cv, NULL);
	TAILQ_INIT(&im.jobs);
	TAILQ_INIT(&im.finished);
	log_redact_add(ic->password);
	return 0;
}

static int
imap_start(const struct cfg *cfg, char *err, size_t errlen)
{
	char v[64];
	sigset_t all, old;
	int r;

	if (state_cursor_get(im.cursor_key, v, sizeof(v)) == 1) {
		if (parse_cursor(v, &im.uidvalidity, &im.last_uid) == 0)
			im.have_cursor = 1;
		else
			log_warnx("imap: stored cursor %s is malformed; "
			    "starting at the mailbox's end", im.cursor_key);
	}
	if (im.have_cursor) {
		uint32_t before = im.last_uid;

		state_journal_pending(journal_scan, NULL);
		if (im.last_uid != before) {
			log_info("imap: an accepted mail's cursor was not "
			    "saved; starting past UID %u", im.last_uid);
			if (cursor_save(im.uidvalidity, im.last_uid) == -1) {
				snprintf(err, errlen, "imap: cannot save the "
				    "mailbox cursor");
				return -1;
			}
		}
	}
	if (state_cursor_get(IMAP_REPLY_NEXT, v, sizeof(v)) == 1)
		im.reply_next = (uint32_t)(strtoul(v, NULL, 10) %
		    IMAP_REPLIES_KEEP);
	trig_set_state(IMAP_NAME, TRIG_CONNECTING, NULL);
	/* Signals belong to the loop thread: the worker starts with them
	 * all blocked. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&im.thread, NULL, worker, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		snprintf(err, errlen, "imap: cannot start the mailbox thread: "
		    "%s", strerror(r));
		return -1;
	}
	im.started = 1;
	return 0;
}

/* No new mail from here on; replies of runs still ending go out. */
static void
imap_stop(void)
{
	if (!im.started)
		return;
	pthread_mutex_lock(&im.mu);
	im.stopping = 1;
	pthread_mutex_unlock(&im.mu);
	wake_worker();
}

static char *
meta_str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) ? xstrdup(v->valuestring) : NULL;
}

/* A run ended: its mail gets \Seen once it ended well, and a reply when
 * there is text, a reply address and an SMTP server. A failed run leaves
 * its mail unread, for a person to notice. */
static void
imap_deliver(const struct run_outcome *o)
{
	struct imap_job *j;
	cJSON *m;
	int ok = strcmp(o->status, "ok") == 0;

	if (!im.started || o->meta == NULL || (m = cJSON_Parse(o->meta)) ==
	    NULL) {
		log_warnx("imap: run %s has no mail to answer", o->run_id);
		run_delivered(o->run_id);
		return;
	}
	j = xcalloc(1, sizeof(*j));
	snprintf(j->run_id, sizeof(j->run_id), "%s", o->run_id);
	if (meta_uid(o->meta, &j->uidvalidity, &j->uid) == -1) {
		log_warnx("imap: run %s: meta without a UID", o->run_id);
		cJSON_Delete(m);
		free(j);
		run_delivered(o->run_id);
		return;
	}
	j->seen = ok;
	j->to = meta_str(m, "reply_to");
	if (ok && j->to != NULL && o->reply != NULL && o->reply[0] != '\0' &&
	    im.ic->smtp.enabled) {
		j->reply = xstrdup(o->reply);
		j->subject = meta_str(m, "subject");
		j->message_id = meta_str(m, "message_id");
		j->references = meta_str(m, "references");
		if (o->conversation != NULL && (j->reply_id =
		    reply_id_new(o->conversation, j->to)) == NULL)
			log_warnx("imap: run %s: the reply's id cannot be "
			    "saved; an answer to it starts a new "
			    "conversation", o->run_id);
	} else if (ok && j->to != NULL && im.ic->smtp.enabled)
		log_info("imap: run %s ended without text: no reply",
		    o->run_id);
	cJSON_Delete(m);
	if (!j->seen && j->reply == NULL) {
		job_free(j);
		run_delivered(o->run_id);
		return;
	}
	pthread_mutex_lock(&im.mu);
	if (im.njobs >= IMAP_OUTQ_MAX) {
		im.send_failed += j->reply != NULL;
		pthread_mutex_unlock(&im.mu);
		log_warnx("imap: %zu finished runs wait for the mailbox; run "
		    "%s gets no reply and stays unread", (size_t)IMAP_OUTQ_MAX,
		    o->run_id);
		job_free(j);
		run_delivered(o->run_id);
		return;
	}
	TAILQ_INSERT_TAIL(&im.jobs, j, entry);
	im.njobs++;
	pthread_mutex_unlock(&im.mu);
	wake_worker();
}

static void
imap_status(cJSON *obj)
{
	if (!im.started)
		return;
	pthread_mutex_lock(&im.mu);
	cJSON_AddStringToObject(obj, "mailbox", im.ic->mailbox);
	if (im.have_cursor) {
		cJSON_AddNumberToObject(obj, "uidvalidity", im.uidvalidity);
		cJSON_AddNumberToObject(obj, "last_uid", im.last_uid);
	} else {
		cJSON_AddNullToObject(obj, "uidvalidity");
		cJSON_AddNullToObject(obj, "last_uid");
	}
	cJSON_AddBoolToObject(obj, "idle", im.idle);
	cJSON_AddNumberToObject(obj, "mails", (double)im.received);
	cJSON_AddNumberToObject(obj, "refused", (double)im.refused);
	cJSON_AddNumberToObject(obj, "skipped", (double)im.skipped);
	cJSON_AddNumberToObject(obj, "replies_sent", (double)im.sent);
	cJSON_AddNumberToObject(obj, "replies_failed", (double)im.send_failed);
	cJSON_AddNumberToObject(obj, "pending", (double)im.njobs);
	pthread_mutex_unlock(&im.mu);
}

/* After the loop: the worker sends what is left and leaves; one stuck on
 * the network past the grace has its transfers cut. */
static void
imap_free(void)
{
	struct imap_job *j;
	struct timespec ts;

	if (im.started) {
		pthread_mutex_lock(&im.mu);
		im.quit = 1;
		pthread_cond_broadcast(&im.cv);
		pthread_mutex_unlock(&im.mu);
		wake_worker();
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += IMAP_QUIT_GRACE_MS / 1000;
		pthread_mutex_lock(&im.mu);
		while (!im.exited)
			if (pthread_cond_timedwait(&im.cv, &im.mu, &ts) ==
			    ETIMEDOUT)
				break;
		if (!im.exited) {
			atomic_store(&im.abort, 1);
			if (im.sock != -1)
				shutdown(im.sock, SHUT_RDWR);
		}
		pthread_mutex_unlock(&im.mu);
		pthread_join(im.thread, NULL);
		im.started = 0;
	}
	/* A job still holding its reply is answered at the next start (the
	 * outbox keeps it); one that only waits for its \Seen mark has sent
	 * what matters, and is settled rather than answered twice. */
	while ((j = TAILQ_FIRST(&im.jobs)) != NULL) {
		TAILQ_REMOVE(&im.jobs, j, entry);
		if (j->reply == NULL)
			run_delivered(j->run_id);
		job_free(j);
	}
	/* The worker is gone: what it finished since the loop last looked
	 * is settled here, or the next start would answer it twice. */
	take_finished(NULL);
	if (im.trust != NULL)
		gnutls_x509_trust_list_deinit(im.trust, 1);
	im.trust = NULL;
	for (int i = 0; i < 2; i++)
		if (im.wake[i] != -1) {
			close(im.wake[i]);
			im.wake[i] = -1;
		}
	free(im.cursor_key);
	free(im.from);
	free(im.capath);
	im.cursor_key = im.from = im.capath = NULL;
}

const struct trigger_def trigger_imap = {
	.name = IMAP_NAME,
	.enabled = imap_enabled,
	.prepare = imap_prepare,
	.start = imap_start,
	.stop = imap_stop,
	.deliver = imap_deliver,
	.outbox = 1,
	.status = imap_status,
	.free = imap_free,
};
