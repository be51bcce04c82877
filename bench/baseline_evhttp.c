/* The baseline of the webhook benchmark: a bare libevent evhttp server with
 * af's webhook limits (body, header block, idle timeout) that answers every
 * POST with 202 and a reply of the same shape and size as af's, and does
 * nothing else: no signature check, no journal, no queue. The ratio of af's
 * rate to this one is what af's own work costs.
 *
 *     baseline_evhttp [PORT]
 *
 * Binds 127.0.0.1 (port 0 by default), prints the bound port as the first
 * line of stdout, and serves until SIGTERM or SIGINT. */
#include <sys/socket.h>
#include <netinet/in.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "triggers/webhook.h"

static unsigned long long served;

/* Same headers and a body of the same length as af's 202
 * ({"run":"r-<24 hex digits>","status":"accepted"}). */
static void
on_request(struct evhttp_request *req, void *arg)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	struct evbuffer *out;

	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
		evhttp_send_error(req, 405, "Method Not Allowed");
		return;
	}
	if ((out = evbuffer_new()) == NULL) {
		evhttp_send_error(req, 500, "Internal Server Error");
		return;
	}
	served++;
	evbuffer_add_printf(out, "{\"run\":\"r-%024llx\",\"status\":\"accepted\"}"
	    "\n", served);
	evhttp_add_header(h, "Content-Type", "application/json");
	evhttp_add_header(h, "Cache-Control", "no-store");
	evhttp_send_reply(req, 202, "Accepted", out);
	evbuffer_free(out);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	event_base_loopbreak(arg);
}

int
main(int argc, char **argv)
{
	struct event_base *base;
	struct evhttp *http;
	struct evhttp_bound_socket *sock;
	struct event *sigterm, *sigint;
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	int port = argc > 1 ? atoi(argv[1]) : 0;

	signal(SIGPIPE, SIG_IGN);
	if ((base = event_base_new()) == NULL || (http = evhttp_new(base)) ==
	    NULL) {
		fprintf(stderr, "baseline_evhttp: cannot set up libevent\n");
		return 1;
	}
	evhttp_set_max_body_size(http, WH_MAX_BODY);
	evhttp_set_max_headers_size(http, WH_MAX_HEADERS);
	evhttp_set_timeout(http, WH_TIMEOUT_S);
	evhttp_set_gencb(http, on_request, NULL);
	if ((sock = evhttp_bind_socket_with_handle(http, "127.0.0.1",
	    (ev_uint16_t)port)) == NULL) {
		fprintf(stderr, "baseline_evhttp: cannot listen on port %d\n",
		    port);
		return 1;
	}
	if (getsockname(evhttp_bound_socket_get_fd(sock),
	    (struct sockaddr *)&sin, &sl) == -1) {
		perror("baseline_evhttp: getsockname");
		return 1;
	}
	printf("%d\n", ntohs(sin.sin_port));
	fflush(stdout);
	sigterm = evsignal_new(base, SIGTERM, on_signal, base);
	sigint = evsignal_new(base, SIGINT, on_signal, base);
	if (sigterm == NULL || sigint == NULL || evsignal_add(sigterm, NULL) ==
	    -1 || evsignal_add(sigint, NULL) == -1) {
		fprintf(stderr, "baseline_evhttp: cannot catch signals\n");
		return 1;
	}
	event_base_dispatch(base);
	fprintf(stderr, "baseline_evhttp: %llu requests answered\n", served);
	event_free(sigterm);
	event_free(sigint);
	evhttp_free(http);
	event_base_free(base);
	return 0;
}
