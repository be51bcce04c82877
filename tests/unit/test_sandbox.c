/* The sandbox plan and its description per config, address pinning, and the
 * container check on temporary roots. Applying the sandbox is tested by
 * tests/helpers/sandbox_try and tests/integration/test_sandbox.py, since it
 * cannot be undone inside this process. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "sandbox.h"
#include "tt.h"
#include "util.h"

static char tmp[256];

static void
mktmp(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/af-test-sandbox-XXXXXX");
	if (mkdtemp(tmp) == NULL)
		abort();
}

static void
rmtree(const char *dir)
{
	char *cmd = xasprintf("rm -rf '%s'", dir);

	if (system(cmd) != 0)
		fprintf(stderr, "rm -rf %s failed\n", dir);
	free(cmd);
}

static void
put(const char *rel, const char *content)
{
	char p[512], *slash;
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", tmp, rel);
	for (slash = strchr(p + strlen(tmp) + 1, '/'); slash != NULL;
	    slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(p, 0700);
		*slash = '/';
	}
	if ((f = fopen(p, "w")) == NULL)
		abort();
	fputs(content, f);
	fclose(f);
}

#define HEAD "name: t\nmodel:\n  provider: anthropic\n  name: m\n"

/* Load YAML, plan it, describe it as text. Returns the description (owned by
 * the caller) or NULL, with the plan in *p (freed by the caller). */
static char *
plan_text(const char *yaml, struct sb_plan *p, struct cfg **cp)
{
	struct cfg_dirs dirs = { "/tmp/af-data", "/tmp/af-skills",
	    "/tmp/af-secrets" };
	struct buf b;
	char err[512];
	struct cfg *c;

	memset(p, 0, sizeof(*p));
	c = cfg_load_buf("/tmp/af-agent/agent.yaml", yaml, strlen(yaml), &dirs,
	    err, sizeof(err));
	if (c == NULL) {
		fprintf(stderr, "  config: %s\n", err);
		return NULL;
	}
	if (sandbox_plan(c, p, err, sizeof(err)) == -1) {
		fprintf(stderr, "  plan: %s\n", err);
		cfg_free(c);
		return NULL;
	}
	buf_init(&b);
	sandbox_describe(p, 0, &b);
	if (cp != NULL)
		*cp = c;
	else
		cfg_free(c);
	return buf_steal(&b);
}

/* A whole line of the description. */
static int
has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *s = text; s != NULL && *s != '\0';) {
		if (strncmp(s, line, n) == 0 && (s[n] == '\n' || s[n] == '\0'))
			return 1;
		s = strchr(s, '\n');
		if (s != NULL)
			s++;
	}
	return 0;
}

static int
has_prefix_line(const char *text, const char *prefix)
{
	size_t n = strlen(prefix);

	for (const char *s = text; s != NULL && *s != '\0';) {
		if (strncmp(s, prefix, n) == 0)
			return 1;
		s = strchr(s, '\n');
		if (s != NULL)
			s++;
	}
	return 0;
}

