/* The agent's YAML file as typed structs (SPEC section 2). The loader is driven by
 * one schema table (config.c), which `af schema` also prints, so the two agree. */
#ifndef AF_CONFIG_H
#define AF_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define CFG_MAX_FILE	(1 << 20)	/* SPEC: files over 1 MiB are rejected */
#define CFG_MAX_SECRET	(64 << 10)	/* one secret file */

enum cfg_provider { PROVIDER_ANTHROPIC = 0, PROVIDER_OPENAI = 1 };
enum cfg_tls { TLS_IMPLICIT = 0, TLS_STARTTLS = 1 };

struct kv {
	char	*key;
	char	*value;
};

struct kvlist {
	struct kv	*v;
	size_t		 n;
};

/* host:port of a listener. */
struct cfg_listen {
	char	*host;		/* NULL: not configured */
	int	 port;
};

struct cfg_model {
	int	 provider;	/* enum cfg_provider */
	char	*name;
	char	*base_url;	/* provider default filled in when absent */
	char	*api_key;	/* NULL for local servers */
	long	 max_tokens;
	long	 max_steps;
	long	 timeout_ms;
	double	 price_in;	/* USD per million input tokens; 0: unknown */
	double	 price_out;	/* USD per million output tokens */
	int	 has_pricing;
};


/* The four permission axes; every entry is normalized at load time: net hosts
 * lowercased without a trailing dot, run entries are basenames, read and write
 * entries are absolute, normalized paths without a trailing slash. */
struct cfg_perms {
	struct strlist	net;
	struct strlist	run;
	struct strlist	read;
	struct strlist	write;
	struct strlist	secret_env;	/* env: names whose value holds a
					   secret: never expanded by run */
};

struct cfg_mcp {
	char		*name;
	struct strlist	 command;	/* stdio server; empty for HTTP */
	char		*url;		/* Streamable HTTP server; NULL for stdio */
	struct strlist	 include;
	int		 has_include;
	int		 readonly;
	struct kvlist	 env;
	long		 timeout_ms;
	int		 line;
};

enum cfg_reply { REPLY_ASYNC = 0, REPLY_WAIT = 1 };

struct cfg_webhook {
	int			 enabled;
	struct cfg_listen	 listen;
	char			*path;
	char			*secret;	/* HMAC key; NULL: unsigned */
	char			*token;		/* Bearer token; NULL: none */
	char			*prompt;
	int			 reply;		/* enum cfg_reply */
};

/* GitHub webhooks: signed deliveries on their own listener and path. */
struct cfg_github {
	int			 enabled;
	struct cfg_listen	 listen;
	char			*path;
	char			*secret;	/* required */
	struct strlist		 events;	/* "push", "pull_request.opened", "*" */
	struct strlist		 repos;		/* owner/name, or owner with a star */
	char			*prompt;
};

struct cfg_cron {
	char	*schedule;	/* five fields */
	char	*prompt;
	char	*timezone;	/* NULL: UTC */
	int	 line;
};

/* A config-defined slash command for chat triggers: /NAME ARGS. */
struct cfg_command {
	char	*name;
	char	*prompt;	/* $ARGS is replaced by the arguments */
	char	*description;
	int	 line;
};

enum cfg_memory { MEMORY_NONE = 0, MEMORY_CONVERSATION = 1, MEMORY_AGENT = 2 };

struct cfg_telegram {
	int		 enabled;
	char		*token;
	char		*api_base;
	struct strlist	 allowed_chats;	/* exact decimal ids as strings */
	int		 has_allowed_chats;
};

/* triggers.discord.gateway when the config leaves it out; the trigger asks
 * Discord for the URL to use only when it is this one. */
#define CFG_DISCORD_GATEWAY	"wss://gateway.discord.gg/?v=10&encoding=json"

struct cfg_discord {
	int		 enabled;
	char		*token;
	char		*api_base;
	char		*gateway;
	struct strlist	 channels;	/* snowflakes as strings */
	int		 has_channels;
	struct strlist	 voice_channels;
};

