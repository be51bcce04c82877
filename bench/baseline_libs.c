/* The memory baseline: a process that loads every shared library af is
 * linked with, initialises the ones af initialises at start (libcurl, with
 * its TLS and SSH back ends; libevent with threads), touches one symbol of
 * each of the rest so the linker keeps it, and then does nothing. Its VmRSS
 * is the floor that Debian's libraries set for any program built on them;
 * af's idle VmRSS above it is af's own.
 *
 *     baseline_libs
 *
 * Prints "ready" once set up and sleeps until SIGTERM or SIGINT. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <gnutls/gnutls.h>
#include <libetpan/libetpan.h>
#include <libwebsockets.h>
#include <seccomp.h>
#include <sqlite3.h>
#include <yaml.h>

static volatile sig_atomic_t stop;

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int
main(void)
{
	struct event_base *base;
	mailimap *imap;

	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	if (evthread_use_pthreads() == -1 ||
	    (base = event_base_new()) == NULL ||
	    curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
	    sqlite3_initialize() != SQLITE_OK ||
	    (imap = mailimap_new(0, NULL)) == NULL) {
		fprintf(stderr, "baseline_libs: set-up failed\n");
		return 1;
	}
	mailimap_free(imap);
	/* Kept by the linker, not run for their effect. */
	if (yaml_get_version_string() == NULL || cJSON_Version() == NULL ||
	    lws_get_library_version() == NULL || seccomp_api_get() == 0 ||
	    gnutls_check_version(NULL) == NULL)
		fprintf(stderr, "baseline_libs: a library has no version\n");
	printf("ready\n");
	fflush(stdout);
	while (!stop)
		pause();
	event_base_free(base);
	curl_global_cleanup();
	return 0;
}