static void
test_hermetic(void)
{
	struct sb_plan p;
	char *t = plan_text(HEAD "permissions:\n  read: [/srv/in]\n"
	    "  write: [/srv/out]\n", &p, NULL);

	tt_assert(t != NULL);
	tt_int_op(p.hermetic, ==, 1);
	tt_int_op(p.subprocesses, ==, 0);
	tt_assert(has_line(t, "hermetic: yes"));
	tt_assert(!has_prefix_line(t, "not hermetic"));
	tt_assert(has_line(t, "landlock execute (none)"));
	tt_assert(!has_prefix_line(t, "landlock execute /"));
	tt_assert(!has_prefix_line(t, "landlock subprocess"));
	tt_assert(has_line(t, "landlock read /srv/in"));
	tt_assert(has_line(t, "landlock write /srv/out"));
	tt_assert(!has_line(t, "landlock read /srv/out"));
	tt_assert(has_line(t, "landlock read /tmp/af-agent"));
	tt_assert(has_line(t, "landlock read /tmp/af-secrets"));
	tt_assert(has_line(t, "landlock read /tmp/af-skills"));
	tt_assert(has_line(t, "landlock read /tmp/af-data"));
	tt_assert(has_line(t, "landlock write /tmp/af-data"));
	tt_assert(!has_line(t, "landlock write /tmp/af-secrets"));
	tt_assert(has_line(t, "landlock read /etc/ssl"));
	tt_assert(has_line(t, "landlock read /etc/resolv.conf"));
	tt_assert(has_line(t, "landlock write /dev/null"));
	/* What bash needs is not there without subprocesses. */
	tt_assert(!has_line(t, "landlock read /etc/passwd"));
	tt_assert(has_line(t, "seccomp deny execve EPERM"));
	tt_assert(has_line(t, "seccomp deny execveat EPERM"));
	tt_assert(has_line(t, "seccomp deny fork EPERM"));
	tt_assert(has_line(t, "seccomp deny vfork EPERM"));
	tt_assert(has_line(t, "seccomp deny clone without CLONE_THREAD EPERM"));
	tt_assert(has_line(t, "seccomp deny clone3 ENOSYS"));
	tt_assert(has_line(t, "seccomp deny ptrace EPERM"));
	tt_assert(has_line(t, "seccomp deny io_uring_setup EPERM"));
	tt_assert(has_line(t, "seccomp socket deny other families "
	    "EAFNOSUPPORT"));
	/* The default model URL and the default status listener. */
	tt_assert(has_line(t, "landlock net connect tcp 443"));
	tt_assert(has_line(t, "landlock net connect tcp 53"));
	tt_assert(!has_line(t, "landlock net connect tcp 80"));
	tt_assert(has_line(t, "landlock net bind tcp 9090"));
	tt_assert(has_line(t, "hosts allow api.anthropic.com"));
end:
	free(t);
	sandbox_plan_free(&p);
}

/* Never the secret-bearing or foreign parts of the system. */
static void
test_never(void)
{
	static const char *const configs[] = {
		HEAD,
		HEAD "permissions:\n  run: [grep, cat]\n",
		HEAD "tools:\n  mcp:\n    fs:\n      command: [cat, x]\n",
	};
	static const char *const never[] = { "/etc/shadow", "/root", "/home",
	    "/proc", "/sys", "/etc", "/usr", "/usr/bin", "/bin", "/tmp", "/" };
	struct sb_plan p;
	char *t = NULL;

	memset(&p, 0, sizeof(p));
	for (size_t i = 0; i < nitems(configs); i++) {
		t = plan_text(configs[i], &p, NULL);
		tt_assert(t != NULL);
		for (size_t r = 0; r < p.nrules; r++) {
			for (size_t k = 0; k < nitems(never); k++)
				if (strcmp(p.rules[r].path, never[k]) == 0)
					tt_fail_msg("config %zu: rule on %s", i,
					    never[k]);
			if (strncmp(p.rules[r].path, "/proc/", 6) == 0 ||
			    strncmp(p.rules[r].path, "/home/", 6) == 0 ||
			    strncmp(p.rules[r].path, "/root/", 6) == 0)
				tt_fail_msg("rule on %s", p.rules[r].path);
		}
		free(t);
		t = NULL;
		sandbox_plan_free(&p);
	}
end:
	free(t);
	sandbox_plan_free(&p);
}

