/*
 * `af run`: the order of start-up matters. Everything that needs the wider
 * world (secrets, the state database, listeners, skills, host addresses) is
 * opened first; then the process restricts itself with the OS sandbox; only
 * then do triggers start taking events.
 */
#include "daemon.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "audit/audit.h"
#include "http.h"
#include "httpd.h"
#include "loop.h"
#include "run.h"
#include "sandbox.h"
#include "schedule.h"
#include "state.h"
#include "status/status.h"
#include "tools/mcp.h"
#include "trigger.h"
#include "util.h"

#define DAEMON_DRAIN_MS		30000	/* SIGTERM: runs get this long */
#define DAEMON_SYNC_MS		100	/* audit group commit */

static struct loop_timer *sync_timer;

static void
sync_tick(void *arg)
{
	sync_timer = NULL;
	audit_sync();
	if (!loop_stopping())
		sync_timer = loop_timer_add(DAEMON_SYNC_MS, sync_tick, NULL);
}

static void
on_stop(void *arg)
{
	log_info("stopping: no new events; runs in flight may finish");
	run_stop_accepting();
	trig_stop_all();
	sched_stop();
	mcp_stop();
}

/* The container is the outermost layer; af refuses to run without it unless
 * the operator says so explicitly. */
static int
check_container(char *err, size_t errlen)
{
	char found[256], looked[1024];
	const char *allow = getenv("AF_ALLOW_NO_CONTAINER");
	const char *root = getenv("AF_CONTAINER_PROBE_ROOT");

	/* For the tests, which run inside a container: probe another root.
	 * It grants nothing AF_ALLOW_NO_CONTAINER does not, and says so. */
	if (root != NULL && *root != '\0')
		log_warnx("container probe looks under %s "
		    "(AF_CONTAINER_PROBE_ROOT), not /", root);
	else
		root = "/";
	if (container_detect(root, found, sizeof(found), looked,
	    sizeof(looked)) == 1) {
		log_info("container detected: %s", found);
		return 0;
	}
	if (allow != NULL && strcmp(allow, "1") == 0) {
		log_warnx("no container detected (looked for %s); running "
		    "anyway because AF_ALLOW_NO_CONTAINER=1", looked);
		return 0;
	}
	snprintf(err, errlen, "no container detected (looked for %s); af runs "
	    "agents only inside a container. Set AF_ALLOW_NO_CONTAINER=1 to "
	    "run without one", looked);
	return -1;
}

/* In hermetic mode no subprocess can exist, so every connection leaves
 * through libcurl: pin it to the addresses the allowed hosts resolve to now,
 * before the sandbox, which also closes DNS rebinding between check and
 * connect. */
static int
apply_sandbox(const struct cfg *cfg, char *err, size_t errlen)
{
	struct sb_plan plan;
	int rc = -1;

	if (getenv("AF_NO_SANDBOX") != NULL &&
	    strcmp(getenv("AF_NO_SANDBOX"), "1") == 0) {
		log_warnx("AF_NO_SANDBOX=1: the OS sandbox is NOT applied; the "
		    "permission engine is the only layer");
		return 0;
	}
	memset(&plan, 0, sizeof(plan));
	if (sandbox_plan(cfg, &plan, err, errlen) == -1)
		goto out;
	if (plan.hermetic) {
		char perr[256];

		if (sandbox_pin_hosts(&plan.hosts, perr, sizeof(perr)) == -1)
			log_warnx("hermetic pin: %s", perr);
		http_set_addr_filter(sandbox_addr_allowed);
	}
	rc = sandbox_apply(&plan, err, errlen);
out:
	sandbox_plan_free(&plan);
	return rc;
}

/* Runs in flight each hold a model connection, webhook clients a socket:
 * take the whole descriptor allowance the container gives. */
static void
raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
			log_warn("setrlimit(RLIMIT_NOFILE)");
	}
}

static int
open_data(const struct cfg *cfg, char *err, size_t errlen)
{
	if (mkdir(cfg->data_dir, 0700) == -1 && errno != EEXIST) {
		snprintf(err, errlen, "data folder %s: %s", cfg->data_dir,
		    strerror(errno));
		return -1;
	}
	if (state_open(cfg->data_dir, err, errlen) == -1)
		return -1;
	return audit_open(cfg->audit_path, cfg->name, &cfg->secret_values,
	    err, errlen);
}

int
daemon_run(struct cfg *cfg)
{
	char err[1024];
	int rc = DAEMON_EXIT_RUNTIME;

	if (cfg_resolve_secrets(cfg, err, sizeof(err)) == -1) {
		fprintf(stderr, "af: %s\n", err);
		return DAEMON_EXIT_CONFIG;
	}
	raise_fd_limit();
	if (check_container(err, sizeof(err)) == -1 ||
	    open_data(cfg, err, sizeof(err)) == -1 ||
	    loop_init() == -1 || http_init() == -1 ||
	    run_init(cfg) == -1 ||
	    trig_prepare_all(cfg, err, sizeof(err)) == -1 ||
	    status_prepare(cfg, err, sizeof(err)) == -1 ||
	    apply_sandbox(cfg, err, sizeof(err)) == -1) {
		fprintf(stderr, "af: %s\n", err);
		goto out;
	}
	loop_on_stop(on_stop, NULL);
	sync_timer = loop_timer_add(DAEMON_SYNC_MS, sync_tick, NULL);
	/* MCP servers list their tools before any run starts, recovered
	 * runs included. */
	if (mcp_start(cfg) == -1 || run_recover() == -1 ||
	    trig_start_all(cfg, err, sizeof(err)) == -1 ||
	    sched_start(cfg, err, sizeof(err)) == -1 ||
	    status_start() == -1) {
		fprintf(stderr, "af: %s\n", err);
		goto out;
	}
	/* Answers a stop or a crash kept from their chat or sender. */
	if (run_outbox_replay() == -1)
		log_warnx("the outbox cannot be read; unsent answers stay in it");
	log_info("agent %s running (af %s)", cfg->name, AF_VERSION);
	if (loop_run() == 0)
		rc = DAEMON_EXIT_OK;
	run_cancel_all("af stopped before the run ended");
	log_info("stopped");
out:
	loop_timer_cancel(sync_timer);
	sync_timer = NULL;
	status_stop();
	status_free();
	trig_free_all();
	run_shutdown();
	mcp_free();
	http_shutdown();
	httpd_shutdown();
	loop_free();
	audit_close();
	state_close();
	return rc;
}
