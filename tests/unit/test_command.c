/* Slash commands (engine/command.c): what is a command, whose it is (an
 * "@bot" suffix must name this bot), what each built-in answers, and how a
 * config command's prompt is made, with the arguments kept as data. /reset
 * runs against a real state database in /tmp. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "command.h"
#include "config.h"
#include "state.h"
#include "tt.h"
#include "util.h"

static const char *yaml =
    "name: cmd-bot\n"
    "model:\n"
    "  provider: anthropic\n"
    "  name: claude\n"
    "commands:\n"
    "  summary:\n"
    "    prompt: \"Summarize: $ARGS\"\n"
    "    description: sum it up\n"
    "  twice:\n"
    "    prompt: \"Q: $ARGS / again: $ARGS\"\n"
    "  plain:\n"
    "    prompt: no arguments here\n";

#define SELF	"my_bot"	/* the bot's own username, as getMe gives it */

static struct cfg_dirs dirs = { "/tmp/af-test-data", "/tmp/af-test-skills",
    "/tmp/af-test-secrets" };

static struct cfg *
load(void)
{
	char err[512];
	struct cfg *c = cfg_load_buf("agent.yaml", yaml, strlen(yaml), &dirs,
	    err, sizeof(err));

	if (c == NULL)
		fprintf(stderr, "  config: %s\n", err);
	return c;
}

/* One message and what must come of it. */
struct row {
	const char	*text;
	int		 kind;
	const char	*want;	/* substring of the reply, or the exact prompt */
};

