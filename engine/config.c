/*
 * The config loader. libyaml's events are built into a small tree that keeps
 * every node's position, then one schema table (keys below) walks the tree
 * into struct cfg. The same table produces `af schema`, so the documented
 * schema and the loader cannot disagree.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "perm.h"

#define CFG_MAX_DEPTH	32	/* nesting deeper than any valid config */
#define CFG_MAX_NODES	100000

/* The parsed document. */
enum node_kind { N_SCALAR, N_SEQ, N_MAP };

struct node {
	enum node_kind	 kind;
	char		*value;		/* scalar text */
	size_t		 vlen;
	int		 plain;		/* scalar was unquoted */
	int		 line, col;	/* 1-based */
	struct node	**kids;		/* map: key, value, key, value ... */
	size_t		 nkids;
};

/* The loader's state: where errors go and what they name. */
struct ld {
	const char	*file;
	char		*err;
	size_t		 errlen;
	int		 failed;
	size_t		 nnodes;
	struct cfg	*cfg;
};

static void
ld_error(struct ld *ld, const struct node *n, const char *fmt, ...)
	AF_PRINTF(3, 4);

static void
ld_error(struct ld *ld, const struct node *n, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (ld->failed)
		return;		/* the first error is the one reported */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n != NULL)
		snprintf(ld->err, ld->errlen, "%s:%d:%d: %s", ld->file,
		    n->line, n->col, msg);
	else
		snprintf(ld->err, ld->errlen, "%s: %s", ld->file, msg);
	ld->failed = 1;
}

static void
node_free(struct node *n)
{
	if (n == NULL)
		return;
	for (size_t i = 0; i < n->nkids; i++)
		node_free(n->kids[i]);
	free(n->kids);
	free(n->value);
	free(n);
}

static void
node_add(struct node *parent, struct node *kid)
{
	parent->kids = xreallocarray(parent->kids, parent->nkids + 1,
	    sizeof(*parent->kids));
	parent->kids[parent->nkids++] = kid;
}

/* Build the tree from events. Anchors, aliases and explicit tags are refused:
 * they make a config mean something other than what it shows. */
static struct node *
parse_node(struct ld *ld, yaml_parser_t *p, yaml_event_t *ev, int depth)
{
	struct node *n;
	int line = (int)ev->start_mark.line + 1;
	int col = (int)ev->start_mark.column + 1;

	if (depth > CFG_MAX_DEPTH || ++ld->nnodes > CFG_MAX_NODES) {
		struct node pos = { .line = line, .col = col };

		ld_error(ld, &pos, "nesting too deep or too many nodes");
		return NULL;
	}
	if (ev->type == YAML_ALIAS_EVENT) {
		struct node pos = { .line = line, .col = col };

		ld_error(ld, &pos, "YAML aliases are not allowed");
		return NULL;
	}
	n = xcalloc(1, sizeof(*n));
	n->line = line;
	n->col = col;
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		if (ev->data.scalar.anchor != NULL)
			goto anchor;
		if (ev->data.scalar.tag != NULL && !ev->data.scalar.plain_implicit
		    && !ev->data.scalar.quoted_implicit)
			goto tag;
		n->kind = N_SCALAR;
		n->vlen = ev->data.scalar.length;
		n->value = xstrndup((const char *)ev->data.scalar.value, n->vlen);
		n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
		return n;
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT: {
		int is_map = ev->type == YAML_MAPPING_START_EVENT;
		yaml_event_type_t end = is_map ? YAML_MAPPING_END_EVENT :
		    YAML_SEQUENCE_END_EVENT;

		if ((is_map ? ev->data.mapping_start.anchor :
		    ev->data.sequence_start.anchor) != NULL)
			goto anchor;
		if (!(is_map ? ev->data.mapping_start.implicit :
		    ev->data.sequence_start.implicit))
			goto tag;
		n->kind = is_map ? N_MAP : N_SEQ;
		for (;;) {
			yaml_event_t kev;
			struct node *kid;

			if (!yaml_parser_parse(p, &kev)) {
				struct node pos = {
				    .line = (int)p->problem_mark.line + 1,
				    .col = (int)p->problem_mark.column + 1 };

				ld_error(ld, &pos, "%s", p->problem ?
				    p->problem : "YAML syntax error");
				node_free(n);
				return NULL;
			}
			if (kev.type == end) {
				yaml_event_delete(&kev);
				break;
			}
			kid = parse_node(ld, p, &kev, depth + 1);
			yaml_event_delete(&kev);
			if (kid == NULL) {
				node_free(n);
				return NULL;
			}
			node_add(n, kid);
		}
		return n;
	}
	default:
		ld_error(ld, n, "unexpected YAML event");
		node_free(n);
		return NULL;
	}
anchor:
	ld_error(ld, n, "YAML anchors are not allowed");
	node_free(n);
	return NULL;
tag:
	ld_error(ld, n, "YAML tags are not allowed");
	node_free(n);
	return NULL;
}

static struct node *
parse_document(struct ld *ld, const char *data, size_t len)
{
	yaml_parser_t p;
	yaml_event_t ev;
	struct node *root = NULL;
	int state = 0;	/* 0 before document, 1 in, 2 after */

	if (!yaml_parser_initialize(&p))
		fatalx("yaml_parser_initialize");
	yaml_parser_set_input_string(&p, (const unsigned char *)data, len);
	for (;;) {
		if (!yaml_parser_parse(&p, &ev)) {
			struct node pos = { .line = (int)p.problem_mark.line + 1,
			    .col = (int)p.problem_mark.column + 1 };

			ld_error(ld, &pos, "%s", p.problem ? p.problem :
			    "YAML syntax error");
			break;
		}
		if (ev.type == YAML_STREAM_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		if (ev.type == YAML_DOCUMENT_START_EVENT) {
			if (state == 2) {
				struct node pos = {
				    .line = (int)ev.start_mark.line + 1,
				    .col = (int)ev.start_mark.column + 1 };

				ld_error(ld, &pos,
				    "only one YAML document is allowed");
				yaml_event_delete(&ev);
				break;
			}
			state = 1;
		} else if (ev.type == YAML_DOCUMENT_END_EVENT)
			state = 2;
		else if (ev.type != YAML_STREAM_START_EVENT && root == NULL) {
			root = parse_node(ld, &p, &ev, 0);
			if (root == NULL) {
				yaml_event_delete(&ev);
				break;
			}
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	if (ld->failed) {
		node_free(root);
		return NULL;
	}
	if (root == NULL)
		ld_error(ld, NULL, "the config is empty");
	return root;
}

/* The schema table. Offsets are from the struct the table describes: struct cfg
 * for the top level and its embedded maps, struct cfg_mcp for an MCP entry. */
enum ktype {
	K_STR,		/* any scalar */
	K_INT,
	K_BOOL,
	K_DUR,		/* "30s" into milliseconds (long) */
	K_ENUM,		/* one of enums[] into an int index */
	K_STRLIST,	/* sequence of scalars */
	K_IDLIST,	/* sequence of integer ids, kept as exact strings */
	K_HOSTLIST,	/* permissions.net */
	K_CMDLIST,	/* permissions.run */
	K_PATHLIST,	/* permissions.read / write */
	K_URL,		/* https/wss, or http/ws on loopback */
	K_LISTEN,	/* host:port */
	K_KVMAP,	/* environment map */
	K_MAP,		/* nested map, embedded in the same struct */
	K_NAMEDMAP,	/* name -> map entries (tools.mcp, commands) */
	K_MAPLIST,	/* list of maps (model.fallbacks, triggers.cron) */
	K_NUM,		/* a decimal number into a double */
	K_NAME,		/* the agent's name */
};

#define F_REQUIRED	0x01
#define F_SECRET	0x02	/* may hold ${secret:NAME} */
#define F_ROOT		0x04	/* off and count are from struct cfg itself */
#define NOFF		((size_t)-1)

struct key {
	const char		*name;
	enum ktype		 type;
	size_t			 off;
	size_t			 present;	/* int set to 1 when the key appears */
	int			 flags;
	const struct key	*sub;		/* K_MAP, K_NAMEDMAP, K_MAPLIST */
	const char *const	*enums;		/* K_ENUM */
	long			 min, max;	/* K_INT, K_NUM */
	const char		*doc;
	/* K_NAMEDMAP and K_MAPLIST: an array of elem-sized structs at off, its
	 * length (size_t) at count; check validates one element. A named
	 * element's first member is its name (char *). */
	size_t			 elem;
	size_t			 count;
	int			(*check)(struct ld *, const struct node *,
				    void *, const char *);
	void			(*init)(void *);	/* element defaults */
};

/* Table rows name only the fields their type uses; the rest are zero by
 * design, so the table stays one row per key. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define C(f)	offsetof(struct cfg, f)
#define M(f)	offsetof(struct cfg_mcp, f)
#define MD(f)	offsetof(struct cfg_model, f)
#define CR(f)	offsetof(struct cfg_cron, f)
#define CM(f)	offsetof(struct cfg_command, f)

static int mcp_check(struct ld *, const struct node *, void *, const char *);
static int cron_check(struct ld *, const struct node *, void *,
    const char *);
static int command_check(struct ld *, const struct node *, void *,
    const char *);
static void mcp_init(void *);

static const char *const provider_names[] = { "anthropic", "openai", NULL };
static const char *const tls_names[] = { "implicit", "starttls", NULL };
static const char *const sandbox_names[] = { "default", "strict", NULL };
static const char *const reply_names[] = { "async", "wait", NULL };
static const char *const memory_names[] = { "none", "conversation", "agent",
    NULL };

static const struct key pricing_keys[] = {
	{ "input", K_NUM, MD(price_in), NOFF, F_REQUIRED, NULL, NULL, 0, 10000,
	    "USD per million input tokens" },
	{ "output", K_NUM, MD(price_out), NOFF, F_REQUIRED, NULL, NULL, 0, 10000,
	    "USD per million output tokens" },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, NULL }
};

/* A fallback model: the primary's keys but max_steps, which bounds the run. */
static const struct key fallback_keys[] = {
	{ "provider", K_ENUM, MD(provider), NOFF, F_REQUIRED, NULL,
	    provider_names, 0, 0, "anthropic or openai" },
	{ "name", K_STR, MD(name), NOFF, F_REQUIRED, NULL, NULL, 0, 0,
	    "Model name sent to the API" },
	{ "base_url", K_URL, MD(base_url), NOFF, 0, NULL, NULL, 0, 0,
	    "API base URL; https, or http on loopback" },
	{ "api_key", K_STR, MD(api_key), NOFF, F_SECRET, NULL, NULL, 0, 0,
	    "API key, normally ${secret:NAME}" },
	{ "max_tokens", K_INT, MD(max_tokens), NOFF, 0, NULL, NULL, 1,
	    1000000, "Output tokens per model call" },
	{ "timeout", K_DUR, MD(timeout_ms), NOFF, 0, NULL, NULL, 0, 0,
	    "Timeout of one model call" },
	{ "pricing", K_MAP, 0, MD(has_pricing), 0, pricing_keys, NULL, 0, 0,
	    "Price per million tokens, for limits.max_cost" },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, NULL }
};

static const struct key model_keys[] = {
	{ "provider", K_ENUM, MD(provider), NOFF, F_REQUIRED, NULL,
	    provider_names, 0, 0, "Model API: anthropic, or openai for any "
	    "OpenAI-compatible chat completions server" },
	{ "name", K_STR, MD(name), NOFF, F_REQUIRED, NULL, NULL, 0, 0,
	    "Model name sent to the API" },
	{ "base_url", K_URL, MD(base_url), NOFF, 0, NULL, NULL, 0, 0,
	    "API base URL; https, or http on loopback" },
	{ "api_key", K_STR, MD(api_key), NOFF, F_SECRET, NULL, NULL, 0, 0,
	    "API key, normally ${secret:NAME}" },
	{ "max_tokens", K_INT, MD(max_tokens), NOFF, 0, NULL, NULL, 1,
	    1000000, "Output tokens per model call" },
	{ "max_steps", K_INT, MD(max_steps), NOFF, 0, NULL, NULL, 1, 1000,
	    "Model calls per run, a hard bound" },
	{ "timeout", K_DUR, MD(timeout_ms), NOFF, 0, NULL, NULL, 0, 0,
	    "Timeout of one model call" },
	{ "pricing", K_MAP, 0, MD(has_pricing), 0, pricing_keys, NULL, 0, 0,
	    "Price per million tokens, for limits.max_cost" },
	{ "fallbacks", K_MAPLIST, C(fallbacks), NOFF, F_ROOT, fallback_keys,
	    NULL, 0, 0, "Models tried in order when this one fails with a "
	    "provider error", sizeof(struct cfg_model), C(nfallbacks), NULL,
	    NULL },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, NULL }
};

static const struct key perm_keys[] = {
	{ "net", K_HOSTLIST, C(perm.net), NOFF, 0, NULL, NULL, 0, 0,
	    "Hosts for http_request: exact names, *.domain, or IP literals" },
	{ "run", K_CMDLIST, C(perm.run), NOFF, 0, NULL, NULL, 0, 0,
	    "Executables run_bash may start, by basename" },
	{ "read", K_PATHLIST, C(perm.read), NOFF, 0, NULL, NULL, 0, 0,
	    "Absolute path prefixes read_file may read" },
	{ "write", K_PATHLIST, C(perm.write), NOFF, 0, NULL, NULL, 0, 0,
	    "Absolute path prefixes write_file may write" },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, NULL }
};

