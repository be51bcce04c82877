/* The config loader: every rejection names file, line and column. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "tt.h"

static const char *base =
    "name: bot\n"
    "model:\n"
    "  provider: anthropic\n"
    "  name: claude\n";

static struct cfg_dirs dirs = { "/tmp/af-test-data", "/tmp/af-test-skills",
    "/tmp/af-test-secrets" };

static struct cfg *
load(const char *extra, char *err, size_t errlen)
{
	char *text = malloc(strlen(base) + strlen(extra) + 1);
	struct cfg *c;

	strcpy(text, base);
	strcat(text, extra);
	c = cfg_load_buf("agent.yaml", text, strlen(text), &dirs, err, errlen);
	free(text);
	return c;
}

/* One row: YAML appended to the base, and the error expected (NULL: valid). */
struct row {
	const char	*yaml;
	const char	*err;
};

static const struct row rows[] = {
	{ "", NULL },
	{ "foo: 1\n", "agent.yaml:5:1: unknown key \"foo\"" },
	{ "Model: x\n", "agent.yaml:5:1: unknown key \"Model\" (did you mean \"model\"?)" },
	{ "name: other\n", "agent.yaml:5:1: duplicate key \"name\" (first at line 1)" },
	{ "system: &s hi\n", "agent.yaml:5:9: YAML anchors are not allowed" },
	{ "system: !!str hi\n", "YAML tags are not allowed" },
	{ "permissions:\n  net: [\"ex ample.com\"]\n", "agent.yaml:6:9: permissions.net: \"ex ample.com\" is not a host name" },
	{ "permissions:\n  net: [\"evil.com/path\"]\n", "is not a host name" },
	{ "permissions:\n  net: [\"*.\"]\n", "is not a host name" },
	{ "permissions:\n  net: [\"a.*.com\"]\n", "is not a host name" },
	{ "permissions:\n  net: [\"API.GitHub.com.\", \"*.Example.com\", \"127.0.0.1\", \"::1\"]\n", NULL },
	{ "permissions:\n  read: [workspace]\n", "agent.yaml:6:10: permissions.read: \"workspace\" must be an absolute path" },
	{ "permissions:\n  write: [\"./out\"]\n", "must be an absolute path" },
	{ "permissions:\n  run: [/usr/bin/gh]\n", "must be a command name" },
	{ "permissions:\n  run: [\"gh; rm\"]\n", "must be a command name" },
	{ "permissions:\n  run: gh\n", "agent.yaml:6:8: permissions.run must be a list" },
	{ "permissions:\n  net: [{a: b}]\n", "each item must be a single value" },
	{ "permissions:\n  exec: [gh]\n", "unknown key \"permissions.exec\"" },
	{ "permissions:\n", NULL },
	{ "model2: {}\n", "unknown key" },
	{ "limits:\n  queue: many\n", "agent.yaml:6:10: limits.queue must be an integer" },
	{ "limits:\n  queue: \"10\"\n", "limits.queue must be an integer" },
	{ "limits:\n  concurrent_runs: 0\n", "must be between 1 and 100000" },
	{ "limits:\n  run_timeout: 10\n", "bad duration \"10\"" },
	{ "limits:\n  run_timeout: 10 s\n", "bad duration" },
	{ "limits:\n  run_timeout: -5s\n", "bad duration" },
	{ "limits:\n  run_timeout: 0s\n", "bad duration" },
	{ "limits:\n  run_timeout: 99999h\n", "bad duration" },
	{ "limits:\n  run_timeout: 500ms\n", NULL },
	{ "sandbox: strict\n", NULL },
	{ "sandbox: loose\n", "sandbox must be one of: default, strict" },
	{ "system: ${secret:key}\n", "agent.yaml:5:9: system cannot hold a secret reference" },
	{ "triggers:\n  webhook:\n    listen: 127.0.0.1:8080\n    prompt: \"${secret:k}\"\n", "triggers.webhook.prompt cannot hold a secret reference" },
	{ "env:\n  LD_PRELOAD: /tmp/x.so\n", "env.LD_PRELOAD cannot be set" },
	{ "env:\n  PATH: /tmp\n", "env.PATH cannot be set" },
	{ "env:\n  BASH_ENV: /tmp/x\n", "cannot be set" },
	{ "env:\n  \"A-B\": x\n", "is not a variable name" },
	{ "env:\n  GH_TOKEN: ${secret:gh}\n", NULL },
	{ "env:\n  GH_TOKEN: ${secret:../etc/passwd}\n", "bad secret name" },
	{ "env:\n  GH_TOKEN: ${secret:.hidden}\n", "bad secret name" },
	{ "env:\n  GH_TOKEN: ${secret:}\n", "malformed secret reference" },
	{ "model2:\n", "unknown key" },
	{ "triggers:\n  webhook:\n    path: /x\n", "missing required key \"triggers.webhook.listen\"" },
	{ "triggers:\n  webhook:\n    listen: 8080\n", "must be ADDRESS:PORT" },
	{ "triggers:\n  webhook:\n    listen: \":8080\"\n", "give the address too" },
	{ "triggers:\n  webhook:\n    listen: 0.0.0.0:70000\n", "must be ADDRESS:PORT" },
	{ "triggers:\n  webhook:\n    listen: \"[::1]:8080\"\n", NULL },
	{ "triggers:\n  webhook:\n    listen: 127.0.0.1:80\n    path: hooks\n", "path must start with /" },
	{ "triggers:\n  telegram:\n    token: t\n    api_base: http://api.telegram.org\n", "must use https or wss (plain http and ws only on loopback)" },
	{ "triggers:\n  telegram:\n    token: t\n    api_base: http://127.0.0.1:9/\n", NULL },
	{ "triggers:\n  telegram:\n    token: t\n    api_base: https://user@api.telegram.org\n", "must not contain user information" },
	{ "triggers:\n  telegram:\n    token: t\n    allowed_chats: [123456789012, -1001234567890]\n", NULL },
	{ "triggers:\n  telegram:\n    token: t\n    allowed_chats: [12abc]\n", "is not a numeric id" },
	{ "triggers:\n  discord:\n    token: t\n    gateway: ftp://gateway.discord.gg\n", "must use https or wss" },
	{ "triggers:\n  discord:\n    token: t\n    channels: [\"1234567890\"]\n    voice_channels: [\"1\"]\n", NULL },
	{ "triggers:\n  imap:\n    host: h\n    username: u\n    password: p\n    tls: none\n", "tls must be one of: implicit, starttls" },
	{ "triggers:\n  imap:\n    host: h\n    username: u\n    password: p\n    smtp: {host: s, port: 0}\n", "must be between 1 and 65535" },
	{ "tools:\n  mcp:\n    fs:\n      command: [node, s.js]\n      url: https://x/mcp\n", "needs exactly one of command (stdio) or url (HTTP)" },
	{ "tools:\n  mcp:\n    a__b:\n      url: https://x/mcp\n", "no \"__\"" },
	{ "tools:\n  mcp:\n    a_:\n      url: https://x/mcp\n", "no \"_\" at the end" },
	{ "tools:\n  mcp:\n    _a:\n      url: https://x/mcp\n", NULL },
	{ "tools:\n  mcp:\n    gh:\n      url: http://mcp.example.com/mcp\n", "must use https" },
	{ "tools:\n  mcp:\n    gh:\n      url: https://mcp.example.com/mcp\n      readonly: yes\n", "readonly must be true or false" },
	{ "tools:\n  mcp:\n    gh:\n      url: https://mcp.example.com/mcp\n      include: [a, b]\n      readonly: true\n", NULL },
	{ "audit:\n  path: /var/log/x\n", "audit.path must be relative" },
	{ "audit:\n  path: ../x\n", "without \"..\"" },
	{ "skills: [../etc]\n", "must be a folder name" },
	{ "---\n", "only one YAML document" },
	{ "status:\n  listen: 127.0.0.1:0\n", NULL },
	{ "status:\n  token: ${secret:st}\n", NULL },
	{ "limits:\n  max_cost: 0.5\n", "limits.max_cost needs model.pricing" },
	{ "limits:\n  max_cost: cheap\n", "limits.max_cost must be a number" },
	{ "memory: agent\nschedules: true\n", NULL },
	{ "memory: forever\n", "memory must be one of: none, conversation, agent" },
	{ "commands:\n  deploy: {prompt: \"Deploy $ARGS\", description: d}\n", NULL },
	{ "commands:\n  help: {prompt: x}\n", "/help is a built-in command" },
	{ "commands:\n  deploy: {description: d}\n", "missing required key \"commands.deploy.prompt\"" },
	{ "triggers:\n  cron:\n    - {schedule: \"*/15 * * * *\", prompt: tick}\n    - {schedule: \"0 9 * * 1-5\", prompt: standup, timezone: Europe/Berlin}\n", NULL },
	{ "triggers:\n  cron:\n    - {schedule: \"* * *\", prompt: x}\n", "is not five cron fields" },
	{ "triggers:\n  cron:\n    - {schedule: \"61 * * * *\", prompt: x}\n", "is not five cron fields" },
	{ "triggers:\n  cron:\n    - {schedule: \"*/0 * * * *\", prompt: x}\n", "is not five cron fields" },
	{ "triggers:\n  cron:\n    - {schedule: \"5-1 * * * *\", prompt: x}\n", "is not five cron fields" },
	{ "triggers:\n  cron:\n    - {schedule: \"1,,2 * * * *\", prompt: x}\n", "is not five cron fields" },
	{ "triggers:\n  cron:\n    - {schedule: \"1, * * * *\", prompt: x}\n", "is not five cron fields" },
	{ "triggers:\n  cron:\n    - {schedule: \"* * * * *\", prompt: x, timezone: ../../etc/passwd}\n", "is not a time zone name" },
	{ "triggers:\n  cron:\n    - {schedule: \"* * * * *\", prompt: x, when: now}\n", "unknown key \"triggers.cron.0.when\"" },
	{ "triggers:\n  github:\n    listen: 127.0.0.1:0\n", "missing required key \"triggers.github.secret\"" },
	{ "triggers:\n  github:\n    listen: 127.0.0.1:0\n    secret: ${secret:gh}\n    events: [pull_request.opened]\n    repos: [acme/*]\n", NULL },
	{ "triggers:\n  webhook: {listen: \"127.0.0.1:80\", reply: wait, token: \"${secret:t}\"}\n", NULL },
	{ "triggers:\n  webhook: {listen: \"127.0.0.1:80\", reply: sometimes}\n", "must be one of: async, wait" },
	{ "triggers:\n  webhook: {listen: \"127.0.0.1:80\"}\n  github: {listen: \"127.0.0.1:80\", secret: s}\n", "must use different ports" },
	{ NULL, NULL }
};

