/* A tiny test harness in the manner of libevent's tinytest: a table of named
 * cases, tt_* checks that report and jump to the case's `end:` label, and a
 * main that runs every case and prints "N passed, N failed". */
#ifndef AF_TT_H
#define AF_TT_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

struct tt_case {
	const char	*name;
	void		(*fn)(void);
};

extern int tt_failed_now;

#define tt_fail_msg(...) do {						\
	fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__);		\
	fprintf(stderr, __VA_ARGS__);					\
	fputc('\n', stderr);						\
	tt_failed_now = 1;						\
	goto end;							\
} while (0)

#define tt_assert(c) do {						\
	if (!(c))							\
		tt_fail_msg("assert(%s) failed", #c);			\
} while (0)

#define tt_int_op(a, op, b) do {					\
	long long tt_a_ = (long long)(a), tt_b_ = (long long)(b);	\
	if (!(tt_a_ op tt_b_))						\
		tt_fail_msg("%s %s %s: %lld vs %lld", #a, #op, #b,	\
		    tt_a_, tt_b_);					\
} while (0)

#define tt_str_op(a, op, b) do {					\
	const char *tt_a_ = (a), *tt_b_ = (b);				\
	if (tt_a_ == NULL || tt_b_ == NULL ||				\
	    !(strcmp(tt_a_, tt_b_) op 0))				\
		tt_fail_msg("%s %s %s: \"%s\" vs \"%s\"", #a, #op, #b,	\
		    tt_a_ ? tt_a_ : "(null)", tt_b_ ? tt_b_ : "(null)");	\
} while (0)

/* Remove a folder and everything under it, links not followed. */
void tt_rmtree(const char *dir);

/* Run every case of a NULL-terminated table; returns the exit status. Each
 * case's result is printed so a failure names itself. */
int tt_main(int argc, char **argv, const struct tt_case *cases);

#endif
