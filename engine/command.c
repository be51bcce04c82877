/*
 * Slash commands. A command is recognised only at the very start of a
 * message, so a path or a fraction later in the text ("see /etc/hosts",
 * "1/2") never is one. What follows the command is the user's data: it is
 * put in place of $ARGS in a single pass and never looked at again, so an
 * argument that itself says "$ARGS" or "/help" stays literal.
 */
#include "command.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "run.h"
#include "state.h"
#include "util.h"

#define CMD_ARGS	"$ARGS"

struct builtin {
	const char	*name;
	const char	*description;
	void		(*fn)(const struct cfg *, const char *, struct buf *);
};

static void help(const struct cfg *, const char *, struct buf *);
static void status(const struct cfg *, const char *, struct buf *);
static void reset(const struct cfg *, const char *, struct buf *);

static const struct builtin builtins[] = {
	{ "help", "list the commands", help },
	{ "status", "what the agent is doing now", status },
	{ "reset", "forget this conversation's history", reset },
	{ "new", "start a new conversation (same as /reset)", reset },
};

static void
help(const struct cfg *cfg, const char *conv, struct buf *out)
{
	buf_adds(out, "Commands:\n");
	for (size_t i = 0; i < nitems(builtins); i++)
		buf_addf(out, "/%s - %s\n", builtins[i].name,
		    builtins[i].description);
	for (size_t i = 0; i < cfg->ncommands; i++) {
		const struct cfg_command *c = &cfg->commands[i];

		buf_addf(out, "/%s", c->name);
		if (c->description != NULL && c->description[0] != '\0')
			buf_addf(out, " - %s", c->description);
		buf_addc(out, '\n');
	}
	buf_adds(out, "Anything else is a message for the agent.");
}

static void
status(const struct cfg *cfg, const char *conv, struct buf *out)
{
	const struct run_stats *s = run_stats();

	buf_addf(out, "%s (af %s): %ld run%s in flight, %ld queued; %llu "
	    "run%s so far (%llu ok, %llu failed), %llu tool call%s, %llu "
	    "denied, %llu tokens in, %llu out.", cfg->name, AF_VERSION,
	    s->inflight, s->inflight == 1 ? "" : "s", s->queued,
	    (unsigned long long)s->runs_total, s->runs_total == 1 ? "" : "s",
	    (unsigned long long)s->runs_ok, (unsigned long long)s->runs_failed,
	    (unsigned long long)s->tool_calls, s->tool_calls == 1 ? "" : "s",
	    (unsigned long long)s->denials, (unsigned long long)s->tokens_in,
	    (unsigned long long)s->tokens_out);
}

static void
reset(const struct cfg *cfg, const char *conv, struct buf *out)
{
	if (conv == NULL) {
		buf_adds(out, "There is no conversation history to clear here.");
		return;
	}
	run_forget_history(conv);
	if (state_history_clear(conv) == -1) {
		buf_adds(out, "Sorry, the conversation history could not be "
		    "cleared.");
		return;
	}
	buf_adds(out, "Done: this conversation's history is cleared. The "
	    "next message starts afresh.");
}

/* Telegram appends "@botname" to commands picked from its menu in groups;
 * the length of that suffix with its '@', 0 without one, -1 when an '@'
 * names nothing. */
static int
bot_suffix_len(const char *s)
{
	int n = 0;

	if (*s != '@')
		return 0;
	for (s++; isalnum((unsigned char)*s) || *s == '_'; s++)
		n++;
	return n > 0 ? n + 1 : -1;
}

/*
 * Split "/name[@bot] args" into name, the bot named (*bot, *botlen; 0 when
 * none) and args. 0 when text is not a command at all: no slash first,
 * nothing a name can be made of, or something other than whitespace right
 * after the name ("/etc/hosts").
 */
