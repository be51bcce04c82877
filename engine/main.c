/* The af command line (SPEC section 1). */
#include <curl/curl.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <event2/event.h>
#include <libwebsockets.h>
#include <seccomp.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config.h"
#include "daemon.h"
#include "init.h"
#include "perm.h"
#include "sandbox.h"
#include "util.h"

#define EXIT_OK		0
#define EXIT_RUNTIME	1
#define EXIT_CONFIG	2
#define EXIT_DENIED	3

static void
usage(void)
{
	fprintf(stderr,
	    "usage: af run AGENT.yaml [--data DIR] [--skills DIR] "
	    "[--secrets DIR] [--log-format text|json] [-v]\n"
	    "       af validate AGENT.yaml\n"
	    "       af flags AGENT.yaml [--json]\n"
	    "       af check AGENT.yaml net|run|read|write VALUE\n"
	    "       af init NAME [--trigger webhook|telegram|discord|imap|cron] "
	    "[--provider anthropic|openai]\n"
	    "       af schema\n"
	    "       af version\n");
}

/* Options shared by the commands that take a config. */
struct opts {
	const char	*config;
	struct cfg_dirs	 dirs;
	int		 json;
	int		 verbose;
	enum log_format	 log_format;
	const char	*rest[4];
	int		 nrest;
};

static int
parse_opts(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof(*o));
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		const char **slot = NULL;

		if (strcmp(a, "--data") == 0)
			slot = &o->dirs.data;
		else if (strcmp(a, "--skills") == 0)
			slot = &o->dirs.skills;
		else if (strcmp(a, "--secrets") == 0)
			slot = &o->dirs.secrets;
		else if (strcmp(a, "--json") == 0) {
			o->json = 1;
			continue;
		} else if (strcmp(a, "-v") == 0) {
			o->verbose = 1;
			continue;
		} else if (strcmp(a, "--log-format") == 0) {
			if (i + 1 >= argc)
				return -1;
			a = argv[++i];
			if (strcmp(a, "json") == 0)
				o->log_format = LOG_JSON;
			else if (strcmp(a, "text") != 0)
				return -1;
			continue;
		} else if (a[0] == '-' && a[1] == '-') {
			fprintf(stderr, "af: unknown option %s\n", a);
			return -1;
		} else if (o->config == NULL) {
			o->config = a;
			continue;
		} else if (o->nrest < (int)nitems(o->rest)) {
			o->rest[o->nrest++] = a;
			continue;
		} else
			return -1;
		if (i + 1 >= argc)
			return -1;
		*slot = argv[++i];
	}
	return o->config == NULL ? -1 : 0;
}

static struct cfg *
load(const struct opts *o)
{
	char err[1024];
	struct cfg *c = cfg_load(o->config, &o->dirs, err, sizeof(err));

	if (c == NULL)
		fprintf(stderr, "af: %s\n", err);
	return c;
}

static int
cmd_validate(struct opts *o)
{
	struct cfg *c = load(o);
	struct strlist why = { 0 };

	if (c == NULL)
		return EXIT_CONFIG;
	printf("ok\n");
	cfg_hermetic_reasons(c, &why);
	for (size_t i = 0; i < why.n; i++)
		printf("not hermetic: %s\n", why.v[i]);
	strlist_free(&why);
	cfg_free(c);
	return EXIT_OK;
}

static int
cmd_check(struct opts *o)
{
	struct perm_result res;
	enum perm_axis axis;
	struct cfg *c;

	if (o->nrest != 2 || perm_axis_parse(o->rest[0], &axis) == -1) {
		usage();
		return EXIT_CONFIG;
	}
	if ((c = load(o)) == NULL)
		return EXIT_CONFIG;
	perm_check(&c->perm, axis, o->rest[1], &res);
	if (res.allowed)
		printf("allowed\n");
	else
		printf("denied: %s\n", res.reason);
	cfg_free(c);
	return res.allowed ? EXIT_OK : EXIT_DENIED;
}

static int
cmd_flags(struct opts *o)
{
	struct sb_plan plan;
	struct cfg *c = load(o);
	struct buf out;
	char err[512];
	int rc = EXIT_OK;

	if (c == NULL)
		return EXIT_CONFIG;
	memset(&plan, 0, sizeof(plan));
	buf_init(&out);
	if (sandbox_plan(c, &plan, err, sizeof(err)) == -1 ||
	    sandbox_describe(&plan, o->json, &out) == -1) {
		fprintf(stderr, "af: %s\n", err);
		rc = EXIT_CONFIG;
	} else
		fputs(out.data ? out.data : "", stdout);
	buf_free(&out);
	sandbox_plan_free(&plan);
	cfg_free(c);
	return rc;
}

static int
cmd_run(struct opts *o)
{
	struct cfg *c = load(o);
	int rc;

	if (c == NULL)
		return EXIT_CONFIG;
	rc = daemon_run(c);
	cfg_free(c);
	return rc;
}

static int
cmd_version(void)
{
	curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
	const struct scmp_version *sv = seccomp_version();

	printf("af %s\n", AF_VERSION);
	printf("libevent %s\n", event_get_version());
	printf("libcurl %s (%s)\n", cv->version, cv->ssl_version ?
	    cv->ssl_version : "no TLS");
	printf("libyaml %s\n", yaml_get_version_string());
	printf("cJSON %s\n", cJSON_Version());
	printf("libwebsockets %s\n", lws_get_library_version());
	printf("SQLite %s\n", sqlite3_libversion());
	printf("libseccomp %u.%u.%u\n", sv->major, sv->minor, sv->micro);
	return EXIT_OK;
}

static int
cmd_schema(void)
{
	char *s = cfg_schema_json();

	fputs(s, stdout);
	free(s);
	return EXIT_OK;
}

int
main(int argc, char **argv)
{
	struct opts o;
	const char *cmd;

	if (argc < 2) {
		usage();
		return EXIT_CONFIG;
	}
	cmd = argv[1];
	if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0)
		return cmd_version();
	if (strcmp(cmd, "schema") == 0)
		return cmd_schema();
	if (strcmp(cmd, "init") == 0)
		return init_main(argc - 2, argv + 2);
	if (parse_opts(argc - 2, argv + 2, &o) == -1) {
		usage();
		return EXIT_CONFIG;
	}
	log_init(o.log_format, o.verbose);
	if (strcmp(cmd, "validate") == 0)
		return cmd_validate(&o);
	if (strcmp(cmd, "check") == 0)
		return cmd_check(&o);
	if (strcmp(cmd, "flags") == 0)
		return cmd_flags(&o);
	if (strcmp(cmd, "run") == 0)
		return cmd_run(&o);
	usage();
	return EXIT_CONFIG;
}