static const struct key mcp_keys[] = {
	{ "command", K_STRLIST, M(command), NOFF, 0, NULL, NULL, 0, 0,
	    "A stdio server: the command and its arguments" },
	{ "url", K_URL, M(url), NOFF, 0, NULL, NULL, 0, 0,
	    "A Streamable HTTP server's URL" },
	{ "include", K_STRLIST, M(include), M(has_include), 0, NULL, NULL, 0, 0,
	    "Only these tools exist for the agent" },
	{ "readonly", K_BOOL, M(readonly), NOFF, 0, NULL, NULL, 0, 0,
	    "Only tools annotated readOnlyHint: true" },
	{ "env", K_KVMAP, M(env), NOFF, F_SECRET, NULL, NULL, 0, 0,
	    "Environment of a stdio server, besides PATH and HOME" },
	{ "timeout", K_DUR, M(timeout_ms), NOFF, 0, NULL, NULL, 0, 0,
	    "Timeout of one request to the server" },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, NULL }
};

static const struct key tools_keys[] = {
	{ "mcp", K_NAMEDMAP, C(mcp), NOFF, 0, mcp_keys, NULL, 0, 0,
	    "MCP servers by name", sizeof(struct cfg_mcp), C(nmcp), mcp_check,
	    mcp_init },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, NULL }
};

static const struct key webhook_keys[] = {
	{ "listen", K_LISTEN, C(trig.webhook.listen), NOFF, F_REQUIRED, NULL,
	    NULL, 0, 0, "host:port to listen on" },
	{ "path", K_STR, C(trig.webhook.path), NOFF, 0, NULL, NULL, 0, 0,
	    "Exact request path (default /)" },
	{ "secret", K_STR, C(trig.webhook.secret), NOFF, F_SECRET, NULL, NULL,
	    0, 0, "HMAC-SHA256 key for X-Hub-Signature-256" },
	{ "token", K_STR, C(trig.webhook.token), NOFF, F_SECRET, NULL, NULL,
	    0, 0, "Bearer token required in Authorization" },
	{ "prompt", K_STR, C(trig.webhook.prompt), NOFF, 0, NULL, NULL, 0, 0,
	    "Prompt template; {{body}} is the request body" },
	{ "reply", K_ENUM, C(trig.webhook.reply), NOFF, 0, NULL, reply_names,
	    0, 0, "async: 202 at once; wait: answer with the run's reply" },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, NULL }
};

static const struct key github_keys[] = {
	{ "listen", K_LISTEN, C(trig.github.listen), NOFF, F_REQUIRED, NULL,
	    NULL, 0, 0, "host:port to listen on" },
	{ "path", K_STR, C(trig.github.path), NOFF, 0, NULL, NULL, 0, 0,
	    "Exact request path (default /github)" },
	{ "secret", K_STR, C(trig.github.secret), NOFF, F_REQUIRED | F_SECRET,
	    NULL, NULL, 0, 0, "The webhook secret set on GitHub" },
	{ "events", K_STRLIST, C(trig.github.events), NOFF, 0, NULL, NULL, 0, 0,
	    "Events that start runs: push, pull_request.opened, * (default *)" },
	{ "repos", K_STRLIST, C(trig.github.repos), NOFF, 0, NULL, NULL, 0, 0,
	    "owner/name or owner/*; absent: every repository" },
	{ "prompt", K_STR, C(trig.github.prompt), NOFF, 0, NULL, NULL, 0, 0,
	    "Template: {{event}}, {{action}}, {{repo}}, {{body}}" },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, NULL }
};

static const struct key cron_keys[] = {
	{ "schedule", K_STR, CR(schedule), NOFF, F_REQUIRED, NULL, NULL, 0, 0,
	    "Five cron fields: minute hour day-of-month month day-of-week" },
	{ "prompt", K_STR, CR(prompt), NOFF, F_REQUIRED, NULL, NULL, 0, 0,
	    "The prompt of each run" },
	{ "timezone", K_STR, CR(timezone), NOFF, 0, NULL, NULL, 0, 0,
	    "IANA time zone (default UTC)" },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, NULL }
};

static const struct key command_keys[] = {
	{ "prompt", K_STR, CM(prompt), NOFF, F_REQUIRED, NULL, NULL, 0, 0,
	    "Prompt; $ARGS is replaced by what follows the command" },
	{ "description", K_STR, CM(description), NOFF, 0, NULL, NULL, 0, 0,
	    "Shown by /help" },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, NULL }
};

static const struct key telegram_keys[] = {
	{ "token", K_STR, C(trig.telegram.token), NOFF, F_REQUIRED | F_SECRET,
	    NULL, NULL, 0, 0, "Bot token" },
	{ "api_base", K_URL, C(trig.telegram.api_base), NOFF, 0, NULL, NULL, 0,
	    0, "Bot API base URL" },
	{ "allowed_chats", K_IDLIST, C(trig.telegram.allowed_chats),
	    C(trig.telegram.has_allowed_chats), 0, NULL, NULL, 0, 0,
	    "Chat ids answered; absent: every chat" },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, NULL }
};