static void
test_rows(void)
{
	for (const struct row *r = rows; r->yaml != NULL; r++) {
		char err[1024] = "";
		struct cfg *c = load(r->yaml, err, sizeof(err));

		if (r->err == NULL && c == NULL)
			tt_fail_msg("valid config refused: %s\n%s", err, r->yaml);
		if (r->err != NULL && c != NULL)
			tt_fail_msg("invalid config accepted:\n%s", r->yaml);
		if (r->err != NULL && strstr(err, r->err) == NULL)
			tt_fail_msg("error \"%s\" lacks \"%s\"", err, r->err);
		cfg_free(c);
	}
end:;
}

static void
test_required(void)
{
	char err[512];
	struct cfg *c = cfg_load_buf("a.yaml", "name: x\n", 8, &dirs, err,
	    sizeof(err));

	tt_assert(c == NULL);
	tt_str_op(err, ==, "a.yaml:1:1: missing required key \"model\"");
	c = cfg_load_buf("a.yaml", "- a\n", 4, &dirs, err, sizeof(err));
	tt_assert(c == NULL);
	tt_str_op(err, ==, "a.yaml:1:1: the config must be a map of keys");
	c = cfg_load_buf("a.yaml", "", 0, &dirs, err, sizeof(err));
	tt_assert(c == NULL);
	tt_str_op(err, ==, "a.yaml: the config is empty");
	c = cfg_load_buf("a.yaml", "name: [x\n", 9, &dirs, err, sizeof(err));
	tt_assert(c == NULL);
	tt_assert(strncmp(err, "a.yaml:", 7) == 0);
end:;
}

