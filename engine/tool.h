/* The tool interface. A tool knows nothing about triggers; the engine (tool.c)
 * authorizes every call with the permission engine and audits it before the
 * tool runs, so a tool receives an already-authorized, resolved target. The
 * native tools are a static table (tool.c), like tmux's command table; MCP
 * servers add tools at run time. */
#ifndef AF_TOOL_H
#define AF_TOOL_H

#include <cjson/cJSON.h>

#include "config.h"
#include "perm.h"

#define TOOL_NO_AXIS	(-1)

struct tool_call;

struct tool_def {
	const char	*name;
	const char	*description;
	const char	*input_schema;	/* JSON text */
	int		 axis;		/* enum perm_axis, or TOOL_NO_AXIS */
	const char	*target_key;	/* input field the axis checks */
	/* Does the tool exist for this agent (SPEC section 3)? */
	int		(*exists)(const struct cfg *);
	/* A tool without an axis that has a grant of its own (read_skill:
	 * the skills list): 1 with the denial in reason when this call is
	 * outside it, so the audit trail records a denial. May be NULL. */
	int		(*refuse)(const struct tool_call *, char *reason,
		    size_t reasonlen);
	/* Start the call; finish it (now or later) with tool_done. */
	void		(*call)(struct tool_call *);
	void		*ctx;		/* dynamic tools (MCP): their server */
};

struct tool_call {
	const struct tool_def	*def;
	const struct cfg	*cfg;
	const char		*run_id;
	const char		*use_id;	/* the model's tool_use id */
	const char		*conversation;	/* the run's, or NULL */
	const char		*trigger;	/* what started the run */
	const char		*meta;		/* its trigger's meta, or NULL */
	cJSON			*input;		/* borrowed until tool_done */
	struct perm_result	 perm;		/* the authorized target */
	long			 timeout_ms;
	/* Set by an asynchronous tool: stop the call now (run timeout or
	 * shutdown); the tool must still call tool_done. */
	void			(*cancel)(struct tool_call *);
	void			*priv;		/* the tool's own state */

	/* engine-private */
	void			(*on_done)(struct tool_call *, const char *,
				    size_t, int);
	void			*owner;
	int			 finished;
	int			 denied;	/* the engine refused the call */
};

/* Complete a call exactly once: output is capped to limits.tool_output with a
 * note saying how much was cut, secrets are redacted, and the result goes to
 * the model (is_error marks failures and denials). */
void tool_done(struct tool_call *, const char *output, size_t len,
    int is_error);
/* Convenience: printf-style error result. */
void tool_fail(struct tool_call *, const char *fmt, ...) AF_PRINTF(2, 3);

/* The fields of a tool's input by name: got[i] is the field names[i], NULL
 * when absent (got may be NULL: a check only). The input must be an object
 * with no field outside names, as the schemas say (additionalProperties
 * false); -1 with why saying what is wrong. */
int tool_pick(const cJSON *input, const char *const *names, size_t n,
    const cJSON **got, char *why, size_t whylen);
/* tool_pick for a call: -1 after failing it with the reason. */
int tool_input(struct tool_call *, const char *const *names, size_t n,
    const cJSON **got);

/* Authorize a further target during a call (an http_request redirect hop):
 * the permission engine decides, the audit trail records; 1 allowed. A failed
 * audit write counts as a denial. */
int tool_authorize(struct tool_call *, enum perm_axis, const char *target,
    struct perm_result *);

/* Registry. */
void tool_register(const struct tool_def *);	/* dynamic tools (MCP) */
void tool_unregister_ctx(void *ctx);		/* a server's tools go away */
/* The tools that exist for this agent, as the model's tool list. */
cJSON *tool_schemas(const struct cfg *);
const struct tool_def *tool_find(const struct cfg *, const char *name);

/* Run one call: find, authorize, audit, invoke. done gets the final output. */
struct tool_call *tool_invoke(const struct cfg *, const char *run_id,
    const char *trigger, const char *conversation, const char *meta,
    const char *use_id,
    const char *name, cJSON *input,
    void (*done)(struct tool_call *, const char *, size_t, int), void *owner);
void tool_call_free(struct tool_call *);

/* The native tools (tools/). */
extern const struct tool_def tool_current_time;
extern const struct tool_def tool_read_skill;
extern const struct tool_def tool_read_file;
extern const struct tool_def tool_write_file;
extern const struct tool_def tool_run_bash;
extern const struct tool_def tool_http_request;
extern const struct tool_def tool_remember;		/* tools/memory.c */
extern const struct tool_def tool_recall;
extern const struct tool_def tool_list_memories;
extern const struct tool_def tool_forget;
extern const struct tool_def tool_schedule;		/* tools/schedule.c */
extern const struct tool_def tool_list_schedules;
extern const struct tool_def tool_unschedule;

#endif