static const struct key discord_keys[] = {
	{ "token", K_STR, C(trig.discord.token), NOFF, F_REQUIRED | F_SECRET,
	    NULL, NULL, 0, 0, "Bot token" },
	{ "api_base", K_URL, C(trig.discord.api_base), NOFF, 0, NULL, NULL, 0,
	    0, "REST API base URL" },
	{ "gateway", K_URL, C(trig.discord.gateway), NOFF, 0, NULL, NULL, 0, 0,
	    "Gateway URL" },
	{ "channels", K_IDLIST, C(trig.discord.channels),
	    C(trig.discord.has_channels), 0, NULL, NULL, 0, 0,
	    "Channel ids where it answers; absent: where it is mentioned" },
	{ "voice_channels", K_IDLIST, C(trig.discord.voice_channels), NOFF, 0,
	    NULL, NULL, 0, 0, "Voice channel ids (not supported yet)" },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, NULL }
};

static const struct key smtp_keys[] = {
	{ "host", K_STR, C(trig.imap.smtp.host), NOFF, F_REQUIRED, NULL, NULL,
	    0, 0, "SMTP server" },
	{ "port", K_INT, C(trig.imap.smtp.port), NOFF, 0, NULL, NULL, 1, 65535,
	    "SMTP port" },
	{ "tls", K_ENUM, C(trig.imap.smtp.tls), NOFF, 0, NULL, tls_names, 0, 0,
	    "implicit or starttls" },
	{ "ca_file", K_STR, C(trig.imap.smtp.ca_file), NOFF, 0, NULL, NULL, 0,
	    0, "Extra trust anchor (PEM)" },
	{ "username", K_STR, C(trig.imap.smtp.username), NOFF, 0, NULL, NULL,
	    0, 0, "SMTP user" },
	{ "password", K_STR, C(trig.imap.smtp.password), NOFF, F_SECRET, NULL,
	    NULL, 0, 0, "SMTP password" },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, NULL }
};

static const struct key imap_keys[] = {
	{ "host", K_STR, C(trig.imap.host), NOFF, F_REQUIRED, NULL, NULL, 0, 0,
	    "IMAP server" },
	{ "port", K_INT, C(trig.imap.port), NOFF, 0, NULL, NULL, 1, 65535,
	    "IMAP port" },
	{ "tls", K_ENUM, C(trig.imap.tls), NOFF, 0, NULL, tls_names, 0, 0,
	    "implicit or starttls; never plaintext" },
	{ "ca_file", K_STR, C(trig.imap.ca_file), NOFF, 0, NULL, NULL, 0, 0,
	    "Extra trust anchor (PEM)" },
	{ "username", K_STR, C(trig.imap.username), NOFF, F_REQUIRED, NULL,
	    NULL, 0, 0, "IMAP user" },
	{ "password", K_STR, C(trig.imap.password), NOFF,
	    F_REQUIRED | F_SECRET, NULL, NULL, 0, 0, "IMAP password" },
	{ "mailbox", K_STR, C(trig.imap.mailbox), NOFF, 0, NULL, NULL, 0, 0,
	    "Mailbox to watch (default INBOX)" },
	{ "smtp", K_MAP, 0, C(trig.imap.smtp.enabled), 0, smtp_keys, NULL, 0,
	    0, "Where replies are sent" },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, NULL }
};

static const struct key trigger_keys[] = {
	{ "webhook", K_MAP, 0, C(trig.webhook.enabled), 0, webhook_keys, NULL,
	    0, 0, "HTTP webhook" },
	{ "github", K_MAP, 0, C(trig.github.enabled), 0, github_keys, NULL,
	    0, 0, "GitHub webhooks" },
	{ "cron", K_MAPLIST, C(trig.cron), NOFF, 0, cron_keys, NULL, 0, 0,
	    "Scheduled runs", sizeof(struct cfg_cron), C(trig.ncron),
	    cron_check, NULL },
	{ "telegram", K_MAP, 0, C(trig.telegram.enabled), 0, telegram_keys,
	    NULL, 0, 0, "Telegram bot" },
	{ "discord", K_MAP, 0, C(trig.discord.enabled), 0, discord_keys, NULL,
	    0, 0, "Discord bot" },
	{ "imap", K_MAP, 0, C(trig.imap.enabled), 0, imap_keys, NULL, 0, 0,
	    "IMAP mailbox" },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, NULL }
};

static const struct key status_keys[] = {
	{ "listen", K_LISTEN, C(status_listen), NOFF, 0, NULL, NULL, 0, 0,
	    "host:port of the status server (default 127.0.0.1:9090)" },
	{ "token", K_STR, C(status_token), NOFF, F_SECRET, NULL, NULL, 0, 0,
	    "Bearer token for /runs and /audit from other hosts" },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, NULL }
};

static const struct key audit_keys[] = {
	{ "path", K_STR, C(audit_path), NOFF, 0, NULL, NULL, 0, 0,
	    "Audit trail, relative to the data folder" },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, NULL }
};

static const struct key limits_keys[] = {
	{ "concurrent_runs", K_INT, C(limits.concurrent_runs), NOFF, 0, NULL,
	    NULL, 1, 100000, "Runs at once" },
	{ "queue", K_INT, C(limits.queue), NOFF, 0, NULL, NULL, 0, 1000000,
	    "Pending trigger events; beyond: refused" },
	{ "run_timeout", K_DUR, C(limits.run_timeout_ms), NOFF, 0, NULL, NULL,
	    0, 0, "Wall-clock bound of one run" },
	{ "tool_output", K_INT, C(limits.tool_output), NOFF, 0, NULL, NULL, 256,
	    16 << 20, "Bytes of one tool result kept" },
	{ "tool_timeout", K_DUR, C(limits.tool_timeout_ms), NOFF, 0, NULL, NULL,
	    0, 0, "Default timeout of run_bash and http_request" },
	{ "max_cost", K_NUM, C(limits.max_cost), NOFF, 0, NULL, NULL, 0, 100000,
	    "USD a run may spend (needs model pricing)" },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, NULL }
};

static const struct key top_keys[] = {
	{ "name", K_NAME, C(name), NOFF, F_REQUIRED, NULL, NULL, 0, 0,
	    "Agent name: [a-z0-9][a-z0-9-]*" },
	{ "model", K_MAP, C(model), NOFF, F_REQUIRED, model_keys, NULL, 0, 0,
	    "The model" },
	{ "system", K_STR, C(system), NOFF, 0, NULL, NULL, 0, 0,
	    "System prompt" },
	{ "skills", K_STRLIST, C(skills), NOFF, 0, NULL, NULL, 0, 0,
	    "Folders under the skills folder, each with SKILL.md" },
	{ "permissions", K_MAP, 0, NOFF, 0, perm_keys, NULL, 0, 0,
	    "What the agent may reach; absent: nothing" },
	{ "env", K_KVMAP, C(env), NOFF, F_SECRET, NULL, NULL, 0, 0,
	    "Environment of subprocesses, besides PATH and HOME" },
	{ "tools", K_MAP, 0, NOFF, 0, tools_keys, NULL, 0, 0, "Tool servers" },
	{ "triggers", K_MAP, 0, NOFF, 0, trigger_keys, NULL, 0, 0,
	    "What starts runs" },
	{ "status", K_MAP, 0, NOFF, 0, status_keys, NULL, 0, 0,
	    "Status server" },
	{ "audit", K_MAP, 0, NOFF, 0, audit_keys, NULL, 0, 0, "Audit trail" },
	{ "limits", K_MAP, 0, NOFF, 0, limits_keys, NULL, 0, 0, "Bounds" },
	{ "sandbox", K_ENUM, C(sandbox_strict), NOFF, 0, NULL, sandbox_names, 0,
	    0, "strict: refuse to start when the kernel cannot hold a rule" },
	{ "commands", K_NAMEDMAP, C(commands), NOFF, 0, command_keys, NULL, 0,
	    0, "Slash commands for chat triggers", sizeof(struct cfg_command),
	    C(ncommands), command_check, NULL },
	{ "memory", K_ENUM, C(memory), NOFF, 0, NULL, memory_names, 0, 0,
	    "Memory tools: none, per conversation, or per agent" },
	{ "schedules", K_BOOL, C(schedules), NOFF, 0, NULL, NULL, 0, 0,
	    "Schedule tools: the agent may plan its own later runs" },
	{ NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, NULL }
};

/* "a.b" key paths for messages; over-long paths are cut, never overflowed. */
static void
subpath(char *out, size_t outlen, const char *path, const char *name)
{
	if (snprintf(out, outlen, "%s%s%s", path, path[0] ? "." : "", name) >=
	    (int)outlen)
		out[outlen - 1] = '\0';
}

/* Scalars. */

static int
want_scalar(struct ld *ld, const struct node *n, const char *what)
{
	if (n->kind == N_SCALAR)
		return 0;
	ld_error(ld, n, "%s must be %s", what, "a single value");
	return -1;
}

/* A `${secret:NAME}` reference is only allowed where the key says so: a secret
 * in `system` or a prompt would go to the model. */