static void
test_run_grants(void)
{
	struct sb_plan p;
	char *t = plan_text(HEAD "permissions:\n  run: [grep, "
	    "no-such-tool-xyz]\n  read: [/srv/in]\n  write: [/srv/out]\n",
	    &p, NULL);

	tt_assert(t != NULL);
	tt_int_op(p.hermetic, ==, 0);
	tt_int_op(p.subprocesses, ==, 1);
	tt_assert(has_line(t, "hermetic: no"));
	tt_assert(has_line(t, "not hermetic: permissions.run grants grep"));
	tt_assert(has_line(t, "landlock execute /usr/bin/grep"));
	tt_assert(has_line(t, "landlock execute /usr/bin/bash"));
	tt_assert(has_line(t, "landlock subprocess execute /usr/bin/grep"));
	/* The dynamic loader is opened for execution by the kernel. */
	tt_assert(has_prefix_line(t, "landlock execute /usr/lib/"));
	tt_assert(!has_line(t, "landlock execute /usr/bin/id"));
	tt_assert(!has_line(t, "landlock execute /usr/bin"));
	tt_assert(has_line(t, "landlock execute not found: permissions.run "
	    "no-such-tool-xyz (looked in /usr/local/bin:/usr/bin:/bin)"));
	tt_assert(!has_line(t, "landlock execute (none)"));
	tt_assert(has_line(t, "landlock read /etc/passwd"));
	/* Subprocesses keep the grants but not af's own folders. */
	tt_assert(has_line(t, "landlock subprocess read /srv/in"));
	tt_assert(has_line(t, "landlock subprocess write /srv/out"));
	/* Only a stdio MCP server starts from the agent folder. */
	tt_assert(!has_line(t, "landlock subprocess read /tmp/af-agent"));
	tt_assert(!has_line(t, "landlock subprocess read /tmp/af-secrets"));
	tt_assert(!has_line(t, "landlock subprocess read /tmp/af-data"));
	tt_assert(!has_line(t, "landlock subprocess write /tmp/af-data"));
	tt_assert(!has_line(t, "landlock subprocess read /tmp/af-skills"));
	tt_assert(has_line(t, "landlock subprocess net bind (none)"));
	/* Starting processes is allowed, the rest of the deny-list stays. */
	tt_assert(!has_line(t, "seccomp deny execve EPERM"));
	tt_assert(!has_prefix_line(t, "seccomp deny clone without"));
	/* No namespaces, hermetic or not. */
	tt_assert(has_line(t, "seccomp deny clone3 ENOSYS"));
	tt_assert(has_line(t, "seccomp deny clone with CLONE_NEW* EPERM"));
	tt_assert(has_line(t, "seccomp deny ptrace EPERM"));
	tt_assert(has_line(t, "seccomp deny unshare EPERM"));
end:
	free(t);
	sandbox_plan_free(&p);
}

static void
test_mcp_stdio(void)
{
	struct sb_plan p;
	char *t = plan_text(HEAD "tools:\n  mcp:\n    fs:\n      command: "
	    "[cat, server.js]\n    web:\n      url: https://mcp.example.com:"
	    "8443/mcp\n", &p, NULL);

	tt_assert(t != NULL);
	tt_int_op(p.hermetic, ==, 0);
	tt_assert(has_line(t, "not hermetic: tools.mcp.fs is a stdio server"));
	tt_assert(has_line(t, "landlock execute /usr/bin/cat"));
	tt_assert(has_line(t, "landlock execute /usr/bin/bash"));
	tt_assert(has_line(t, "landlock net connect tcp 8443"));
	tt_assert(has_line(t, "hosts allow mcp.example.com"));
	tt_assert(!has_line(t, "seccomp deny execve EPERM"));
	tt_assert(has_line(t, "landlock subprocess read /tmp/af-agent"));
end:
	free(t);
	sandbox_plan_free(&p);
}

/* Voice channels make the agent not hermetic, but start nothing: nothing
 * becomes executable. */
static void
test_discord_voice(void)
{
	struct sb_plan p;
	char *t = plan_text(HEAD "triggers:\n  discord:\n    token: x\n"
	    "    voice_channels: [\"123\"]\n", &p, NULL);

	tt_assert(t != NULL);
	tt_int_op(p.hermetic, ==, 0);
	tt_int_op(p.subprocesses, ==, 0);
	tt_assert(has_line(t, "not hermetic: triggers.discord.voice_channels"));
	tt_assert(has_line(t, "landlock execute (none)"));
	tt_assert(!has_line(t, "seccomp deny execve EPERM"));
	tt_assert(has_line(t, "hosts allow discord.com"));
	tt_assert(has_line(t, "hosts allow gateway.discord.gg"));
end:
	free(t);
	sandbox_plan_free(&p);
}

/* The same trigger without voice channels is hermetic. */
static void
test_discord_no_voice(void)
{
	struct sb_plan p;
	char *t = plan_text(HEAD "triggers:\n  discord:\n    token: x\n", &p,
	    NULL);

	tt_assert(t != NULL);
	tt_int_op(p.hermetic, ==, 1);
	tt_assert(has_line(t, "seccomp deny execve EPERM"));
end:
	free(t);
	sandbox_plan_free(&p);
}