struct cfg_smtp {
	int	 enabled;
	char	*host;
	long	 port;
	int	 tls;		/* enum cfg_tls */
	char	*ca_file;
	char	*username;
	char	*password;
};

struct cfg_imap {
	int		 enabled;
	char		*host;
	long		 port;
	int		 tls;	/* enum cfg_tls */
	char		*ca_file;
	char		*username;
	char		*password;
	char		*mailbox;
	struct cfg_smtp	 smtp;
};

struct cfg_triggers {
	struct cfg_webhook	webhook;
	struct cfg_github	github;
	struct cfg_cron		*cron;
	size_t			 ncron;
	struct cfg_telegram	telegram;
	struct cfg_discord	discord;
	struct cfg_imap		imap;
};

struct cfg_limits {
	long	concurrent_runs;
	long	queue;
	long	run_timeout_ms;		/* whole run; default 10m */
	long	tool_output;		/* bytes of tool output kept; default 8 KiB */
	long	tool_timeout_ms;	/* run_bash default timeout; default 60s */
	double	max_cost;		/* USD per run; 0: no bound */
};

/* Where a `${secret:NAME}` appeared, so the resolver can name it in errors. */
struct cfg_secret_ref {
	char	**slot;		/* the string field holding the template */
	char	 *name;
	int	  line;
	int	  col;
};

struct cfg {
	char			*path;		/* the config file as given */
	char			*dir;		/* its folder, absolute: the agent folder */
	char			*data_dir;
	char			*skills_dir;
	char			*secrets_dir;

	char			*name;
	struct cfg_model	 model;
	struct cfg_model	*fallbacks;	/* tried in order on provider errors */
	size_t			 nfallbacks;
	char			*system;
	struct strlist		 skills;
	struct cfg_perms	 perm;
	struct kvlist		 env;
	struct cfg_mcp		*mcp;
	size_t			 nmcp;
	struct cfg_triggers	 trig;
	struct cfg_listen	 status_listen;
	char			*status_token;	/* Bearer for /runs and /audit */
	struct cfg_command	*commands;
	size_t			 ncommands;
	int			 memory;	/* enum cfg_memory */
	int			 schedules;	/* schedule tools exist */
	char			*audit_path;	/* absolute after cfg_load */
	struct cfg_limits	 limits;
	int			 sandbox_strict;

	struct cfg_secret_ref	*refs;
	size_t			 nrefs;
	struct strlist		 secret_values;	/* resolved values, for redaction */
};

/* Folders given on the command line or in the environment; NULL: default. */
struct cfg_dirs {
	const char	*data;
	const char	*skills;
	const char	*secrets;
};

/*
 * Load and check a config file. On failure returns NULL and fills err with
 * "FILE:LINE:COL: MESSAGE" (or "FILE: MESSAGE" when no position applies).
 * Secrets are not read: call cfg_resolve_secrets for that.
 */
struct cfg *cfg_load(const char *path, const struct cfg_dirs *, char *err,
    size_t errlen);
/* Load from memory (fuzzing, tests); name is used in messages. */
struct cfg *cfg_load_buf(const char *name, const char *data, size_t len,
    const struct cfg_dirs *, char *err, size_t errlen);
/* Read every ${secret:NAME} from the secrets folder; the error names the secret
 * and where it was referenced, never a value. */
int cfg_resolve_secrets(struct cfg *, char *err, size_t errlen);
void cfg_free(struct cfg *);

/* Why the agent is not hermetic: one line per reason ("permissions.run grants
 * gh"). Empty list: hermetic. */
void cfg_hermetic_reasons(const struct cfg *, struct strlist *out);

/* The config's JSON Schema, generated from the loader's table. */
char *cfg_schema_json(void);

/* True for a loopback host (127.0.0.0/8, ::1, localhost). */
int cfg_host_is_loopback(const char *host);

#endif