static int
check_secret_refs(struct ld *ld, const struct node *n, const struct key *k,
    char **slot, const char *path)
{
	const char *p = n->value;
	int found = 0;

	while ((p = strstr(p, "${secret:")) != NULL) {
		const char *name = p + 9, *end = strchr(name, '}');
		struct cfg *cfg = ld->cfg;

		if (!(k->flags & F_SECRET)) {
			ld_error(ld, n, "%s cannot hold a secret reference", path);
			return -1;
		}
		if (end == NULL || end == name) {
			ld_error(ld, n, "%s: malformed secret reference", path);
			return -1;
		}
		for (const char *c = name; c < end; c++)
			if (!isalnum((unsigned char)*c) && *c != '_' &&
			    *c != '-' && *c != '.') {
				ld_error(ld, n, "%s: bad secret name", path);
				return -1;
			}
		if (*name == '.') {
			ld_error(ld, n, "%s: bad secret name", path);
			return -1;
		}
		cfg->refs = xreallocarray(cfg->refs, cfg->nrefs + 1,
		    sizeof(*cfg->refs));
		cfg->refs[cfg->nrefs].slot = slot;
		cfg->refs[cfg->nrefs].name = xstrndup(name, (size_t)(end - name));
		cfg->refs[cfg->nrefs].line = n->line;
		cfg->refs[cfg->nrefs].col = n->col;
		cfg->nrefs++;
		found = 1;
		p = end + 1;
	}
	(void)found;
	return 0;
}

static int
scalar_has_nul(struct ld *ld, const struct node *n, const char *path)
{
	if (strlen(n->value) != n->vlen) {
		ld_error(ld, n, "%s contains a NUL byte", path);
		return 1;
	}
	return 0;
}

static int
set_str(struct ld *ld, const struct node *n, const struct key *k, void *base,
    const char *path)
{
	char **slot = (char **)((char *)base + k->off);

	if (want_scalar(ld, n, path) == -1 || scalar_has_nul(ld, n, path))
		return -1;
	free(*slot);
	*slot = xstrdup(n->value);
	return check_secret_refs(ld, n, k, slot, path);
}

static int
parse_long(const char *s, long *out)
{
	char *end;

	if (*s == '\0' || (!isdigit((unsigned char)*s) && *s != '-'))
		return -1;
	errno = 0;
	*out = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	return 0;
}

static int
set_int(struct ld *ld, const struct node *n, const struct key *k, void *base,
    const char *path)
{
	long v;

	if (want_scalar(ld, n, path) == -1)
		return -1;
	if (!n->plain || parse_long(n->value, &v) == -1) {
		ld_error(ld, n, "%s must be an integer", path);
		return -1;
	}
	if (v < k->min || v > k->max) {
		ld_error(ld, n, "%s must be between %ld and %ld", path, k->min,
		    k->max);
		return -1;
	}
	*(long *)((char *)base + k->off) = v;
	return 0;
}

static int
set_bool(struct ld *ld, const struct node *n, const struct key *k, void *base,
    const char *path)
{
	int v;

	if (want_scalar(ld, n, path) == -1)
		return -1;
	if (n->plain && strcmp(n->value, "true") == 0)
		v = 1;
	else if (n->plain && strcmp(n->value, "false") == 0)
		v = 0;
	else {
		ld_error(ld, n, "%s must be true or false", path);
		return -1;
	}
	*(int *)((char *)base + k->off) = v;
	return 0;
}

static int
set_dur(struct ld *ld, const struct node *n, const struct key *k, void *base,
    const char *path)
{
	int64_t v;

	if (want_scalar(ld, n, path) == -1)
		return -1;
	v = parse_duration(n->value);
	if (v <= 0 || v > (int64_t)7 * 24 * 3600 * 1000) {
		ld_error(ld, n, "%s: bad duration \"%s\" (use 500ms, 30s, 5m "
		    "or 1h, up to a week)", path, n->value);
		return -1;
	}
	*(long *)((char *)base + k->off) = (long)v;
	return 0;
}

static int
set_enum(struct ld *ld, const struct node *n, const struct key *k, void *base,
    const char *path)
{
	if (want_scalar(ld, n, path) == -1)
		return -1;
	for (int i = 0; k->enums[i] != NULL; i++)
		if (strcmp(n->value, k->enums[i]) == 0) {
			*(int *)((char *)base + k->off) = i;
			return 0;
		}
	{
		struct buf b;

		buf_init(&b);
		for (int i = 0; k->enums[i] != NULL; i++)
			buf_addf(&b, "%s%s", i ? ", " : "", k->enums[i]);
		ld_error(ld, n, "%s must be one of: %s", path, b.data);
		buf_free(&b);
	}
	return -1;
}

static int
set_name(struct ld *ld, const struct node *n, const struct key *k, void *base,
    const char *path)
{
	const char *s = n->value;

	if (want_scalar(ld, n, path) == -1)
		return -1;
	if (n->vlen == 0 || n->vlen > 63 || !(islower((unsigned char)*s) ||
	    isdigit((unsigned char)*s)))
		goto bad;
	for (; *s; s++)
		if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) &&
		    *s != '-')
			goto bad;
	return set_str(ld, n, k, base, path);
bad:
	ld_error(ld, n, "name must match [a-z0-9][a-z0-9-]* (at most 63)");
	return -1;
}

int
cfg_host_is_loopback(const char *host)
{
	struct in_addr a4;

	if (strcasecmp(host, "localhost") == 0 || strcmp(host, "::1") == 0 ||
	    strcmp(host, "[::1]") == 0)
		return 1;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	return 0;
}

/* Every URL a config names is https or wss, except on loopback, where http and
 * ws are accepted too. The host is taken the way a client would. */
static int
url_ok(const char *u, char *why, size_t whylen)
{
	const char *p = strstr(u, "://"), *h, *end;
	char scheme[8], host[256];
	size_t sl, hl;
	int secure;

	if (p == NULL || (sl = (size_t)(p - u)) == 0 || sl >= sizeof(scheme)) {
		snprintf(why, whylen, "is not a URL");
		return -1;
	}
	for (size_t i = 0; i < sl; i++)
		scheme[i] = (char)tolower((unsigned char)u[i]);
	scheme[sl] = '\0';
	if (strcmp(scheme, "https") == 0 || strcmp(scheme, "wss") == 0)
		secure = 1;
	else if (strcmp(scheme, "http") == 0 || strcmp(scheme, "ws") == 0)
		secure = 0;
	else {
		snprintf(why, whylen, "must use https or wss");
		return -1;
	}
	h = p + 3;
	if (*h == '[') {
		end = strchr(h, ']');
		if (end == NULL) {
			snprintf(why, whylen, "has a bad IPv6 host");
			return -1;
		}
		h++;
	} else
		end = h + strcspn(h, ":/?#");
	if (strpbrk(u, " \t\r\n\\@") != NULL && memchr(h, '@',
	    strcspn(h, "/?#")) != NULL) {
		snprintf(why, whylen, "must not contain user information");
		return -1;
	}
	if (strpbrk(u, " \t\r\n\\") != NULL) {
		snprintf(why, whylen, "contains whitespace or a backslash");
		return -1;
	}
	hl = (size_t)(end - h);
	if (hl == 0 || hl >= sizeof(host)) {
		snprintf(why, whylen, "has no host");
		return -1;
	}
	memcpy(host, h, hl);
	host[hl] = '\0';
	if (!secure && !cfg_host_is_loopback(host)) {
		snprintf(why, whylen, "must use https or wss (plain http and ws "
		    "only on loopback)");
		return -1;
	}
	return 0;
}

static int
set_url(struct ld *ld, const struct node *n, const struct key *k, void *base,
    const char *path)
{
	char why[128];

	if (want_scalar(ld, n, path) == -1 || scalar_has_nul(ld, n, path))
		return -1;
	if (url_ok(n->value, why, sizeof(why)) == -1) {
		ld_error(ld, n, "%s: \"%s\" %s", path, n->value, why);
		return -1;
	}
	return set_str(ld, n, k, base, path);
}

static int
set_listen(struct ld *ld, const struct node *n, const struct key *k,
    void *base, const char *path)
{
	struct cfg_listen *l = (struct cfg_listen *)((char *)base + k->off);
	const char *s = n->value, *colon;
	char host[256];
	long port;

	if (want_scalar(ld, n, path) == -1)
		return -1;
	if (*s == '[') {
		const char *rb = strchr(s, ']');

		if (rb == NULL || rb[1] != ':')
			goto bad;
		snprintf(host, sizeof(host), "%.*s", (int)(rb - s - 1), s + 1);
		colon = rb + 1;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL || (size_t)(colon - s) >= sizeof(host))
			goto bad;
		snprintf(host, sizeof(host), "%.*s", (int)(colon - s), s);
	}
	if (parse_long(colon + 1, &port) == -1 || port < 0 || port > 65535)
		goto bad;
	if (host[0] == '\0') {
		ld_error(ld, n, "%s: give the address too, e.g. 0.0.0.0:%ld",
		    path, port);
		return -1;
	}
	{
		unsigned char a[16];

		if (inet_pton(AF_INET, host, a) != 1 &&
		    inet_pton(AF_INET6, host, a) != 1 &&
		    strcmp(host, "localhost") != 0)
			goto bad;
	}
	free(l->host);
	l->host = xstrdup(host);
	l->port = (int)port;
	return 0;
bad:
	ld_error(ld, n, "%s must be ADDRESS:PORT, e.g. 127.0.0.1:8080", path);
	return -1;
}

/* Lists. */

typedef int (*item_fn)(struct ld *, const struct node *, const char *,
    char *, size_t);

static int
item_any(struct ld *ld, const struct node *n, const char *path, char *out,
    size_t outlen)
{
	snprintf(out, outlen, "%s", n->value);
	return 0;
}

static int
item_id(struct ld *ld, const struct node *n, const char *path, char *out,
    size_t outlen)
{
	const char *s = n->value;

	if (*s == '-')
		s++;
	if (*s == '\0' || strlen(s) > 20)
		goto bad;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			goto bad;
	snprintf(out, outlen, "%s", n->value);
	return 0;
bad:
	ld_error(ld, n, "%s: \"%s\" is not a numeric id", path, n->value);
	return -1;
}