static void
test_ports(void)
{
	struct sb_plan p;
	char *t = plan_text(HEAD
	    "  base_url: http://127.0.0.1:8081/v1\n"
	    "permissions:\n  net: [api.github.com, \"*.example.com\"]\n"
	    "triggers:\n"
	    "  webhook:\n    listen: 0.0.0.0:8080\n"
	    "  telegram:\n    token: x\n    api_base: http://localhost:8082\n"
	    "  imap:\n    host: imap.example.com\n    username: u\n"
	    "    password: p\n"
	    "    smtp: { host: smtp.example.com, username: u, password: p }\n"
	    "status:\n  listen: 127.0.0.1:9191\n", &p, NULL);

	tt_assert(t != NULL);
	tt_assert(has_line(t, "landlock net connect tcp 8081"));
	tt_assert(has_line(t, "landlock net connect tcp 8082"));
	tt_assert(has_line(t, "landlock net connect tcp 993"));
	tt_assert(has_line(t, "landlock net connect tcp 465"));
	tt_assert(has_line(t, "landlock net connect tcp 80"));
	tt_assert(has_line(t, "landlock net connect tcp 443"));
	tt_assert(has_line(t, "landlock net connect tcp 53"));
	tt_assert(has_line(t, "landlock net bind tcp 8080"));
	tt_assert(has_line(t, "landlock net bind tcp 9191"));
	tt_assert(!has_line(t, "landlock net bind tcp 9090"));
	tt_int_op(p.nconnect, ==, 7);
	tt_int_op(p.nbind, ==, 2);
	for (size_t i = 1; i < p.nconnect; i++)
		tt_int_op(p.connect[i - 1], <, p.connect[i]);
	tt_assert(has_line(t, "hosts allow imap.example.com"));
	tt_assert(has_line(t, "hosts allow smtp.example.com"));
	tt_assert(has_line(t, "hosts allow api.github.com"));
	tt_assert(has_line(t, "hosts allow localhost"));
	tt_assert(has_prefix_line(t, "hosts unpinned *.example.com"));
	tt_int_op(p.unpinnable.n, ==, 1);
end:
	free(t);
	sandbox_plan_free(&p);
}

/* Only loopback and addresses: no resolver over TCP. */
static void
test_no_dns_port(void)
{
	struct sb_plan p;
	char *t = plan_text(HEAD "  base_url: http://127.0.0.1:5555\n", &p,
	    NULL);

	tt_assert(t != NULL);
	tt_assert(!has_line(t, "landlock net connect tcp 53"));
	tt_assert(!has_line(t, "landlock net connect tcp 443"));
	tt_assert(has_line(t, "landlock net connect tcp 5555"));
	tt_int_op(p.nconnect, ==, 1);
end:
	free(t);
	sandbox_plan_free(&p);
}

static void
test_sorted_and_json(void)
{
	struct sb_plan p;
	struct buf b;
	cJSON *j = NULL, *ll, *net, *ports, *sc, *deny, *item;
	char *t = plan_text(HEAD "permissions:\n  run: [grep]\n", &p, NULL);
	int found = 0;

	buf_init(&b);
	tt_assert(t != NULL);
	/* Text: sorted, one item per line. */
	for (char *s = t, *n; (n = strchr(s, '\n')) != NULL && n[1] != '\0';
	    s = n + 1) {
		char *e = strchr(n + 1, '\n');
		size_t l1 = (size_t)(n - s), l2 = e ? (size_t)(e - n - 1) :
		    strlen(n + 1);
		int c = strncmp(s, n + 1, l1 < l2 ? l1 : l2);

		tt_assert(c < 0 || (c == 0 && l1 < l2));
	}
	tt_int_op(sandbox_describe(&p, 1, &b), ==, 0);
	j = cJSON_Parse(b.data);
	tt_assert(j != NULL);
	tt_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j,
	    "hermetic")));
	item = cJSON_GetObjectItemCaseSensitive(j, "not_hermetic");
	tt_int_op(cJSON_GetArraySize(item), ==, 1);
	tt_str_op(cJSON_GetArrayItem(item, 0)->valuestring, ==,
	    "permissions.run grants grep");
	ll = cJSON_GetObjectItemCaseSensitive(j, "landlock");
	net = cJSON_GetObjectItemCaseSensitive(ll, "net");
	ports = cJSON_GetObjectItemCaseSensitive(net, "connect_tcp");
	tt_assert(cJSON_IsArray(ports));
	cJSON_ArrayForEach(item, ports)
		if (item->valueint == 443)
			found = 1;
	tt_int_op(found, ==, 1);
	tt_assert(cJSON_GetObjectItemCaseSensitive(ll, "subprocess") != NULL);
	item = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(
	    ll, "af"), "execute");
	tt_assert(cJSON_GetArraySize(item) >= 2);
	sc = cJSON_GetObjectItemCaseSensitive(j, "seccomp");
	deny = cJSON_GetObjectItemCaseSensitive(sc, "deny_eperm");
	found = 0;
	cJSON_ArrayForEach(item, deny) {
		if (strcmp(item->valuestring, "ptrace") == 0)
			found |= 1;
		if (strcmp(item->valuestring, "execve") == 0)
			found |= 2;
	}
	tt_int_op(found, ==, 1);
