/* Reading the audit trail back, for the status server's GET /audit: newest
 * first, filtered, paged, and bounded. The trail can be large (it is never
 * rotated by af), so it is read backwards in fixed chunks and a query stops
 * after AUDIT_READ_SCAN_MAX bytes, saying so. */
#ifndef AUDIT_READ_H
#define AUDIT_READ_H

#include <stdint.h>

#include <cjson/cJSON.h>

#define AUDIT_READ_CHUNK	(64 << 10)
#define AUDIT_READ_SCAN_MAX	(32 << 20)	/* bytes one query reads */
#define AUDIT_READ_LINE_MAX	(512 << 10)	/* longer lines are skipped */

/* Exact matches on the record's fields; NULL matches anything. */
struct audit_filter {
	const char	*run;
	const char	*decision;
	const char	*tool;
	const char	*event;
};

struct audit_page {
	cJSON		*records;	/* array, newest first; caller frees */
	int		 partial;	/* the scan cap stopped the search */
	uint64_t	 scanned;	/* bytes read */
};

/* Skip offset matching records, then collect at most limit. A missing trail
 * is an empty page. -1 with errno when it cannot be read. */
int audit_read(const char *path, const struct audit_filter *, long offset,
    long limit, struct audit_page *out);

#endif