static int
item_host(struct ld *ld, const struct node *n, const char *path, char *out,
    size_t outlen)
{
	if (perm_net_grant_normalize(n->value, out, outlen) == -1) {
		ld_error(ld, n, "%s: \"%s\" is not a host name, *.domain "
		    "pattern or IP address", path, n->value);
		return -1;
	}
	return 0;
}

static int
item_cmd(struct ld *ld, const struct node *n, const char *path, char *out,
    size_t outlen)
{
	const char *s = n->value;

	if (*s == '\0' || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		goto bad;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && strchr("._+-", *s) == NULL)
			goto bad;
	snprintf(out, outlen, "%s", n->value);
	return 0;
bad:
	ld_error(ld, n, "%s: \"%s\" must be a command name (a basename, "
	    "no path)", path, n->value);
	return -1;
}

/* Normalize an absolute path lexically: no ".", "..", duplicate or trailing
 * slashes. Symlinks are the permission engine's business at decision time. */
static int
item_path(struct ld *ld, const struct node *n, const char *path, char *out,
    size_t outlen)
{
	const char *s = n->value;
	size_t len = 1;

	if (*s != '/') {
		ld_error(ld, n, "%s: \"%s\" must be an absolute path", path, s);
		return -1;
	}
	if (n->vlen >= PERM_PATH_MAX || outlen < 2) {
		ld_error(ld, n, "%s: path too long", path);
		return -1;
	}
	out[0] = '/';
	out[1] = '\0';
	while (*s) {
		size_t cl;

		while (*s == '/')
			s++;
		cl = strcspn(s, "/");
		if (cl == 0)
			break;
		if (cl == 1 && s[0] == '.')
			;
		else if (cl == 2 && s[0] == '.' && s[1] == '.') {
			while (len > 1 && out[len - 1] != '/')
				len--;
			if (len > 1)
				len--;
			out[len] = '\0';
		} else {
			if (len + cl + 2 > outlen) {
				ld_error(ld, n, "%s: path too long", path);
				return -1;
			}
			if (len > 1)
				out[len++] = '/';
			memcpy(out + len, s, cl);
			len += cl;
			out[len] = '\0';
		}
		s += cl;
	}
	return 0;
}

static int
set_list(struct ld *ld, const struct node *n, const struct key *k, void *base,
    const char *path)
{
	struct strlist *l = (struct strlist *)((char *)base + k->off);
	item_fn fn;
	char out[PERM_PATH_MAX];

	switch (k->type) {
	case K_IDLIST: fn = item_id; break;
	case K_HOSTLIST: fn = item_host; break;
	case K_CMDLIST: fn = item_cmd; break;
	case K_PATHLIST: fn = item_path; break;
	default: fn = item_any; break;
	}
	if (n->kind != N_SEQ) {
		ld_error(ld, n, "%s must be a list", path);
		return -1;
	}
	strlist_free(l);
	for (size_t i = 0; i < n->nkids; i++) {
		const struct node *it = n->kids[i];

		if (it->kind != N_SCALAR) {
			ld_error(ld, it, "%s: each item must be a single value",
			    path);
			return -1;
		}
		if (scalar_has_nul(ld, it, path))
			return -1;
		if (strstr(it->value, "${secret:") != NULL) {
			ld_error(ld, it, "%s cannot hold a secret reference",
			    path);
			return -1;
		}
		if (fn(ld, it, path, out, sizeof(out)) == -1)
			return -1;
		strlist_add(l, out);
	}
	return 0;
}

/* Environment keys that would change what runs or how: refused outright. */
static int
env_key_forbidden(const char *k)
{
	static const char *const bad[] = { "PATH", "HOME", "BASH_ENV", "ENV",
	    "IFS", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND",
	    "GLOBIGNORE", "CDPATH", "NODE_OPTIONS", "PYTHONSTARTUP",
	    "PYTHONPATH", "PERL5OPT", "PERL5LIB", "RUBYOPT", "GCONV_PATH",
	    "LOCPATH", "HOSTALIASES", "RESOLV_HOST_CONF" };

	if (strncmp(k, "LD_", 3) == 0 || strncmp(k, "BASH_FUNC_", 10) == 0)
		return 1;
	for (size_t i = 0; i < nitems(bad); i++)
		if (strcmp(k, bad[i]) == 0)
			return 1;
	return 0;
}

static int
map_dup_check(struct ld *ld, const struct node *n, const char *path)
{
	if (n->kind != N_MAP) {
		ld_error(ld, n, "%s must be a map", path);
		return -1;
	}
	for (size_t i = 0; i < n->nkids; i += 2) {
		const struct node *key = n->kids[i];

		if (key->kind != N_SCALAR) {
			ld_error(ld, key, "%s: keys must be plain names", path);
			return -1;
		}
		for (size_t j = 0; j < i; j += 2)
			if (strcmp(n->kids[j]->value, key->value) == 0) {
				ld_error(ld, key, "duplicate key \"%s\" (first "
				    "at line %d)", key->value,
				    n->kids[j]->line);
				return -1;
			}
	}
	return 0;
}

static int
set_kvmap(struct ld *ld, const struct node *n, const struct key *k,
    void *base, const char *path)
{
	struct kvlist *l = (struct kvlist *)((char *)base + k->off);

	if (map_dup_check(ld, n, path) == -1)
		return -1;
	l->v = xcalloc(n->nkids / 2 + 1, sizeof(*l->v));
	for (size_t i = 0; i + 1 < n->nkids; i += 2) {
		const struct node *key = n->kids[i], *val = n->kids[i + 1];
		const char *s = key->value;
		char sub[256];
		struct key vk = { .flags = k->flags, .off = 0 };
		struct kv *kv;

		if (*s == '\0' || isdigit((unsigned char)*s))
			goto badkey;
		for (; *s; s++)
			if (!isalnum((unsigned char)*s) && *s != '_')
				goto badkey;
		if (env_key_forbidden(key->value)) {
			ld_error(ld, key, "%s.%s cannot be set: it changes what "
			    "a subprocess loads or runs", path, key->value);
			return -1;
		}
		subpath(sub, sizeof(sub), path, key->value);
		kv = &l->v[l->n++];
		kv->key = xstrdup(key->value);
		if (want_scalar(ld, val, sub) == -1 || scalar_has_nul(ld, val,
		    sub))
			return -1;
		kv->value = xstrdup(val->value);
		if (check_secret_refs(ld, val, &vk, &kv->value, sub) == -1)
			return -1;
		continue;
badkey:
		ld_error(ld, key, "%s: \"%s\" is not a variable name", path,
		    key->value);
		return -1;
	}
	return 0;
}

static int apply_map(struct ld *, const struct node *, const struct key *,
    void *, const char *);

/* The names of tools.mcp and commands entries. An MCP server's tools are
 * SERVER__TOOL: with no "__" in a server name and no "_" at its end, the
 * first "__" of a tool name is where the server's name ends, so no two
 * servers can make the same tool name (a_ + _x and a + __x would). Kept in
 * step with ENTRY_NAME_PATTERN, the schema's form of the same rule. */
#define ENTRY_NAME_PATTERN	"^(?!.*__)(?!.*_$)[A-Za-z0-9_-]{1,32}$"

static int
check_entry_name(struct ld *ld, const struct node *key, const char *path)
{
	const char *s = key->value;
	size_t len = strlen(s);

	if (len == 0 || strstr(s, "__") != NULL || len > 32 ||
	    s[len - 1] == '_')
		goto bad;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-')
			goto bad;
	return 0;
bad:
	ld_error(ld, key, "%s: \"%s\" must be letters, digits, - and _ (no "
	    "\"__\", no \"_\" at the end, at most 32)", path, key->value);
	return -1;
}

/* The array and its length for a K_NAMEDMAP or K_MAPLIST key. */
static char **
entries(struct ld *ld, const struct key *k, void *base, size_t **count)
{
	char *b = (k->flags & F_ROOT) ? (char *)ld->cfg : base;

	*count = (size_t *)(b + k->count);
	return (char **)(b + k->off);
}

static int
set_namedmap(struct ld *ld, const struct node *n, const struct key *k,
    void *base, const char *path)
{
	size_t *count;
	char **arr = entries(ld, k, base, &count);

	if (map_dup_check(ld, n, path) == -1)
		return -1;
	*arr = xcalloc(n->nkids / 2 + 1, k->elem);
	for (size_t i = 0; i + 1 < n->nkids; i += 2) {
		const struct node *key = n->kids[i], *val = n->kids[i + 1];
		char *e = *arr + k->elem * (*count)++, sub[256];

		*(char **)e = xstrdup(key->value);	/* the name comes first */
		if (k->init != NULL)
			k->init(e);
		if (check_entry_name(ld, key, path) == -1)
			return -1;
		subpath(sub, sizeof(sub), path, key->value);
		if (apply_map(ld, val, k->sub, e, sub) == -1)
			return -1;
		if (k->check != NULL && k->check(ld, key, e, sub) == -1)
			return -1;
	}
	return 0;
}