end:
	cJSON_Delete(j);
	buf_free(&b);
	free(t);
	sandbox_plan_free(&p);
}

static void
test_root_folder_refused(void)
{
	struct cfg_dirs dirs = { "/", "/tmp/af-skills", "/tmp/af-secrets" };
	struct sb_plan p;
	char err[512];
	struct cfg *c;
	const char *y = HEAD;

	memset(&p, 0, sizeof(p));
	c = cfg_load_buf("/tmp/af-agent/agent.yaml", y, strlen(y), &dirs, err,
	    sizeof(err));
	tt_assert(c != NULL);
	tt_int_op(sandbox_plan(c, &p, err, sizeof(err)), ==, -1);
	tt_assert(strstr(err, "data folder is /") != NULL);
end:
	sandbox_plan_free(&p);
	cfg_free(c);
}

/* A script's interpreter and the loader of an ELF program are executable
 * too; a script through env gets the program env names. */
static void
test_interpreters(void)
{
	struct sb_plan p;
	struct cfg *c = NULL;
	char yaml[1024], *t = NULL;

	mktmp();
	put("bin/tool.sh", "#!/bin/sh\necho hi\n");
	put("bin/tool2", "#!/usr/bin/env bash\necho hi\n");
	snprintf(yaml, sizeof(yaml), HEAD "tools:\n  mcp:\n    a:\n"
	    "      command: [%s/bin/tool.sh]\n    b:\n      command: "
	    "[%s/bin/tool2]\n", tmp, tmp);
	{
		char p1[512], p2[512];

		snprintf(p1, sizeof(p1), "%s/bin/tool.sh", tmp);
		snprintf(p2, sizeof(p2), "%s/bin/tool2", tmp);
		tt_int_op(chmod(p1, 0755), ==, 0);
		tt_int_op(chmod(p2, 0755), ==, 0);
	}
	t = plan_text(yaml, &p, &c);
	tt_assert(t != NULL);
	{
		char l[4200];
		char sh[4096];

		snprintf(l, sizeof(l), "landlock execute %s/bin/tool.sh", tmp);
		tt_assert(has_line(t, l));
		tt_assert(realpath("/bin/sh", sh) != NULL);
		snprintf(l, sizeof(l), "landlock execute %s", sh);
		tt_assert(has_line(t, l));
		tt_assert(has_line(t, "landlock execute /usr/bin/env"));
		tt_assert(has_line(t, "landlock execute /usr/bin/bash"));
	}
end:
	free(t);
	sandbox_plan_free(&p);
	cfg_free(c);
	rmtree(tmp);
}

/* What the kernel cannot hold: refused under strict, a warning otherwise. */
static void
test_check_kernel(void)
{
	struct sb_plan p;
	char err[256], *t = plan_text(HEAD, &p, NULL);

	tt_assert(t != NULL);
	p.strict = 1;
	tt_int_op(sandbox_check_kernel(&p, 7, err, sizeof(err)), ==, 0);
	tt_int_op(sandbox_check_kernel(&p, 4, err, sizeof(err)), ==, 0);
	tt_int_op(sandbox_check_kernel(&p, 3, err, sizeof(err)), ==, -1);
	tt_assert(strstr(err, "TCP") != NULL);
	tt_assert(strstr(err, "strict") != NULL);
	tt_int_op(sandbox_check_kernel(&p, 2, err, sizeof(err)), ==, -1);
	tt_assert(strstr(err, "truncate") != NULL);
	tt_int_op(sandbox_check_kernel(&p, 0, err, sizeof(err)), ==, -1);
	tt_assert(strstr(err, "no Landlock") != NULL);
	p.strict = 0;
	tt_int_op(sandbox_check_kernel(&p, 0, err, sizeof(err)), ==, 0);
	tt_int_op(sandbox_check_kernel(&p, 3, err, sizeof(err)), ==, 0);
end:
	free(t);
	sandbox_plan_free(&p);
}