static void
test_normalized(void)
{
	char err[512];
	struct cfg *c = load("permissions:\n  net: [\"API.GitHub.com.\"]\n"
	    "  read: [\"/a//b/./c/../d/\"]\n", err, sizeof(err));

	tt_assert(c != NULL);
	tt_str_op(c->perm.net.v[0], ==, "api.github.com");
	tt_str_op(c->perm.read.v[0], ==, "/a/b/d");
	tt_int_op(c->model.max_steps, ==, 25);
	tt_int_op(c->model.timeout_ms, ==, 120000);
	tt_str_op(c->model.base_url, ==, "https://api.anthropic.com");
	tt_str_op(c->status_listen.host, ==, "127.0.0.1");
	tt_int_op(c->status_listen.port, ==, 9090);
	tt_str_op(c->audit_path, ==, "/tmp/af-test-data/audit.jsonl");
	tt_int_op(c->limits.tool_output, ==, 8192);
end:
	cfg_free(c);
}

static void
test_too_big(void)
{
	size_t n = CFG_MAX_FILE + 1;
	char *big = malloc(n), err[256];
	struct cfg *c;

	memset(big, '#', n);
	c = cfg_load_buf("big.yaml", big, n, &dirs, err, sizeof(err));
	tt_assert(c == NULL);
	tt_str_op(err, ==, "big.yaml: the config is larger than 1 MiB");
end:
	free(big);
}