static int
parse(const char *text, char *name, size_t namelen, const char **bot,
    size_t *botlen, const char **args)
{
	const char *p = text + 1;
	size_t n = 0;
	int sl;

	if (text[0] != '/')
		return 0;
	while (isalnum((unsigned char)p[n]) || p[n] == '_' || p[n] == '-')
		n++;
	if (n == 0 || n >= namelen)
		return 0;
	memcpy(name, p, n);
	name[n] = '\0';
	p += n;
	if ((sl = bot_suffix_len(p)) == -1)
		return 0;
	*bot = p + 1;
	*botlen = sl > 0 ? (size_t)sl - 1 : 0;
	p += sl;
	if (*p != '\0' && !isspace((unsigned char)*p))
		return 0;
	while (isspace((unsigned char)*p))
		p++;
	*args = p;
	return 1;
}

/*
 * Whose command it is. In a group every bot sees "/reset@OtherBot", and
 * answering it would let anyone clear this bot's history or start paid
 * runs with a command meant for another, so a suffix must name this bot.
 * Without a name of our own (a chat that has no such suffixes) a suffix
 * makes the text no command. 1 when the command is ours; else 0, and *kind
 * is what cmd_handle_bot returns.
 */
static int
ours(const char *self, const char *bot, size_t botlen, int *kind)
{
	if (botlen == 0)
		return 1;
	if (self != NULL && strlen(self) == botlen &&
	    strncasecmp(self, bot, botlen) == 0)
		return 1;
	*kind = self == NULL ? CMD_NONE : CMD_OTHER_BOT;
	return 0;
}

/* Put args in place of every $ARGS of the template, in one pass; -1 when the
 * result would pass CMD_PROMPT_MAX. */
static int
expand(const char *tmpl, const char *args, char **out)
{
	size_t alen = strlen(args), alen_trim = alen;
	const char *p = tmpl, *hit;
	struct buf b;

	/* Trailing whitespace of a chat message is never meant. */
	while (alen_trim > 0 && isspace((unsigned char)args[alen_trim - 1]))
		alen_trim--;
	buf_init(&b);
	while ((hit = strstr(p, CMD_ARGS)) != NULL) {
		buf_add(&b, p, (size_t)(hit - p));
		buf_add(&b, args, alen_trim);
		p = hit + strlen(CMD_ARGS);
		if (b.len > CMD_PROMPT_MAX)
			break;
	}
	buf_adds(&b, p);
	if (b.len > CMD_PROMPT_MAX) {
		buf_free(&b);
		return -1;
	}
	*out = buf_steal(&b);
	return 0;
}

int
cmd_handle_bot(const struct cfg *cfg, const char *trigger, const char *self,
    const char *conversation, const char *text, struct buf *reply_out,
    char **prompt_out)
{
	char name[CMD_NAME_MAX];
	const char *args, *bot;
	size_t botlen;
	int kind;

	*prompt_out = NULL;
	if (text == NULL || !parse(text, name, sizeof(name), &bot, &botlen,
	    &args))
		return CMD_NONE;
	if (!ours(self, bot, botlen, &kind)) {
		if (kind == CMD_OTHER_BOT)
			log_debug("%s: /%s is for @%.*s, not for us", trigger,
			    name, (int)botlen, bot);
		return kind;
	}
	for (size_t i = 0; i < nitems(builtins); i++)
		if (strcasecmp(name, builtins[i].name) == 0) {
			builtins[i].fn(cfg, conversation, reply_out);
			log_debug("%s: /%s answered", trigger, builtins[i].name);
			return CMD_ANSWERED;
		}
	for (size_t i = 0; i < cfg->ncommands; i++) {
		const struct cfg_command *c = &cfg->commands[i];

		if (strcasecmp(name, c->name) != 0)
			continue;
		if (expand(c->prompt, args, prompt_out) == -1) {
			buf_addf(reply_out, "The arguments of /%s are too long.",
			    c->name);
			return CMD_ANSWERED;
		}
		return CMD_EXPANDED;
	}
	buf_addf(reply_out, "Unknown command /%.*s. /help lists the commands.",
	    CMD_NAME_MAX, name);
	return CMD_ANSWERED;
}

int
cmd_handle(const struct cfg *cfg, const char *trigger,
    const char *conversation, const char *text, struct buf *reply_out,
    char **prompt_out)
{
	return cmd_handle_bot(cfg, trigger, NULL, conversation, text,
	    reply_out, prompt_out);
}