static void
test_strict_from_config(void)
{
	struct sb_plan p;
	char *t = plan_text(HEAD "sandbox: strict\n", &p, NULL);

	tt_assert(t != NULL);
	tt_int_op(p.strict, ==, 1);
	tt_assert(has_line(t, "sandbox: strict"));
end:
	free(t);
	sandbox_plan_free(&p);
}

static void
test_pin(void)
{
	struct strlist h = { NULL, 0 };
	struct sockaddr_in s4;
	struct sockaddr_in6 s6;
	char err[256];

	sandbox_pin_clear();
	memset(&s4, 0, sizeof(s4));
	s4.sin_family = AF_INET;
	inet_pton(AF_INET, "127.0.0.1", &s4.sin_addr);
	memset(&s6, 0, sizeof(s6));
	s6.sin6_family = AF_INET6;
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &s6.sin6_addr);
	/* Nothing pinned: nothing allowed. */
	tt_int_op(sandbox_addr_allowed((struct sockaddr *)&s4, sizeof(s4)), ==,
	    0);

	strlist_add(&h, "127.0.0.1");
	strlist_add(&h, "2001:db8::1");
	strlist_add(&h, "*.example.com");
	tt_int_op(sandbox_pin_hosts(&h, err, sizeof(err)), ==, 0);
	tt_int_op(sandbox_pin_unpinnable(), ==, 1);
	tt_int_op(sandbox_addr_allowed((struct sockaddr *)&s4, sizeof(s4)), ==,
	    1);
	/* The same address, IPv4-mapped. */
	tt_int_op(sandbox_addr_allowed((struct sockaddr *)&s6, sizeof(s6)), ==,
	    1);
	inet_pton(AF_INET6, "2001:db8::1", &s6.sin6_addr);
	tt_int_op(sandbox_addr_allowed((struct sockaddr *)&s6, sizeof(s6)), ==,
	    1);
	inet_pton(AF_INET6, "2001:db8::2", &s6.sin6_addr);
	tt_int_op(sandbox_addr_allowed((struct sockaddr *)&s6, sizeof(s6)), ==,
	    0);
	inet_pton(AF_INET, "127.0.0.2", &s4.sin_addr);
	tt_int_op(sandbox_addr_allowed((struct sockaddr *)&s4, sizeof(s4)), ==,
	    0);
	/* Short lengths and other families are refused. */
	inet_pton(AF_INET, "127.0.0.1", &s4.sin_addr);
	tt_int_op(sandbox_addr_allowed((struct sockaddr *)&s4, 4), ==, 0);
	s4.sin_family = AF_UNIX;
	tt_int_op(sandbox_addr_allowed((struct sockaddr *)&s4, sizeof(s4)), ==,
	    0);
	tt_int_op(sandbox_addr_allowed(NULL, 0), ==, 0);
	s4.sin_family = AF_INET;

	/* A name from /etc/hosts; a name that does not resolve is an error
	 * that names it, and the rest stays pinned. */
	strlist_free(&h);
	strlist_add(&h, "localhost");
	strlist_add(&h, "no-such-host.invalid");
	sandbox_pin_clear();
	tt_int_op(sandbox_pin_hosts(&h, err, sizeof(err)), ==, -1);
	tt_assert(strstr(err, "no-such-host.invalid") != NULL);
	tt_int_op(sandbox_addr_allowed((struct sockaddr *)&s4, sizeof(s4)), ==,
	    1);
end:
	strlist_free(&h);
	sandbox_pin_clear();
}

static int
detect(const char *env, char *found, size_t fl, char *looked, size_t ll)
{
	return container_detect_env(tmp, env, found, fl, looked, ll);
}