static int
set_maplist(struct ld *ld, const struct node *n, const struct key *k,
    void *base, const char *path)
{
	size_t *count;
	char **arr = entries(ld, k, base, &count);

	if (n->kind != N_SEQ) {
		ld_error(ld, n, "%s must be a list", path);
		return -1;
	}
	*arr = xcalloc(n->nkids + 1, k->elem);
	for (size_t i = 0; i < n->nkids; i++) {
		char *e = *arr + k->elem * (*count)++, sub[256], idx[24];

		snprintf(idx, sizeof(idx), "%zu", i);
		subpath(sub, sizeof(sub), path, idx);
		if (k->init != NULL)
			k->init(e);
		if (apply_map(ld, n->kids[i], k->sub, e, sub) == -1)
			return -1;
		if (k->check != NULL && k->check(ld, n->kids[i], e, sub) == -1)
			return -1;
	}
	return 0;
}

static void
mcp_init(void *e)
{
	((struct cfg_mcp *)e)->timeout_ms = 30000;
}

static int
mcp_check(struct ld *ld, const struct node *n, void *e, const char *path)
{
	struct cfg_mcp *m = e;

	m->line = n->line;
	if ((m->command.n > 0) == (m->url != NULL)) {
		ld_error(ld, n, "%s needs exactly one of command (stdio) or url "
		    "(HTTP)", path);
		return -1;
	}
	return 0;
}

static int
command_check(struct ld *ld, const struct node *n, void *e, const char *path)
{
	static const char *const builtin[] = { "help", "status", "reset", "new" };
	struct cfg_command *c = e;

	c->line = n->line;
	for (size_t i = 0; i < nitems(builtin); i++)
		if (strcmp(c->name, builtin[i]) == 0) {
			ld_error(ld, n, "%s: /%s is a built-in command", path,
			    c->name);
			return -1;
		}
	return 0;
}

/* Five fields, each a list of ranges with optional steps: checked here so a
 * bad schedule is a load error, parsed again by the cron trigger. */
static int
cron_field_ok(const char *f, int lo, int hi)
{
	char *copy = xstrdup(f), *save = NULL, *part;
	size_t len = strlen(f);
	int ok = len > 0 && f[0] != ',' && f[len - 1] != ',' &&
	    strstr(f, ",,") == NULL;

	for (part = strtok_r(copy, ",", &save); part != NULL && ok;
	    part = strtok_r(NULL, ",", &save)) {
		char *slash = strchr(part, '/'), *dash;
		long a = lo, b = hi, step = 1;

		if (slash != NULL) {
			*slash = '\0';
			if (parse_long(slash + 1, &step) == -1 || step < 1 ||
			    step > hi)
				ok = 0;
		}
		if (strcmp(part, "*") == 0)
			continue;
		dash = strchr(part, '-');
		if (dash != NULL) {
			*dash = '\0';
			if (parse_long(part, &a) == -1 ||
			    parse_long(dash + 1, &b) == -1)
				ok = 0;
		} else if (parse_long(part, &a) == -1)
			ok = 0;
		else if (slash == NULL)
			b = a;
		if (a < lo || b > hi || a > b)
			ok = 0;
	}
	if (part == NULL && save == NULL)
		ok = 0;
	free(copy);
	return ok;
}

static int
cron_check(struct ld *ld, const struct node *n, void *e, const char *path)
{
	static const int lo[] = { 0, 0, 1, 1, 0 }, hi[] = { 59, 23, 31, 12, 7 };
	struct cfg_cron *c = e;
	char *copy = xstrdup(c->schedule), *save = NULL, *f;
	int i = 0, ok = 1;

	c->line = n->line;
	for (f = strtok_r(copy, " \t", &save); f != NULL && ok;
	    f = strtok_r(NULL, " \t", &save), i++)
		ok = i < 5 && cron_field_ok(f, lo[i], hi[i]);
	free(copy);
	if (!ok || i != 5) {
		ld_error(ld, n, "%s.schedule: \"%s\" is not five cron fields "
		    "(minute hour day month weekday; *, lists, ranges, steps)",
		    path, c->schedule);
		return -1;
	}
	if (c->timezone != NULL && (c->timezone[0] == '/' ||
	    strstr(c->timezone, "..") != NULL)) {
		ld_error(ld, n, "%s.timezone: \"%s\" is not a time zone name",
		    path, c->timezone);
		return -1;
	}
	return 0;
}

static int
set_num(struct ld *ld, const struct node *n, const struct key *k, void *base,
    const char *path)
{
	char *end;
	double v;

	if (want_scalar(ld, n, path) == -1)
		return -1;
	errno = 0;
	v = strtod(n->value, &end);
	if (!n->plain || n->vlen == 0 || *end != '\0' || errno != 0 ||
	    !(v >= (double)k->min && v <= (double)k->max)) {
		ld_error(ld, n, "%s must be a number between %ld and %ld", path,
		    k->min, k->max);
		return -1;
	}
	*(double *)((char *)base + k->off) = v;
	return 0;
}

static int
set_value(struct ld *ld, const struct node *n, const struct key *k,
    void *base, const char *path)
{
	switch (k->type) {
	case K_STR: return set_str(ld, n, k, base, path);
	case K_INT: return set_int(ld, n, k, base, path);
	case K_BOOL: return set_bool(ld, n, k, base, path);
	case K_DUR: return set_dur(ld, n, k, base, path);
	case K_ENUM: return set_enum(ld, n, k, base, path);
	case K_NAME: return set_name(ld, n, k, base, path);
	case K_URL: return set_url(ld, n, k, base, path);
	case K_LISTEN: return set_listen(ld, n, k, base, path);
	case K_STRLIST:
	case K_IDLIST:
	case K_HOSTLIST:
	case K_CMDLIST:
	case K_PATHLIST: return set_list(ld, n, k, base, path);
	case K_KVMAP: return set_kvmap(ld, n, k, base, path);
	case K_MAP: return apply_map(ld, n, k->sub, (char *)base + k->off,
	    path);
	case K_NAMEDMAP: return set_namedmap(ld, n, k, base, path);
	case K_MAPLIST: return set_maplist(ld, n, k, base, path);
	case K_NUM: return set_num(ld, n, k, base, path);
	}
	return -1;
}

static const char *
key_suggest(const struct key *keys, const char *name)
{
	for (const struct key *k = keys; k->name != NULL; k++)
		if (strcasecmp(k->name, name) == 0)
			return k->name;
	return NULL;
}

/* Walk one map against its table: unknown and duplicate keys are errors, as are
 * missing required ones. An empty value (`key:` alone) counts as absent for
 * maps, so `permissions:` with nothing under it means no permissions. */
static int
apply_map(struct ld *ld, const struct node *n, const struct key *keys,
    void *base, const char *path)
{
	if (n->kind == N_SCALAR && n->plain && n->vlen == 0)
		goto required;
	if (map_dup_check(ld, n, path[0] ? path : "the config") == -1)
		return -1;
	for (size_t i = 0; i + 1 < n->nkids; i += 2) {
		const struct node *key = n->kids[i], *val = n->kids[i + 1];
		const struct key *k;
		char sub[256];

		for (k = keys; k->name != NULL; k++)
			if (strcmp(k->name, key->value) == 0)
				break;
		subpath(sub, sizeof(sub), path, key->value);
		if (k->name == NULL) {
			const char *hint = key_suggest(keys, key->value);

			ld_error(ld, key, "unknown key \"%s\"%s%s%s", sub,
			    hint ? " (did you mean \"" : "", hint ? hint : "",
			    hint ? "\"?)" : "");
			return -1;
		}
		if (k->present != NOFF)
			*(int *)((char *)base + k->present) = 1;
		if (val->kind == N_SCALAR && val->plain && val->vlen == 0 &&
		    (k->type == K_MAP || k->type == K_STRLIST ||
		    k->type == K_HOSTLIST || k->type == K_CMDLIST ||
		    k->type == K_PATHLIST || k->type == K_IDLIST ||
		    k->type == K_KVMAP || k->type == K_NAMEDMAP ||
		    k->type == K_MAPLIST)) {
			if (k->type == K_MAP)
				continue;
			continue;
		}
		if (set_value(ld, val, k, base, sub) == -1)
			return -1;
	}
required:
	for (const struct key *k = keys; k->name != NULL; k++) {
		int found = 0;

		if (!(k->flags & F_REQUIRED))
			continue;
		for (size_t i = 0; n->kind == N_MAP && i < n->nkids; i += 2)
			if (strcmp(n->kids[i]->value, k->name) == 0)
				found = 1;
		if (!found) {
			ld_error(ld, n, "missing required key \"%s%s%s\"", path,
			    path[0] ? "." : "", k->name);
			return -1;
		}
	}
	return 0;
}

/* Defaults and checks that span several keys. */

static char *
dir_choice(const char *flag, const char *env, const char *def)
{
	const char *e = getenv(env);

	if (flag != NULL)
		return xstrdup(flag);
	if (e != NULL && *e != '\0')
		return xstrdup(e);
	return xstrdup(def);
}