static const struct row rows[] = {
	/* Not commands: run as they are. */
	{ "hello", CMD_NONE, NULL },
	{ "", CMD_NONE, NULL },
	{ " /help", CMD_NONE, NULL },
	{ "please /help", CMD_NONE, NULL },
	{ "/etc/hosts is odd", CMD_NONE, NULL },
	{ "//help", CMD_NONE, NULL },
	{ "/ help", CMD_NONE, NULL },
	{ "/", CMD_NONE, NULL },
	{ "/help@", CMD_NONE, NULL },
	{ "/help@bot!", CMD_NONE, NULL },
	{ "/help@my_bot!", CMD_NONE, NULL },
	{ "/help,now", CMD_NONE, NULL },
	{ "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	    CMD_NONE, NULL },
	/* Built-ins. */
	{ "/help", CMD_ANSWERED, "/summary - sum it up\n" },
	{ "/help", CMD_ANSWERED, "/twice\n" },
	{ "/help", CMD_ANSWERED, "/reset - " },
	{ "/help@my_bot", CMD_ANSWERED, "/status - " },
	{ "/help@My_Bot", CMD_ANSWERED, "/status - " },
	{ "/help@MY_BOT please", CMD_ANSWERED, "Commands:" },
	{ "/HELP", CMD_ANSWERED, "/new - " },
	{ "/help me please", CMD_ANSWERED, "Commands:" },
	{ "/status", CMD_ANSWERED, "cmd-bot (af " },
	{ "/status", CMD_ANSWERED, "in flight" },
	{ "/nope", CMD_ANSWERED, "Unknown command /nope." },
	{ "/nope@my_bot args", CMD_ANSWERED, "Unknown command /nope." },
	/* Config commands: $ARGS replaced once, arguments never expanded. */
	{ "/summary the text", CMD_EXPANDED, "Summarize: the text" },
	{ "/summary", CMD_EXPANDED, "Summarize: " },
	{ "/summary   spaced out  \n", CMD_EXPANDED, "Summarize: spaced out" },
	{ "/summary\tafter a tab", CMD_EXPANDED, "Summarize: after a tab" },
	{ "/summary\nline two", CMD_EXPANDED, "Summarize: line two" },
	{ "/summary@my_bot x", CMD_EXPANDED, "Summarize: x" },
	{ "/summary@MY_bot\tx", CMD_EXPANDED, "Summarize: x" },
	{ "/Summary x", CMD_EXPANDED, "Summarize: x" },
	{ "/summary $ARGS and /help", CMD_EXPANDED,
	    "Summarize: $ARGS and /help" },
	{ "/summary ${secret:model_key} {{body}}", CMD_EXPANDED,
	    "Summarize: ${secret:model_key} {{body}}" },
	{ "/twice a$ARGS", CMD_EXPANDED, "Q: a$ARGS / again: a$ARGS" },
	{ "/plain ignored", CMD_EXPANDED, "no arguments here" },
	/* Addressed to another bot: neither answered nor run, whatever the
	 * command, and names that only look like ours are another bot's. */
	{ "/help@bot", CMD_OTHER_BOT, NULL },
	{ "/reset@OtherBot", CMD_OTHER_BOT, NULL },
	{ "/new@OtherBot now", CMD_OTHER_BOT, NULL },
	{ "/status@other_bot", CMD_OTHER_BOT, NULL },
	{ "/summary@bot x", CMD_OTHER_BOT, NULL },
	{ "/nope@bot args", CMD_OTHER_BOT, NULL },
	{ "/help@my_bot_", CMD_OTHER_BOT, NULL },
	{ "/help@my_bo", CMD_OTHER_BOT, NULL },
	{ "/help@my_bot2", CMD_OTHER_BOT, NULL },
	{ "/help@xmy_bot", CMD_OTHER_BOT, NULL },
	{ "/summary@my_botmy_bot x", CMD_OTHER_BOT, NULL },
};

/* Without a name of its own (Discord) the trigger has no "@bot" suffixes:
 * one makes the text plain text, never a command. */
static const struct row rows_nameless[] = {
	{ "/help", CMD_ANSWERED, "Commands:" },
	{ "/summary x", CMD_EXPANDED, "Summarize: x" },
	{ "/help@my_bot", CMD_NONE, NULL },
	{ "/reset@OtherBot", CMD_NONE, NULL },
	{ "/summary@bot x", CMD_NONE, NULL },
	{ "/nope@bot", CMD_NONE, NULL },
};

static void
check_rows(const char *self, const struct row *v, size_t nv)
{
	struct cfg *cfg = load();
	struct buf out;
	char *prompt = NULL;
	size_t i = 0;
	int kind;

	buf_init(&out);
	tt_assert(cfg != NULL);
	for (i = 0; i < nv; i++) {
		buf_reset(&out);
		free(prompt);
		prompt = NULL;
		if (self != NULL)
			kind = cmd_handle_bot(cfg, "test", self, NULL, v[i].text,
			    &out, &prompt);
		else
			kind = cmd_handle(cfg, "test", NULL, v[i].text, &out,
			    &prompt);
		if (kind != v[i].kind)
			tt_fail_msg("\"%s\": %d, want %d", v[i].text, kind,
			    v[i].kind);
		if (kind == CMD_EXPANDED) {
			tt_assert(prompt != NULL && out.len == 0);
			tt_str_op(prompt, ==, v[i].want);
		} else if (kind == CMD_ANSWERED) {
			tt_assert(prompt == NULL && out.data != NULL);
			if (strstr(out.data, v[i].want) == NULL)
				tt_fail_msg("\"%s\": \"%s\" lacks \"%s\"",
				    v[i].text, out.data, v[i].want);
		} else
			tt_assert(prompt == NULL && out.len == 0);
	}
end:
	free(prompt);
	buf_free(&out);
	cfg_free(cfg);
}

static void
t_table(void)
{
	check_rows(SELF, rows, nitems(rows));
}

static void
t_nameless(void)
{
	check_rows(NULL, rows_nameless, nitems(rows_nameless));
}

/* An expansion past CMD_PROMPT_MAX is answered, not run. */
static void
t_too_long(void)
{
	struct cfg *cfg = load();
	struct buf out;
	char *text = NULL, *prompt = NULL;
	size_t n = CMD_PROMPT_MAX / 2 + 10;

	buf_init(&out);
	tt_assert(cfg != NULL);
	text = xmalloc(n + 8);
	memcpy(text, "/twice ", 7);
	memset(text + 7, 'x', n);
	text[7 + n] = '\0';
	tt_int_op(cmd_handle(cfg, "test", "c", text, &out, &prompt), ==,
	    CMD_ANSWERED);
	tt_assert(prompt == NULL);
	tt_assert(strstr(out.data, "too long") != NULL);
	/* One copy still fits. */
	buf_reset(&out);
	memcpy(text, "/summary", 8);
	text[8] = ' ';
	tt_int_op(cmd_handle(cfg, "test", "c", text, &out, &prompt), ==,
	    CMD_EXPANDED);
	tt_assert(prompt != NULL && strlen(prompt) < CMD_PROMPT_MAX);
end:
	free(prompt);
	free(text);
	buf_free(&out);
	cfg_free(cfg);
}

static void
t_reset(void)
{
	char dir[] = "/tmp/af-test-cmd-XXXXXX", err[256];
	struct cfg *cfg = load();
	cJSON *hist = NULL;
	struct buf out;
	char *prompt = NULL;
	int opened = 0;

	buf_init(&out);
	tt_assert(cfg != NULL);
	tt_assert(mkdtemp(dir) != NULL);
	tt_int_op(state_open(dir, err, sizeof(err)), ==, 0);
	opened = 1;
	tt_int_op(state_history_add("chat:1", "user", "hi"), ==, 0);
	tt_int_op(state_history_add("chat:1", "assistant", "hello"), ==, 0);
	tt_int_op(state_history_add("chat:2", "user", "other"), ==, 0);
	tt_int_op(state_history_add("chat:2", "assistant", "chat"), ==, 0);

	/* A /reset for another bot in the same group clears nothing. */
	tt_int_op(cmd_handle_bot(cfg, "test", SELF, "chat:1", "/reset@OtherBot",
	    &out, &prompt), ==, CMD_OTHER_BOT);
	tt_int_op(out.len, ==, 0);
	hist = cJSON_CreateArray();
	tt_int_op(state_history_get("chat:1", hist), ==, 0);
	tt_int_op(cJSON_GetArraySize(hist), ==, 2);
	cJSON_Delete(hist);
	hist = NULL;

	tt_int_op(cmd_handle_bot(cfg, "test", SELF, "chat:1", "/reset@MY_BOT",
	    &out, &prompt), ==, CMD_ANSWERED);
	tt_assert(strstr(out.data, "cleared") != NULL);
	hist = cJSON_CreateArray();
	tt_int_op(state_history_get("chat:1", hist), ==, 0);
	tt_int_op(cJSON_GetArraySize(hist), ==, 0);
	cJSON_Delete(hist);
	/* Another conversation keeps its history. */
	hist = cJSON_CreateArray();
	tt_int_op(state_history_get("chat:2", hist), ==, 0);
	tt_int_op(cJSON_GetArraySize(hist), ==, 2);
	cJSON_Delete(hist);
	hist = NULL;

	buf_reset(&out);
	tt_int_op(cmd_handle(cfg, "test", "chat:2", "/new", &out, &prompt),
	    ==, CMD_ANSWERED);
	hist = cJSON_CreateArray();
	tt_int_op(state_history_get("chat:2", hist), ==, 0);
	tt_int_op(cJSON_GetArraySize(hist), ==, 0);

	/* Without a conversation there is nothing to clear, and it says so. */
	buf_reset(&out);
	tt_int_op(cmd_handle(cfg, "test", NULL, "/reset", &out, &prompt), ==,
	    CMD_ANSWERED);
	tt_assert(strstr(out.data, "no conversation") != NULL);
end:
	cJSON_Delete(hist);
	if (opened)
		state_close();
	tt_rmtree(dir);
	buf_free(&out);
	cfg_free(cfg);
}

static const struct tt_case cases[] = {
	{ "table", t_table },
	{ "nameless", t_nameless },
	{ "too_long", t_too_long },
	{ "reset", t_reset },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	log_init(LOG_TEXT, 0);
	return tt_main(argc, argv, cases);
}