static void
test_alias_bomb(void)
{
	const char *y = "name: x\nmodel: {provider: anthropic, name: a}\n"
	    "a: &a [x, x]\nb: [*a, *a]\n";
	char err[256];
	struct cfg *c = cfg_load_buf("a.yaml", y, strlen(y), &dirs, err,
	    sizeof(err));

	tt_assert(c == NULL);
	tt_assert(strstr(err, "anchors are not allowed") != NULL);
end:;
}

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	fputs(text, f);
	fclose(f);
}

static void
test_secrets(void)
{
	char dir[] = "/tmp/af-secrets-XXXXXX", err[512], path[256];
	struct cfg_dirs d = { "/tmp/d", "/tmp/s", NULL };
	struct cfg *c = NULL;
	const char *y = "name: x\nmodel:\n  provider: anthropic\n  name: a\n"
	    "  api_key: ${secret:key}\nenv:\n  AUTH: \"Bearer ${secret:tok}\"\n";

	tt_assert(mkdtemp(dir) != NULL);
	d.secrets = dir;
	snprintf(path, sizeof(path), "%s/key", dir);
	write_file(path, "sk-very-secret\n");
	c = cfg_load_buf("a.yaml", y, strlen(y), &d, err, sizeof(err));
	tt_assert(c != NULL);
	tt_int_op(cfg_resolve_secrets(c, err, sizeof(err)), ==, -1);
	tt_assert(strstr(err, "secret \"tok\" cannot be read") != NULL);
	tt_assert(strstr(err, "a.yaml:7:9") != NULL);
	tt_assert(strstr(err, "sk-very-secret") == NULL);
	cfg_free(c);
	snprintf(path, sizeof(path), "%s/tok", dir);
	write_file(path, "t0k\r\n");
	c = cfg_load_buf("a.yaml", y, strlen(y), &d, err, sizeof(err));
	tt_assert(c != NULL);
	tt_int_op(cfg_resolve_secrets(c, err, sizeof(err)), ==, 0);
	tt_str_op(c->model.api_key, ==, "sk-very-secret");
	tt_str_op(c->env.v[0].value, ==, "Bearer t0k");
	tt_int_op(c->secret_values.n, ==, 2);
	write_file(path, "");
	cfg_free(c);
	c = cfg_load_buf("a.yaml", y, strlen(y), &d, err, sizeof(err));
	tt_int_op(cfg_resolve_secrets(c, err, sizeof(err)), ==, -1);
	tt_assert(strstr(err, "is empty") != NULL);
end:
	cfg_free(c);
	snprintf(path, sizeof(path), "%s/key", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/tok", dir);
	unlink(path);
	rmdir(dir);
}

/* A secret's value is data, never a template: one holding a reference
 * (its own, or another's) stays as it is, and start-up does not loop. */
static void
test_secret_values_are_not_expanded(void)
{
	char dir[] = "/tmp/af-secrets-XXXXXX", err[512], path[256];
	struct cfg_dirs d = { "/tmp/d", "/tmp/s", NULL };
	struct cfg *c = NULL;
	const char *y = "name: x\nmodel:\n  provider: anthropic\n  name: a\n"
	    "  api_key: ${secret:a}\nenv:\n  AUTH: \"${secret:a}:${secret:b}\"\n";

	tt_assert(mkdtemp(dir) != NULL);
	d.secrets = dir;
	snprintf(path, sizeof(path), "%s/a", dir);
	write_file(path, "x${secret:a}${secret:b}\n");
	snprintf(path, sizeof(path), "%s/b", dir);
	write_file(path, "bee\n");
	c = cfg_load_buf("a.yaml", y, strlen(y), &d, err, sizeof(err));
	tt_assert(c != NULL);
	tt_int_op(cfg_resolve_secrets(c, err, sizeof(err)), ==, 0);
	tt_str_op(c->model.api_key, ==, "x${secret:a}${secret:b}");
	tt_str_op(c->env.v[0].value, ==, "x${secret:a}${secret:b}:bee");
	tt_int_op(c->secret_values.n, ==, 2);
end:
	cfg_free(c);
	snprintf(path, sizeof(path), "%s/a", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/b", dir);
	unlink(path);
	rmdir(dir);
}

static void
test_fallbacks(void)
{
	char err[512];
	struct cfg *c = load("  pricing: {input: 3, output: 15}\n"
	    "  fallbacks:\n"
	    "    - {provider: openai, name: gpt, base_url: \"http://127.0.0.1:1/v1\","
	    " pricing: {input: 1.5, output: 2}}\n"
	    "    - {provider: anthropic, name: haiku, pricing: {input: 1, output: 5}}\n"
	    "limits: {max_cost: 0.25}\n", err, sizeof(err));

	tt_assert(c != NULL);
	tt_int_op(c->nfallbacks, ==, 2);
	tt_str_op(c->fallbacks[0].name, ==, "gpt");
	tt_int_op(c->fallbacks[0].provider, ==, PROVIDER_OPENAI);
	tt_assert(c->fallbacks[0].price_in == 1.5);
	tt_str_op(c->fallbacks[1].base_url, ==, "https://api.anthropic.com");
	tt_int_op(c->fallbacks[1].timeout_ms, ==, 120000);
	tt_assert(c->model.has_pricing && c->model.price_out == 15.0);
	tt_assert(c->limits.max_cost == 0.25);
	cfg_free(c);
	c = load("  fallbacks:\n    - {provider: openai, name: g, max_steps: 3}\n",
	    err, sizeof(err));
	tt_assert(c == NULL);
	tt_assert(strstr(err, "unknown key \"model.fallbacks.0.max_steps\"")
	    != NULL);
end:
	cfg_free(c);
}

static void
test_hermetic(void)
{
	char err[512];
	struct strlist why = { 0 };
	struct cfg *c = load("", err, sizeof(err));

	cfg_hermetic_reasons(c, &why);
	tt_int_op(why.n, ==, 0);
	cfg_free(c);
	c = load("permissions: {run: [gh]}\ntools:\n  mcp:\n    fs: {command: "
	    "[node, s.js]}\n    web: {url: \"https://x.example/mcp\"}\n"
	    "triggers:\n  discord: {token: t, voice_channels: [\"1\"]}\n", err,
	    sizeof(err));
	tt_assert(c != NULL);
	cfg_hermetic_reasons(c, &why);
	tt_int_op(why.n, ==, 3);
	tt_str_op(why.v[0], ==, "permissions.run grants gh");
	tt_str_op(why.v[1], ==, "tools.mcp.fs is a stdio server");
	tt_str_op(why.v[2], ==, "triggers.discord.voice_channels");
end:
	strlist_free(&why);
	cfg_free(c);
}

static void
test_schema(void)
{
	char *s = cfg_schema_json();

	tt_assert(strstr(s, "\"permissions\"") != NULL);
	tt_assert(strstr(s, "\"required\":[\"name\",\"model\"]") != NULL);
end:
	free(s);
}

static const struct tt_case cases[] = {
	{ "rows", test_rows },
	{ "required", test_required },
	{ "normalized", test_normalized },
	{ "too_big", test_too_big },
	{ "alias_bomb", test_alias_bomb },
	{ "secrets", test_secrets },
	{ "secret_values_are_not_expanded", test_secret_values_are_not_expanded },
	{ "hermetic", test_hermetic },
	{ "fallbacks", test_fallbacks },
	{ "schema", test_schema },
	{ NULL, NULL }
};

int
main(int argc, char **argv)
{
	return tt_main(argc, argv, cases);
}