static void
defaults(struct cfg *c)
{
	if (c->model.base_url == NULL)
		c->model.base_url = xstrdup(c->model.provider ==
		    PROVIDER_ANTHROPIC ? "https://api.anthropic.com" :
		    "https://api.openai.com/v1");
	if (c->model.max_tokens == 0)
		c->model.max_tokens = 4096;
	if (c->model.max_steps == 0)
		c->model.max_steps = 25;
	if (c->model.timeout_ms == 0)
		c->model.timeout_ms = 120000;
	for (size_t i = 0; i < c->nfallbacks; i++) {
		struct cfg_model *f = &c->fallbacks[i];

		if (f->base_url == NULL)
			f->base_url = xstrdup(f->provider == PROVIDER_ANTHROPIC ?
			    "https://api.anthropic.com" :
			    "https://api.openai.com/v1");
		if (f->max_tokens == 0)
			f->max_tokens = c->model.max_tokens;
		if (f->timeout_ms == 0)
			f->timeout_ms = c->model.timeout_ms;
		f->max_steps = c->model.max_steps;
	}
	if (c->trig.github.enabled) {
		if (c->trig.github.path == NULL)
			c->trig.github.path = xstrdup("/github");
		if (c->trig.github.prompt == NULL)
			c->trig.github.prompt = xstrdup("GitHub sent a {{event}} "
			    "event ({{action}}) for {{repo}}:\n{{body}}");
		if (c->trig.github.events.n == 0)
			strlist_add(&c->trig.github.events, "*");
	}
	if (c->trig.webhook.enabled) {
		if (c->trig.webhook.path == NULL)
			c->trig.webhook.path = xstrdup("/");
		if (c->trig.webhook.prompt == NULL)
			c->trig.webhook.prompt = xstrdup("{{body}}");
	}
	if (c->trig.telegram.enabled && c->trig.telegram.api_base == NULL)
		c->trig.telegram.api_base = xstrdup("https://api.telegram.org");
	if (c->trig.discord.enabled) {
		if (c->trig.discord.api_base == NULL)
			c->trig.discord.api_base =
			    xstrdup("https://discord.com/api/v10");
		if (c->trig.discord.gateway == NULL)
			c->trig.discord.gateway = xstrdup(CFG_DISCORD_GATEWAY);
	}
	if (c->trig.imap.enabled) {
		if (c->trig.imap.port == 0)
			c->trig.imap.port = c->trig.imap.tls == TLS_IMPLICIT ?
			    993 : 143;
		if (c->trig.imap.mailbox == NULL)
			c->trig.imap.mailbox = xstrdup("INBOX");
		if (c->trig.imap.smtp.enabled && c->trig.imap.smtp.port == 0)
			c->trig.imap.smtp.port = c->trig.imap.smtp.tls ==
			    TLS_IMPLICIT ? 465 : 587;
	}
	if (c->status_listen.host == NULL) {
		c->status_listen.host = xstrdup("127.0.0.1");
		c->status_listen.port = 9090;
	}
	if (c->limits.concurrent_runs == 0)
		c->limits.concurrent_runs = 16;
	if (c->limits.queue == 0)
		c->limits.queue = 1000;
	if (c->limits.run_timeout_ms == 0)
		c->limits.run_timeout_ms = 600000;
	if (c->limits.tool_output == 0)
		c->limits.tool_output = 8192;
	if (c->limits.tool_timeout_ms == 0)
		c->limits.tool_timeout_ms = 60000;
}

static int
finish(struct ld *ld, const struct node *root, const struct cfg_dirs *dirs)
{
	struct cfg *c = ld->cfg;
	const char *ap;

	defaults(c);
	for (size_t i = 0; i < c->env.n; i++)
		if (strstr(c->env.v[i].value, "${secret:") != NULL)
			strlist_add(&c->perm.secret_env, c->env.v[i].key);
	if (c->trig.webhook.enabled && c->trig.webhook.path[0] != '/') {
		ld_error(ld, root, "triggers.webhook.path must start with /");
		return -1;
	}
	if (c->trig.github.enabled && c->trig.github.path[0] != '/') {
		ld_error(ld, root, "triggers.github.path must start with /");
		return -1;
	}
	if (c->trig.github.enabled && c->trig.webhook.enabled &&
	    c->trig.github.listen.port != 0 &&
	    c->trig.github.listen.port == c->trig.webhook.listen.port) {
		ld_error(ld, root, "triggers.github.listen and "
		    "triggers.webhook.listen must use different ports");
		return -1;
	}
	if (c->limits.max_cost > 0 && !c->model.has_pricing) {
		ld_error(ld, root, "limits.max_cost needs model.pricing");
		return -1;
	}
	for (size_t i = 0; i < c->nfallbacks; i++)
		if (c->limits.max_cost > 0 && !c->fallbacks[i].has_pricing) {
			ld_error(ld, root, "limits.max_cost needs pricing for "
			    "model.fallbacks.%zu too", i);
			return -1;
		}
	for (size_t i = 0; i < c->skills.n; i++) {
		const char *s = c->skills.v[i];

		if (*s == '\0' || *s == '.' || strchr(s, '/') != NULL) {
			ld_error(ld, root, "skills: \"%s\" must be a folder name "
			    "under the skills folder", s);
			return -1;
		}
	}
	ap = c->audit_path != NULL ? c->audit_path : "audit.jsonl";
	if (*ap == '/' || *ap == '\0' || strstr(ap, "..") != NULL) {
		ld_error(ld, root, "audit.path must be relative to the data "
		    "folder, without \"..\"");
		return -1;
	}
	c->data_dir = dir_choice(dirs ? dirs->data : NULL, "AF_DATA", "/data");
	c->skills_dir = dir_choice(dirs ? dirs->skills : NULL, "AF_SKILLS",
	    "/skills");
	c->secrets_dir = dir_choice(dirs ? dirs->secrets : NULL, "AF_SECRETS",
	    "/run/secrets");
	{
		char *full = xasprintf("%s/%s", c->data_dir, ap);

		free(c->audit_path);
		c->audit_path = full;
	}
	return 0;
}

static void
set_dir(struct cfg *c, const char *path)
{
	char *copy = xstrdup(path), *slash = strrchr(copy, '/');
	char real[PATH_MAX];

	if (slash == NULL)
		snprintf(copy, strlen(copy) + 1, ".");
	else if (slash == copy)
		slash[1] = '\0';
	else
		*slash = '\0';
	if (realpath(copy, real) != NULL)
		c->dir = xstrdup(real);
	else
		c->dir = xstrdup(copy);
	free(copy);
}

struct cfg *
cfg_load_buf(const char *name, const char *data, size_t len,
    const struct cfg_dirs *dirs, char *err, size_t errlen)
{
	struct ld ld = { .file = name, .err = err, .errlen = errlen };
	struct node *root;
	struct cfg *c;

	if (len > CFG_MAX_FILE) {
		snprintf(err, errlen, "%s: the config is larger than 1 MiB", name);
		return NULL;
	}
	if (memchr(data, '\0', len) != NULL) {
		snprintf(err, errlen, "%s: the config contains a NUL byte", name);
		return NULL;
	}
	c = xcalloc(1, sizeof(*c));
	ld.cfg = c;
	c->path = xstrdup(name);
	set_dir(c, name);
	root = parse_document(&ld, data, len);
	if (root != NULL && root->kind != N_MAP)
		ld_error(&ld, root, "the config must be a map of keys");
	if (root != NULL && !ld.failed)
		apply_map(&ld, root, top_keys, c, "");
	if (!ld.failed)
		finish(&ld, root, dirs);
	node_free(root);
	if (ld.failed) {
		cfg_free(c);
		return NULL;
	}
	return c;
}

struct cfg *
cfg_load(const char *path, const struct cfg_dirs *dirs, char *err,
    size_t errlen)
{
	struct buf b;
	struct cfg *c;

	buf_init(&b);
	if (read_file_max(path, CFG_MAX_FILE, &b) == -1) {
		if (errno == EFBIG)
			snprintf(err, errlen, "%s: the config is larger than "
			    "1 MiB", path);
		else
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
		buf_free(&b);
		return NULL;
	}
	c = cfg_load_buf(path, b.data, b.len, dirs, err, errlen);
	buf_free(&b);
	return c;
}

/* Secrets. */

static int
read_secret(const char *dir, const char *name, char **out)
{
	char *path = xasprintf("%s/%s", dir, name);
	struct buf b;
	int rc;

	buf_init(&b);
	rc = read_file_max(path, CFG_MAX_SECRET, &b);
	free(path);
	if (rc == -1) {
		buf_free(&b);
		return -1;
	}
	if (b.len > 0 && b.data[b.len - 1] == '\n')
		b.data[--b.len] = '\0';
	if (b.len > 0 && b.data[b.len - 1] == '\r')
		b.data[--b.len] = '\0';
	if (memchr(b.data, '\0', b.len) != NULL || b.len == 0) {
		buf_free(&b);
		errno = EINVAL;
		return -1;
	}
	*out = buf_steal(&b);
	return 0;
}

/* Replace the references of one field, refs[0..n), in one pass from left to
 * right: a field may hold several, and text around them ("Bearer
 * ${secret:x}"), and a secret's value is never searched for references
 * itself (a value holding "${secret:x}" would loop or pull in another). */
static void
expand_field(const struct cfg_secret_ref *refs, char *const *values,
    size_t n)
{
	char *field = *refs[0].slot;
	const char *from = field, *p;
	struct buf b;

	buf_init(&b);
	for (size_t k = 0; k < n && (p = strstr(from, "${secret:")) != NULL;
	    k++) {
		buf_add(&b, from, (size_t)(p - from));
		buf_adds(&b, values[k]);
		from = p + strlen("${secret:") + strlen(refs[k].name) + 1;
	}
	buf_adds(&b, from);
	free(field);
	*refs[0].slot = buf_steal(&b);
}

