/* A parser for the subset of the shell language that bash accepts, written for
 * one reader: the run axis of the permission engine, which must know every
 * command a command line would run. It never executes or expands anything; it
 * reports what it finds, and it refuses (with a reason) whatever it cannot
 * parse exactly the way bash would. */
#ifndef AF_SHELL_H
#define AF_SHELL_H

#include <stddef.h>

#define SH_MAX_INPUT	(64 << 10)	/* longer command lines are refused */
#define SH_MAX_DEPTH	64		/* nesting of compound commands */
#define SH_MAX_WHAT	48		/* input bytes quoted in an error */

/* What a word contains besides literal text. */
#define SH_W_QUOTED	0x001	/* some part was quoted or escaped */
#define SH_W_PARAM	0x002	/* $name or ${name...} */
#define SH_W_SPLIT	0x004	/* an unquoted expansion: may split or vanish */
#define SH_W_GLOB	0x008	/* unquoted * ? or [..] */
#define SH_W_BRACE	0x010	/* unquoted {a,b} or {a..b} */
#define SH_W_TILDE	0x020	/* unquoted leading ~ */
#define SH_W_LOCALE	0x040	/* $"..": translated at run time */
#define SH_W_ODD	0x080	/* a $'..' escape whose value depends on bash */
#define SH_W_NONLIT	(SH_W_PARAM | SH_W_SPLIT | SH_W_GLOB | SH_W_BRACE | \
			 SH_W_TILDE | SH_W_LOCALE | SH_W_ODD)

/* Parser flags. */
#define SH_POSIX	0x1	/* dash (sh -c): refuse bash-only syntax */

struct sh_word {
	char	*text;	/* after quote removal; expansions kept as written */
	int	 flags;	/* SH_W_* */
};

enum sh_redir_op {
	SH_R_IN,	/* <    */
	SH_R_OUT,	/* >    */
	SH_R_APPEND,	/* >>   */
	SH_R_CLOBBER,	/* >|   */
	SH_R_RDWR,	/* <>   */
	SH_R_OUTERR,	/* &>   */
	SH_R_APPERR,	/* &>>  */
	SH_R_DUPIN,	/* <&   */
	SH_R_DUPOUT,	/* >&   */
	SH_R_HEREDOC,	/* << and <<- */
	SH_R_HERESTR	/* <<<  */
};

struct sh_redir {
	enum sh_redir_op op;
	int		 fd;	 /* the N of N>, or -1 */
	struct sh_word	 target; /* here-documents: the delimiter */
	size_t		 body;	 /* here-documents: index in sh_script.bodies */
};

/*
 * One simple command, in the order bash would start them. A compound command's
 * own redirections ({ ..; } >f) come as a record without words; a for loop
 * comes as a record naming its variable.
 */
struct sh_cmd {
	struct sh_word	*assigns;	/* NAME=value prefixes */
	size_t		 nassigns;
	struct sh_word	*words;		/* words[0] is the command name */
	size_t		 nwords;
	struct sh_redir	*redirs;
	size_t		 nredirs;
	char		*for_var;	/* for NAME in ..: NAME; else NULL */
};

struct sh_script {
	struct sh_cmd	*cmds;
	size_t		 ncmds;
	char		**bodies;	/* here-document bodies */
	size_t		 nbodies;
};

/* Why a command line was refused: WHY about the input fragment WHAT (already
 * escaped and bounded, safe to show). */
struct sh_error {
	char	what[SH_MAX_WHAT * 4 + 8];
	char	why[160];
};

/* Parse len bytes of src. Returns 0, or -1 with err filled and out empty. */
int sh_parse(const char *src, size_t len, int flags, struct sh_script *out,
    struct sh_error *err);
void sh_script_free(struct sh_script *);

/* True when a word is plain text, the same at every run. */
int sh_word_literal(const struct sh_word *);
/* Length of the NAME of a NAME=value or NAME+=value word. */
size_t sh_assign_name_len(const char *);
/* Copy at most max bytes of src into dst for a message: control bytes,
 * non-ASCII, quotes and backslashes escaped, "..." when cut. */
void sh_quote(char *dst, size_t dstlen, const char *src, size_t srclen,
    size_t max);

#endif
