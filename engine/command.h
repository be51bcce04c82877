/* Slash commands for chat triggers: the built-ins (/help, /status, /reset,
 * /new) and the config's `commands`. One helper, so every chat trigger reads
 * a command the same way. A trigger calls cmd_handle where a message would
 * become a run request. */
#ifndef AF_COMMAND_H
#define AF_COMMAND_H

#include "config.h"
#include "util.h"

#define CMD_NAME_MAX	64		/* longer is not a command name */
#define CMD_PROMPT_MAX	(64 << 10)	/* an expanded command prompt */

enum cmd_result {
	CMD_NONE = 0,		/* not a command: run the text as it is */
	CMD_ANSWERED = 1,	/* reply_out holds the answer; no run */
	CMD_EXPANDED = 2,	/* *prompt_out is the run's prompt */
	CMD_OTHER_BOT = 3	/* "/name@bot" for another bot: not for us */
};

/*
 * Read text as a command when it starts with "/name" or "/name@bot" followed
 * by whitespace or the end. bot is this bot's own username (Telegram's
 * getMe): "/name@bot" is ours only when bot names it, case-insensitively,
 * and any other name gives CMD_OTHER_BOT, which the caller must neither run
 * nor answer. conversation may be NULL (nothing to reset). The arguments
 * are data: they replace $ARGS in the command's prompt and are never
 * expanded themselves. Returns an enum cmd_result; for CMD_EXPANDED the
 * caller owns and frees *prompt_out. reply_out must be initialized; it is
 * appended to only for CMD_ANSWERED.
 */
int cmd_handle_bot(const struct cfg *, const char *trigger, const char *bot,
    const char *conversation, const char *text, struct buf *reply_out,
    char **prompt_out);
/* The same for a chat where commands carry no "@bot" (Discord): there
 * "/name@anything" is no command at all, only text (CMD_NONE). */
int cmd_handle(const struct cfg *, const char *trigger,
    const char *conversation, const char *text, struct buf *reply_out,
    char **prompt_out);

#endif