static void
test_container(void)
{
	char found[256], looked[512];

	mktmp();
	/* An ordinary host: systemd as PID 1, a plain cgroup. */
	put("proc/1/comm", "systemd\n");
	put("proc/1/cgroup", "0::/init.scope\n");
	put("proc/1/sched", "systemd (1, #threads: 1)\n");
	tt_int_op(detect(NULL, found, sizeof(found), looked, sizeof(looked)),
	    ==, 0);
	tt_assert(strstr(looked, "/.dockerenv") != NULL);
	tt_assert(strstr(looked, "/run/.containerenv") != NULL);
	tt_assert(strstr(looked, "/proc/1/cgroup") != NULL);
	tt_assert(strstr(looked, "/proc/1/comm") != NULL);
	tt_assert(strstr(looked, "/proc/1/sched") != NULL);
	tt_assert(strstr(looked, "/run/systemd/container") != NULL);
	tt_assert(strstr(looked, "container environment variable") != NULL);
	tt_int_op(detect("", found, sizeof(found), looked, sizeof(looked)), ==,
	    0);

	tt_int_op(detect("podman", found, sizeof(found), looked,
	    sizeof(looked)), ==, 1);
	tt_str_op(found, ==, "container=podman");

	put("proc/1/comm", "tini\n");
	tt_int_op(detect(NULL, found, sizeof(found), looked, sizeof(looked)),
	    ==, 1);
	tt_assert(strstr(found, "tini") != NULL);
	put("proc/1/comm", "systemd\n");

	put("proc/1/sched", "bash (4242, #threads: 1)\n");
	tt_int_op(detect(NULL, found, sizeof(found), looked, sizeof(looked)),
	    ==, 1);
	tt_assert(strstr(found, "4242") != NULL);
	put("proc/1/sched", "systemd (1, #threads: 1)\n");

	put("proc/1/cgroup", "0::/kubepods/besteffort/pod1\n");
	tt_int_op(detect(NULL, found, sizeof(found), looked, sizeof(looked)),
	    ==, 1);
	tt_assert(strstr(found, "kubepods") != NULL);
	put("proc/1/cgroup", "12:pids:/docker/abc\n");
	tt_int_op(detect(NULL, found, sizeof(found), looked, sizeof(looked)),
	    ==, 1);
	tt_assert(strstr(found, "docker") != NULL);
	put("proc/1/cgroup", "0::/init.scope\n");

	put("run/systemd/container", "lxc\n");
	tt_int_op(detect(NULL, found, sizeof(found), looked, sizeof(looked)),
	    ==, 1);
	tt_str_op(found, ==, "/run/systemd/container says lxc");

	put("run/.containerenv", "");
	tt_int_op(detect(NULL, found, sizeof(found), looked, sizeof(looked)),
	    ==, 1);
	tt_str_op(found, ==, "/run/.containerenv exists");

	put(".dockerenv", "");
	tt_int_op(detect(NULL, found, sizeof(found), looked, sizeof(looked)),
	    ==, 1);
	tt_str_op(found, ==, "/.dockerenv exists");

	/* A small buffer for looked is truncated, not overrun. */
	rmtree(tmp);
	mktmp();
	tt_int_op(detect(NULL, found, sizeof(found), looked, 20), ==, 0);
	tt_assert(strlen(looked) < 20);
end:
	rmtree(tmp);
}

int
main(int argc, char **argv)
{
	static const struct tt_case cases[] = {
		{ "hermetic", test_hermetic },
		{ "never", test_never },
		{ "run_grants", test_run_grants },
		{ "mcp_stdio", test_mcp_stdio },
		{ "discord_voice", test_discord_voice },
		{ "discord_no_voice", test_discord_no_voice },
		{ "ports", test_ports },
		{ "no_dns_port", test_no_dns_port },
		{ "sorted_and_json", test_sorted_and_json },
		{ "root_folder_refused", test_root_folder_refused },
		{ "interpreters", test_interpreters },
		{ "check_kernel", test_check_kernel },
		{ "strict_from_config", test_strict_from_config },
		{ "pin", test_pin },
		{ "container", test_container },
		{ NULL, NULL },
	};

	log_init(LOG_TEXT, 0);
	return tt_main(argc, argv, cases);
}