int
cfg_resolve_secrets(struct cfg *c, char *err, size_t errlen)
{
	char **values = xcalloc(c->nrefs + 1, sizeof(*values));
	int rc = -1;

	for (size_t i = 0; i < c->nrefs; i++) {
		struct cfg_secret_ref *r = &c->refs[i];

		if (read_secret(c->secrets_dir, r->name, &values[i]) == -1) {
			snprintf(err, errlen, "%s:%d:%d: secret \"%s\" %s "
			    "(looked for %s/%s)", c->path, r->line, r->col,
			    r->name, errno == EINVAL ? "is empty or binary" :
			    errno == EFBIG ? "is larger than 64 KiB" :
			    "cannot be read", c->secrets_dir, r->name);
			goto out;
		}
		if (!strlist_has(&c->secret_values, values[i]))
			strlist_add(&c->secret_values, values[i]);
		log_redact_add(values[i]);
	}
	/* A field's references are recorded one after another. */
	for (size_t i = 0, j; i < c->nrefs; i = j) {
		for (j = i + 1; j < c->nrefs && c->refs[j].slot ==
		    c->refs[i].slot; j++)
			;
		expand_field(&c->refs[i], &values[i], j - i);
	}
	rc = 0;
out:
	for (size_t i = 0; i < c->nrefs; i++)
		free(values[i]);
	free(values);
	return rc;
}

void
cfg_hermetic_reasons(const struct cfg *c, struct strlist *out)
{
	char line[300];

	for (size_t i = 0; i < c->perm.run.n; i++) {
		snprintf(line, sizeof(line), "permissions.run grants %s",
		    c->perm.run.v[i]);
		strlist_add(out, line);
	}
	for (size_t i = 0; i < c->nmcp; i++)
		if (c->mcp[i].command.n > 0) {
			snprintf(line, sizeof(line), "tools.mcp.%s is a stdio "
			    "server", c->mcp[i].name);
			strlist_add(out, line);
		}
	if (c->trig.discord.enabled && c->trig.discord.voice_channels.n > 0)
		strlist_add(out, "triggers.discord.voice_channels");
}

static void
kvlist_free(struct kvlist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].key);
		free(l->v[i].value);
	}
	free(l->v);
}

static void
model_free(struct cfg_model *m)
{
	free(m->name);
	free(m->base_url);
	free(m->api_key);
}

void
cfg_free(struct cfg *c)
{
	if (c == NULL)
		return;
	free(c->path);
	free(c->dir);
	free(c->data_dir);
	free(c->skills_dir);
	free(c->secrets_dir);
	free(c->name);
	model_free(&c->model);
	for (size_t i = 0; i < c->nfallbacks; i++)
		model_free(&c->fallbacks[i]);
	free(c->fallbacks);
	for (size_t i = 0; i < c->trig.ncron; i++) {
		free(c->trig.cron[i].schedule);
		free(c->trig.cron[i].prompt);
		free(c->trig.cron[i].timezone);
	}
	free(c->trig.cron);
	for (size_t i = 0; i < c->ncommands; i++) {
		free(c->commands[i].name);
		free(c->commands[i].prompt);
		free(c->commands[i].description);
	}
	free(c->commands);
	free(c->status_token);
	free(c->trig.webhook.token);
	free(c->trig.github.listen.host);
	free(c->trig.github.path);
	free(c->trig.github.secret);
	free(c->trig.github.prompt);
	strlist_free(&c->trig.github.events);
	strlist_free(&c->trig.github.repos);
	free(c->system);
	strlist_free(&c->skills);
	strlist_free(&c->perm.net);
	strlist_free(&c->perm.run);
	strlist_free(&c->perm.read);
	strlist_free(&c->perm.write);
	strlist_free(&c->perm.secret_env);
	kvlist_free(&c->env);
	for (size_t i = 0; i < c->nmcp; i++) {
		free(c->mcp[i].name);
		strlist_free(&c->mcp[i].command);
		free(c->mcp[i].url);
		strlist_free(&c->mcp[i].include);
		kvlist_free(&c->mcp[i].env);
	}
	free(c->mcp);
	free(c->trig.webhook.listen.host);
	free(c->trig.webhook.path);
	free(c->trig.webhook.secret);
	free(c->trig.webhook.prompt);
	free(c->trig.telegram.token);
	free(c->trig.telegram.api_base);
	strlist_free(&c->trig.telegram.allowed_chats);
	free(c->trig.discord.token);
	free(c->trig.discord.api_base);
	free(c->trig.discord.gateway);
	strlist_free(&c->trig.discord.channels);
	strlist_free(&c->trig.discord.voice_channels);
	free(c->trig.imap.host);
	free(c->trig.imap.ca_file);
	free(c->trig.imap.username);
	free(c->trig.imap.password);
	free(c->trig.imap.mailbox);
	free(c->trig.imap.smtp.host);
	free(c->trig.imap.smtp.ca_file);
	free(c->trig.imap.smtp.username);
	free(c->trig.imap.smtp.password);
	free(c->status_listen.host);
	free(c->audit_path);
	for (size_t i = 0; i < c->nrefs; i++)
		free(c->refs[i].name);
	free(c->refs);
	strlist_free(&c->secret_values);
	free(c);
}

/* The JSON Schema, from the same table. */

static void
schema_keys(struct buf *b, const struct key *keys, int depth);

static void
json_str(struct buf *b, const char *s)
{
	buf_addc(b, '"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			buf_addc(b, '\\');
		buf_addc(b, *s);
	}
	buf_addc(b, '"');
}

static void
schema_type(struct buf *b, const struct key *k, int depth)
{
	switch (k->type) {
	case K_STR:
	case K_URL:
	case K_NAME:
		buf_adds(b, "\"type\":\"string\"");
		if (k->type == K_NAME)
			buf_adds(b, ",\"pattern\":\"^[a-z0-9][a-z0-9-]{0,62}$\"");
		if (k->type == K_URL)
			buf_adds(b, ",\"pattern\":\"^(https|wss|http|ws)://\"");
		break;
	case K_INT:
		buf_addf(b, "\"type\":\"integer\",\"minimum\":%ld,"
		    "\"maximum\":%ld", k->min, k->max);
		break;
	case K_BOOL:
		buf_adds(b, "\"type\":\"boolean\"");
		break;
	case K_DUR:
		buf_adds(b, "\"type\":\"string\",\"pattern\":"
		    "\"^[0-9]+(ms|s|m|h)$\"");
		break;
	case K_LISTEN:
		buf_adds(b, "\"type\":\"string\",\"pattern\":\"^.+:[0-9]+$\"");
		break;
	case K_ENUM:
		buf_adds(b, "\"enum\":[");
		for (int i = 0; k->enums[i] != NULL; i++) {
			if (i)
				buf_addc(b, ',');
			json_str(b, k->enums[i]);
		}
		buf_addc(b, ']');
		break;
	case K_IDLIST:
		buf_adds(b, "\"type\":[\"array\",\"null\"],\"items\":{\"type\":"
		    "[\"integer\",\"string\"]}");
		break;
	case K_STRLIST:
	case K_HOSTLIST:
	case K_CMDLIST:
	case K_PATHLIST:
		buf_adds(b, "\"type\":[\"array\",\"null\"],\"items\":"
		    "{\"type\":\"string\"}");
		break;
	case K_KVMAP:
		buf_adds(b, "\"type\":[\"object\",\"null\"],"
		    "\"additionalProperties\":{\"type\":[\"string\",\"number\","
		    "\"boolean\"]}");
		break;
	case K_MAP:
		buf_adds(b, "\"type\":[\"object\",\"null\"],");
		schema_keys(b, k->sub, depth + 1);
		break;
	case K_NAMEDMAP:
		buf_adds(b, "\"type\":[\"object\",\"null\"],"
		    "\"propertyNames\":{\"pattern\":\"" ENTRY_NAME_PATTERN "\"},"
		    "\"additionalProperties\":{\"type\":\"object\",");
		schema_keys(b, k->sub, depth + 1);
		buf_addc(b, '}');
		break;
	case K_MAPLIST:
		buf_adds(b, "\"type\":[\"array\",\"null\"],"
		    "\"items\":{\"type\":\"object\",");
		schema_keys(b, k->sub, depth + 1);
		buf_addc(b, '}');
		break;
	case K_NUM:
		buf_addf(b, "\"type\":\"number\",\"minimum\":%ld,"
		    "\"maximum\":%ld", k->min, k->max);
		break;
	}
}

static void
schema_keys(struct buf *b, const struct key *keys, int depth)
{
	int nreq = 0;

	buf_adds(b, "\"additionalProperties\":false,\"properties\":{");
	for (const struct key *k = keys; k->name != NULL; k++) {
		if (k != keys)
			buf_addc(b, ',');
		json_str(b, k->name);
		buf_adds(b, ":{\"description\":");
		json_str(b, k->doc);
		buf_addc(b, ',');
		schema_type(b, k, depth);
		buf_addc(b, '}');
	}
	buf_addc(b, '}');
	for (const struct key *k = keys; k->name != NULL; k++)
		if (k->flags & F_REQUIRED) {
			buf_adds(b, nreq++ ? "," : ",\"required\":[");
			json_str(b, k->name);
		}
	if (nreq)
		buf_addc(b, ']');
}

char *
cfg_schema_json(void)
{
	struct buf b;

	buf_init(&b);
	buf_adds(&b, "{\"$schema\":\"http://json-schema.org/draft-07/schema#\","
	    "\"title\":\"af agent\",\"type\":\"object\",");
	schema_keys(&b, top_keys, 0);
	buf_adds(&b, "}\n");
	return buf_steal(&b);
}
