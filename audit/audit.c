#include "audit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define AUDIT_MAX_STRING	(8 << 10)	/* a longer value is cut */
#define AUDIT_MAX_RECORD	(256 << 10)	/* a longer record is refused */

static int audit_fd = -1;
static char *audit_agent;
static const struct strlist *audit_secrets;
static int audit_dirty;
static char audit_err[256];

int
audit_open(const char *path, const char *agent, const struct strlist *secrets,
    char *err, size_t errlen)
{
	audit_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
	    O_NOFOLLOW, 0600);
	if (audit_fd == -1) {
		snprintf(err, errlen, "audit trail %s: %s", path,
		    strerror(errno));
		return -1;
	}
	free(audit_agent);
	audit_agent = xstrdup(agent);
	audit_secrets = secrets;
	audit_err[0] = '\0';
	return 0;
}

void
audit_close(void)
{
	if (audit_fd != -1) {
		audit_sync();
		close(audit_fd);
	}
	audit_fd = -1;
	free(audit_agent);
	audit_agent = NULL;
}

const char *
audit_failed(void)
{
	return audit_err[0] ? audit_err : NULL;
}

/* Cut a value the model or a peer made long (a command line, a tool name)
 * on a UTF-8 character boundary and say how much went, so that every record
 * stays whole and short. Redaction comes first: a cut must not leave the
 * head of a secret behind. */
static char *
cap_string(char *s)
{
	size_t len = strlen(s), keep = AUDIT_MAX_STRING;
	char *out;

	if (len <= AUDIT_MAX_STRING)
		return s;
	while (keep > 0 && ((unsigned char)s[keep] & 0xc0) == 0x80)
		keep--;
	out = xasprintf("%.*s... [%zu bytes cut]", (int)keep, s, len - keep);
	free(s);
	return out;
}

/* Redact every string in the record before it is serialized, so escaping
 * cannot hide a secret from the match, then bound it. */
static void
clean_tree(cJSON *j)
{
	for (cJSON *c = j; c != NULL; c = c->next) {
		if (cJSON_IsString(c) && c->valuestring != NULL) {
			char *r = cap_string(redact_secrets(c->valuestring,
			    audit_secrets));

			if (strcmp(r, c->valuestring) != 0)
				cJSON_SetValuestring(c, r);
			free(r);
		}
		if (c->child != NULL)
			clean_tree(c->child);
	}
}

cJSON *
audit_new(const char *run, const char *event)
{
	cJSON *r = cJSON_CreateObject();
	char ts[32];

	fmt_time_iso(now_ms(), ts, sizeof(ts));
	cJSON_AddStringToObject(r, "ts", ts);
	cJSON_AddStringToObject(r, "agent", audit_agent ? audit_agent : "");
	if (run != NULL)
		cJSON_AddStringToObject(r, "run", run);
	cJSON_AddStringToObject(r, "event", event);
	return r;
}

/* One write(2) per record. A short write (disk full) is cut back with
 * ftruncate, so the trail never holds a torn record. */
int
audit_emit(cJSON *rec)
{
	char *line;
	size_t len;
	ssize_t n;
	off_t before;

	if (audit_fd == -1 || audit_err[0]) {
		cJSON_Delete(rec);
		errno = EIO;
		return -1;
	}
	clean_tree(rec);
	line = cJSON_PrintUnformatted(rec);
	cJSON_Delete(rec);
	if (line == NULL)
		fatalx("audit: out of memory");
	len = strlen(line);
	if (len > AUDIT_MAX_RECORD) {
		/* Not reached with capped values; a cut would tear it. */
		free(line);
		log_warnx("audit: a record of %zu bytes is refused, and its "
		    "action with it", len);
		errno = E2BIG;
		return -1;
	}
	line[len] = '\n';
	before = lseek(audit_fd, 0, SEEK_END);
	do
		n = write(audit_fd, line, len + 1);
	while (n == -1 && errno == EINTR);
	free(line);
	if (n == (ssize_t)(len + 1)) {
		audit_dirty = 1;
		return 0;
	}
	if (n >= 0) {
		if (before != (off_t)-1)
			(void)!ftruncate(audit_fd, before);
		errno = ENOSPC;
	}
	log_warn("audit: write failed; the action is refused");
	return -1;
}

int
audit_decision(const char *run, const char *tool, const char *axis,
    const char *target, int allowed, const char *reason)
{
	cJSON *r = audit_new(run, "tool");

	cJSON_AddStringToObject(r, "tool", tool);
	if (axis != NULL)
		cJSON_AddStringToObject(r, "axis", axis);
	cJSON_AddStringToObject(r, "target", target ? target : "");
	cJSON_AddStringToObject(r, "decision", allowed ? "allow" : "deny");
	if (!allowed && reason != NULL)
		cJSON_AddStringToObject(r, "reason", reason);
	return audit_emit(r);
}

/* An fsync error is not retried: Linux may have dropped the dirty pages, so a
 * second fsync could falsely succeed. The failure sticks. */
int
audit_sync(void)
{
	if (audit_fd == -1 || !audit_dirty)
		return audit_err[0] ? -1 : 0;
	audit_dirty = 0;
	if (fdatasync(audit_fd) == -1) {
		snprintf(audit_err, sizeof(audit_err),
		    "audit trail fsync failed: %s", strerror(errno));
		log_warnx("%s; no new events are accepted", audit_err);
		return -1;
	}
	return 0;
}

int
audit_tail_run_ends(const char *path, size_t max,
    void (*fn)(const char *, const char *, void *), void *arg)
{
	struct stat st;
	char *data, *line, *save = NULL;
	off_t from;
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return errno == ENOENT ? 0 : -1;
	if (fstat(fd, &st) == -1) {
		close(fd);
		return -1;
	}
	from = st.st_size > (off_t)max ? st.st_size - (off_t)max : 0;
	data = xmalloc((size_t)(st.st_size - from) + 1);
	n = pread(fd, data, (size_t)(st.st_size - from), from);
	close(fd);
	if (n < 0) {
		free(data);
		return -1;
	}
	data[n] = '\0';
	/* The first line may be cut by the offset: it fails to parse. */
	for (line = strtok_r(data, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		cJSON *rec;
		const cJSON *ev, *run, *status;

		if (strstr(line, "\"run_end\"") == NULL)
			continue;
		if ((rec = cJSON_Parse(line)) == NULL)
			continue;
		ev = cJSON_GetObjectItemCaseSensitive(rec, "event");
		run = cJSON_GetObjectItemCaseSensitive(rec, "run");
		status = cJSON_GetObjectItemCaseSensitive(rec, "status");
		if (cJSON_IsString(ev) && strcmp(ev->valuestring, "run_end") == 0
		    && cJSON_IsString(run) && cJSON_IsString(status))
			fn(run->valuestring, status->valuestring, arg);
		cJSON_Delete(rec);
	}
	free(data);
	return 0;
}
