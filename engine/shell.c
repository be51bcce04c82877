/*
 * The shell parser behind the run axis. It follows bash's reading rules closely
 * enough that every word it reports as a command is the word bash would run,
 * and it refuses rather than guesses: command, process and arithmetic
 * substitution, parameter expansions that can evaluate code, and syntax it
 * does not model all end the parse with a reason.
 *
 * Reading is done by a lexer with one token of lookahead and a recursive
 * descent parser whose depth is bounded; here-document bodies are read when
 * the newline that ends their line is lexed, as bash does.
 */
#include "shell.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

enum tok_kind { TK_WORD, TK_OP, TK_NL, TK_EOF };

enum op {
	OP_ANDIF, OP_ORIF, OP_SEMI, OP_AMP, OP_PIPE, OP_PIPEERR, OP_LPAREN,
	OP_RPAREN, OP_DSEMI, OP_SEMIAMP, OP_DSEMIAMP,
	OP_LESS, OP_GREAT, OP_DGREAT, OP_CLOBBER, OP_LESSGREAT, OP_ANDGREAT,
	OP_ANDDGREAT, OP_LESSAND, OP_GREATAND, OP_DLESS, OP_DLESSDASH,
	OP_TLESS
};

/* Contexts a $ can appear in; they decide what is special after it. */
enum dctx { D_UNQ, D_DQ, D_HEREDOC, D_BRACE };

struct token {
	enum tok_kind	 kind;
	enum op		 op;
	struct sh_word	 w;		/* TK_WORD; owned until taken */
	int		 assign;	/* 1: NAME=..; 2: NAME[..]=.. */
	int		 adj_redir;	/* a < or > follows with no blank */
	int		 fdvar;		/* {NAME} directly before < or > */
	size_t		 start;
};

struct heredoc {
	char	*delim;
	int	 quoted;
	int	 strip;
	size_t	 body;
};

struct lexer {
	const char	*s;
	size_t		 len;
	size_t		 pos;
	int		 flags;
	int		 nest;		/* ${..} inside ${..} */
	struct sh_error	*err;
	int		 failed;
};

struct parser {
	struct lexer	 lx;
	struct token	 tok;
	int		 have;
	int		 depth;
	struct sh_script *sc;
	struct heredoc	*pend;
	size_t		 npend;
};

/* A word being built: its text and, per byte, whether it was unquoted. */
struct wbuf {
	struct buf	text;
	struct buf	mask;
	int		flags;
};

static int lex_dollar(struct lexer *, struct wbuf *, enum dctx);
static int parse_list(struct parser *);
static int parse_command(struct parser *);

void
sh_quote(char *dst, size_t dstlen, const char *src, size_t srclen, size_t max)
{
	size_t	o = 0, i;
	int	cut = srclen > max;

	if (dstlen == 0)
		return;
	for (i = 0; i < srclen && i < max; i++) {
		unsigned char c = (unsigned char)src[i];
		char tmp[8];

		if (c < 0x20 || c >= 0x7f)
			snprintf(tmp, sizeof(tmp), "\\x%02x", c);
		else if (c == '"' || c == '\\')
			snprintf(tmp, sizeof(tmp), "\\%c", c);
		else
			snprintf(tmp, sizeof(tmp), "%c", c);
		if (o + strlen(tmp) + 4 >= dstlen) {
			cut = 1;
			break;
		}
		memcpy(dst + o, tmp, strlen(tmp));
		o += strlen(tmp);
	}
	if (cut && o + 4 <= dstlen) {
		memcpy(dst + o, "...", 3);
		o += 3;
	}
	dst[o] = '\0';
}

/* Record the first failure: WHY about the input from start to end. */
static int
lx_fail(struct lexer *lx, size_t start, size_t end, const char *why)
{
	if (lx->failed)
		return -1;
	lx->failed = 1;
	if (start > lx->len)
		start = lx->len;
	if (end < start || end > lx->len)
		end = lx->len;
	sh_quote(lx->err->what, sizeof(lx->err->what), lx->s + start,
	    end - start, SH_MAX_WHAT);
	snprintf(lx->err->why, sizeof(lx->err->why), "%s", why);
	return -1;
}

/* The end of a construct opened at start with open/close, for messages only. */
static size_t
span_end(struct lexer *lx, size_t start, char open, char close)
{
	size_t	i;
	int	d = 0;

	for (i = start; i < lx->len && i < start + SH_MAX_WHAT + 1; i++) {
		if (lx->s[i] == open && (open != close || i == start))
			d++;
		else if (lx->s[i] == close && --d <= 0)
			return i + 1;
	}
	return i;
}

/* End of the blank-delimited fragment at start, for messages only. */
static size_t
frag_end(struct lexer *lx, size_t start)
{
	size_t i = start;

	while (i < lx->len && i < start + SH_MAX_WHAT + 1 &&
	    lx->s[i] != ' ' && lx->s[i] != '\t' && lx->s[i] != '\n')
		i++;
	return i == start && i < lx->len ? i + 1 : i;
}

/* bash drops a backslash-newline pair before tokenizing, except inside single
 * quotes, $'..', comments and quoted here-documents; so must we. */
static void
splice(struct lexer *lx)
{
	while (lx->pos + 1 < lx->len && lx->s[lx->pos] == '\\' &&
	    lx->s[lx->pos + 1] == '\n')
		lx->pos += 2;
}

static int
cur(struct lexer *lx)
{
	splice(lx);
	return lx->pos < lx->len ? (unsigned char)lx->s[lx->pos] : -1;
}

/* The character after the current one, splices skipped. */
static int
next(struct lexer *lx)
{
	size_t p;

	splice(lx);
	p = lx->pos + 1;
	while (p + 1 < lx->len && lx->s[p] == '\\' && lx->s[p + 1] == '\n')
		p += 2;
	return p < lx->len ? (unsigned char)lx->s[p] : -1;
}

static void
wb_add(struct wbuf *wb, char c, int unquoted)
{
	buf_addc(&wb->text, c);
	buf_addc(&wb->mask, unquoted ? 1 : 0);
}

static void
wb_addn(struct wbuf *wb, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		wb_add(wb, s[i], 0);
}

static int
is_meta(int c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '&' ||
	    c == '|' || c == '(' || c == ')' || c == '<' || c == '>';
}

static int
is_name_start(int c)
{
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int
is_name(int c)
{
	return is_name_start(c) || (c >= '0' && c <= '9');
}

static int
is_special_param(int c)
{
	return c == '@' || c == '*' || c == '#' || c == '?' || c == '-' ||
	    c == '$' || c == '!' || (c >= '0' && c <= '9');
}

/* The word after a parameter-expansion operator (${x:-word}). Quotes,
 * escapes and braces are refused inside it: bash's rules there differ by
 * context, and a guess could end the word somewhere bash does not. */
static int
lex_brace_word(struct lexer *lx, size_t start)
{
	struct wbuf	 tmp;
	int		 c, rc = 0;

	memset(&tmp, 0, sizeof(tmp));
	buf_init(&tmp.text);
	buf_init(&tmp.mask);
	for (;;) {
		c = cur(lx);
		if (c == -1) {
			rc = lx_fail(lx, start, lx->len, "unbalanced ${");
			break;
		}
		if (c == '}')
			break;
		if (c == '`') {
			rc = lx_fail(lx, lx->pos, span_end(lx, lx->pos, '`',
			    '`'), "command substitution is not allowed");
			break;
		}
		if (c == '\'' || c == '"' || c == '\\' || c == '{' ||
		    c == '\n') {
			rc = lx_fail(lx, start, span_end(lx, start, '{', '}'),
			    "quotes, escapes and braces inside ${..} are not "
			    "supported");
			break;
		}
		if (c == '$') {
			if ((rc = lex_dollar(lx, &tmp, D_BRACE)) == -1)
				break;
			continue;
		}
		lx->pos++;
	}
	buf_free(&tmp.text);
	buf_free(&tmp.mask);
	return rc;
}

/* Operators after ${NAME whose word is plain text or simple expansions.
 * Substrings (:off) and subscripts evaluate arithmetic, which can run
 * commands through a variable's value; = assigns; ! and @ indirect. */
static const char *brace_ops[] = {
	":-", ":+", ":?", "##", "%%", "//", "/#", "/%", "^^", ",,",
	"-", "+", "?", "#", "%", "/", "^", ","
};

static int
lex_brace_param(struct lexer *lx, size_t start)
{
	int	c = cur(lx), len_op = 0;
	size_t	i;

	if (++lx->nest > 8)
		return lx_fail(lx, start, span_end(lx, start + 1, '{', '}'),
		    "parameter expansion is nested too deeply");
	if (c == '#' && next(lx) != '}') {
		len_op = 1;
		lx->pos++;
		c = cur(lx);
	} else if (c == '!' && next(lx) != '}')
		return lx_fail(lx, start, span_end(lx, start + 1, '{', '}'),
		    "indirect parameter expansion is not allowed");
	if (is_name_start(c)) {
		while (is_name(cur(lx)))
			lx->pos++;
	} else if (c >= '0' && c <= '9') {
		while ((c = cur(lx)) >= '0' && c <= '9')
			lx->pos++;
	} else if (c != -1 && is_special_param(c))
		lx->pos++;
	else
		return lx_fail(lx, start, span_end(lx, start + 1, '{', '}'),
		    "bad parameter expansion");
	c = cur(lx);
	if (c == '}') {
		lx->pos++;
		lx->nest--;
		return 0;
	}
	if (!len_op) {
		for (i = 0; i < nitems(brace_ops); i++) {
			size_t n = strlen(brace_ops[i]);

			if (lx->pos + n <= lx->len &&
			    memcmp(lx->s + lx->pos, brace_ops[i], n) == 0)
				break;
		}
		if (i < nitems(brace_ops)) {
			lx->pos += strlen(brace_ops[i]);
			if (lex_brace_word(lx, start) == -1)
				return -1;
			lx->pos++;	/* the } */
			lx->nest--;
			return 0;
		}
	}
	if (c == '[')
		return lx_fail(lx, start, span_end(lx, start + 1, '{', '}'),
		    "array subscripts are not allowed");
	if (c == '=' || (c == ':' && next(lx) == '='))
		return lx_fail(lx, start, span_end(lx, start + 1, '{', '}'),
		    "assigning parameter expansion is not allowed");
	if (c == ':')
		return lx_fail(lx, start, span_end(lx, start + 1, '{', '}'),
		    "substring expansion is not allowed");
	return lx_fail(lx, start, span_end(lx, start + 1, '{', '}'),
	    "unsupported parameter expansion");
}

/* Decode one escape of $'..' at s[pos] == '\\'; returns the new position.
 * Escapes whose value bash computes from the locale, or that yield a NUL
 * (which cuts the word short), mark the word SH_W_ODD. */
static size_t
ansi_escape(const char *s, size_t len, size_t pos, struct wbuf *wb)
{
	static const char from[] = "abeEfnrtv\\'\"?", to[] =
	    "\a\b\033\033\f\n\r\t\v\\'\"?";
	const char	*p;
	unsigned	 v = 0;
	size_t		 i = pos + 1, n;
	int		 c = (unsigned char)s[i];

	if ((p = strchr(from, c)) != NULL && c != '\0') {
		wb_add(wb, to[p - from], 0);
		return i + 1;
	}
	if (c >= '0' && c <= '7') {
		for (n = 0; n < 3 && i < len && s[i] >= '0' && s[i] <= '7';
		    n++, i++)
			v = v * 8 + (unsigned)(s[i] - '0');
	} else if (c == 'x') {
		for (n = 0, i++; n < 2 && i < len && isxdigit((unsigned char)
		    s[i]); n++, i++)
			v = v * 16 + (unsigned)(isdigit((unsigned char)s[i]) ?
			    s[i] - '0' : (tolower((unsigned char)s[i]) - 'a' +
			    10));
		if (n == 0)
			wb->flags |= SH_W_ODD;
	} else if (c == 'u' || c == 'U') {
		for (n = 0, i++; n < (c == 'u' ? 4U : 8U) && i < len &&
		    isxdigit((unsigned char)s[i]); n++, i++)
			;
		wb->flags |= SH_W_ODD;
		return i;
	} else if (c == 'c' && i + 1 < len && s[i + 1] != '\\' &&
	    s[i + 1] != '\'') {
		v = (unsigned char)s[i + 1] & 0x1f;
		i += 2;
	} else {
		/* Unknown escapes keep their backslash. */
		wb_add(wb, '\\', 0);
		if (c == 'c')
			wb->flags |= SH_W_ODD;
		return i;
	}
	if ((v & 0xff) == 0)
		wb->flags |= SH_W_ODD;
	else
		wb_add(wb, (char)(v & 0xff), 0);
	return i;
}

/* $'..', read raw: bash splices no lines inside it. */
static int
lex_ansi(struct lexer *lx, struct wbuf *wb, size_t start)
{
	if (lx->flags & SH_POSIX)
		return lx_fail(lx, start, frag_end(lx, start),
		    "$'..' quoting is not supported by sh");
	lx->pos++;	/* the quote */
	wb->flags |= SH_W_QUOTED;
	for (;;) {
		if (lx->pos >= lx->len)
			return lx_fail(lx, start, lx->len, "unbalanced quote");
		if (lx->s[lx->pos] == '\'') {
			lx->pos++;
			return 0;
		}
		if (lx->s[lx->pos] == '\\') {
			if (lx->pos + 1 >= lx->len)
				return lx_fail(lx, start, lx->len,
				    "unbalanced quote");
			lx->pos = ansi_escape(lx->s, lx->len, lx->pos, wb);
			continue;
		}
		wb_add(wb, lx->s[lx->pos++], 0);
	}
}

static int lex_dquote(struct lexer *, struct wbuf *);

/* At a $: decide what follows. Code-running expansions end the parse. */
static int
lex_dollar(struct lexer *lx, struct wbuf *wb, enum dctx ctx)
{
	size_t	start = lx->pos;
	int	c;

	lx->pos++;
	c = cur(lx);
	if (c == '(' && next(lx) == '(')
		return lx_fail(lx, start, span_end(lx, start + 1, '(', ')'),
		    "arithmetic expansion is not allowed");
	if (c == '(')
		return lx_fail(lx, start, span_end(lx, start + 1, '(', ')'),
		    "command substitution is not allowed");
	if (c == '[')
		return lx_fail(lx, start, span_end(lx, start + 1, '[', ']'),
		    "arithmetic expansion is not allowed");
	if (c == '{') {
		lx->pos++;
		if (lex_brace_param(lx, start) == -1)
			return -1;
	} else if (c == '\'' && ctx == D_UNQ) {
		return lex_ansi(lx, wb, start);
	} else if (c == '"' && ctx == D_UNQ) {
		if (lx->flags & SH_POSIX)
			return lx_fail(lx, start, frag_end(lx, start),
			    "$\"..\" quoting is not supported by sh");
		wb->flags |= SH_W_LOCALE;
		return lex_dquote(lx, wb);
	} else if (c != -1 && is_name_start(c)) {
		while (is_name(cur(lx)))
			lx->pos++;
	} else if (c != -1 && is_special_param(c)) {
		lx->pos++;
	} else {
		wb_add(wb, '$', ctx == D_UNQ);
		return 0;
	}
	wb_addn(wb, lx->s + start, lx->pos - start);
	wb->flags |= SH_W_PARAM | (ctx == D_UNQ ? SH_W_SPLIT : 0);
	return 0;
}

static int
lex_dquote(struct lexer *lx, struct wbuf *wb)
{
	size_t	start = lx->pos;
	int	c, d;

	lx->pos++;
	wb->flags |= SH_W_QUOTED;
	for (;;) {
		if ((c = cur(lx)) == -1)
			return lx_fail(lx, start, lx->len, "unbalanced quote");
		if (c == '"') {
			lx->pos++;
			return 0;
		}
		if (c == '`')
			return lx_fail(lx, lx->pos, span_end(lx, lx->pos, '`',
			    '`'), "command substitution is not allowed");
		if (c == '$') {
			if (lex_dollar(lx, wb, D_DQ) == -1)
				return -1;
			continue;
		}
		if (c == '\\' && lx->pos + 1 < lx->len) {
			d = (unsigned char)lx->s[lx->pos + 1];
			if (d == '$' || d == '`' || d == '"' || d == '\\') {
				wb_add(wb, (char)d, 0);
				lx->pos += 2;
				continue;
			}
		}
		wb_add(wb, (char)c, 0);
		lx->pos++;
	}
}

/* Mark globs, brace expansions and tildes from the unquoted bytes. */
static void
word_scan(struct wbuf *wb)
{
	const char	*t = wb->text.data, *m = wb->mask.data;
	size_t		 n = wb->text.len, i, j;
	int		 inbrace = 0, sep = 0;

	for (i = 0; i < n; i++) {
		if (!m[i])
			continue;
		if (t[i] == '*' || t[i] == '?')
			wb->flags |= SH_W_GLOB;
		if (t[i] == '[')
			for (j = i + 1; j < n; j++)
				if (t[j] == ']')
					wb->flags |= SH_W_GLOB;
		if (t[i] == '~' && (i == 0 || (m[i - 1] && (t[i - 1] == '=' ||
		    t[i - 1] == ':'))))
			wb->flags |= SH_W_TILDE;
		if (t[i] == '{')
			inbrace++;
		else if (inbrace && (t[i] == ',' || (t[i] == '.' &&
		    i + 1 < n && t[i + 1] == '.' && m[i + 1])))
			sep = 1;
		else if (inbrace && t[i] == '}' && sep)
			wb->flags |= SH_W_BRACE;
	}
}

/* 1 for NAME=.. or NAME+=.., 2 for NAME[..]=.., else 0; all unquoted. */
static int
word_assign(const struct wbuf *wb)
{
	const char	*t = wb->text.data, *m = wb->mask.data;
	size_t		 n = wb->text.len, i = 0;

	if (n == 0 || !m[0] || !is_name_start((unsigned char)t[0]))
		return 0;
	while (i < n && m[i] && is_name((unsigned char)t[i]))
		i++;
	if (i < n && m[i] && t[i] == '=')
		return 1;
	if (i + 1 < n && m[i] && t[i] == '+' && m[i + 1] && t[i + 1] == '=')
		return 1;
	if (i < n && m[i] && t[i] == '[') {
		for (; i + 1 < n; i++)
			if (t[i] == ']' && t[i + 1] == '=')
				return 2;
	}
	return 0;
}

static int
word_fdvar(const struct wbuf *wb)
{
	const char	*t = wb->text.data, *m = wb->mask.data;
	size_t		 n = wb->text.len;

	return n >= 3 && m[0] && t[0] == '{' && m[n - 1] && t[n - 1] == '}' &&
	    is_name_start((unsigned char)t[1]);
}

/* One word in unquoted context. */
static int
lex_word(struct lexer *lx, struct token *tok)
{
	struct wbuf	wb;
	int		c, rc = 0;

	memset(&wb, 0, sizeof(wb));
	buf_init(&wb.text);
	buf_init(&wb.mask);
	while ((c = cur(lx)) != -1 && !is_meta(c)) {
		if (c == '\\') {
			if (lx->pos + 1 >= lx->len) {
				wb_add(&wb, '\\', 0);
				lx->pos++;
				break;
			}
			wb_add(&wb, lx->s[lx->pos + 1], 0);
			wb.flags |= SH_W_QUOTED;
			lx->pos += 2;
		} else if (c == '\'') {
			size_t	 start = lx->pos++;
			char	*q = memchr(lx->s + lx->pos, '\'',
			    lx->len - lx->pos);

			if (q == NULL) {
				rc = lx_fail(lx, start, lx->len,
				    "unbalanced quote");
				break;
			}
			wb_addn(&wb, lx->s + lx->pos, (size_t)(q - lx->s) -
			    lx->pos);
			wb.flags |= SH_W_QUOTED;
			lx->pos = (size_t)(q - lx->s) + 1;
		} else if (c == '"') {
			if ((rc = lex_dquote(lx, &wb)) == -1)
				break;
		} else if (c == '`') {
			rc = lx_fail(lx, lx->pos, span_end(lx, lx->pos, '`',
			    '`'), "command substitution is not allowed");
			break;
		} else if (c == '$') {
			if ((rc = lex_dollar(lx, &wb, D_UNQ)) == -1)
				break;
		} else {
			wb_add(&wb, (char)c, 1);
			lx->pos++;
		}
	}
	if (rc == 0) {
		word_scan(&wb);
		tok->assign = word_assign(&wb);
		c = cur(lx);
		tok->adj_redir = c == '<' || c == '>';
		tok->fdvar = tok->adj_redir && word_fdvar(&wb);
		tok->w.flags = wb.flags;
		tok->w.text = buf_steal(&wb.text);
	} else
		buf_free(&wb.text);
	buf_free(&wb.mask);
	return rc;
}

/* Take c2 after the operator's first character if it is there. */
static int
op_more(struct lexer *lx, int c2)
{
	if (cur(lx) == c2) {
		lx->pos++;
		return 1;
	}
	return 0;
}

static int
lex_op_redir(struct lexer *lx, struct token *tok, int c, size_t start)
{
	if (cur(lx) == '(')
		return lx_fail(lx, start, span_end(lx, start + 1, '(', ')'),
		    "process substitution is not allowed");
	if (c == '<') {
		if (op_more(lx, '<')) {
			if (op_more(lx, '<'))
				tok->op = OP_TLESS;
			else if (op_more(lx, '-'))
				tok->op = OP_DLESSDASH;
			else
				tok->op = OP_DLESS;
		} else if (op_more(lx, '&'))
			tok->op = OP_LESSAND;
		else if (op_more(lx, '>'))
			tok->op = OP_LESSGREAT;
		else
			tok->op = OP_LESS;
	} else {
		if (op_more(lx, '>'))
			tok->op = OP_DGREAT;
		else if (op_more(lx, '&'))
			tok->op = OP_GREATAND;
		else if (op_more(lx, '|'))
			tok->op = OP_CLOBBER;
		else
			tok->op = OP_GREAT;
	}
	if ((lx->flags & SH_POSIX) && tok->op == OP_TLESS)
		return lx_fail(lx, start, lx->pos,
		    "here-strings are not supported by sh");
	return 0;
}

static int
lex_op(struct lexer *lx, struct token *tok, int c)
{
	size_t start = lx->pos++;

	tok->kind = TK_OP;
	switch (c) {
	case ';':
		if (op_more(lx, ';'))
			tok->op = op_more(lx, '&') ? OP_DSEMIAMP : OP_DSEMI;
		else
			tok->op = op_more(lx, '&') ? OP_SEMIAMP : OP_SEMI;
		break;
	case '&':
		if (op_more(lx, '&'))
			tok->op = OP_ANDIF;
		else if (op_more(lx, '>'))
			tok->op = op_more(lx, '>') ? OP_ANDDGREAT : OP_ANDGREAT;
		else
			tok->op = OP_AMP;
		break;
	case '|':
		if (op_more(lx, '|'))
			tok->op = OP_ORIF;
		else
			tok->op = op_more(lx, '&') ? OP_PIPEERR : OP_PIPE;
		break;
	case '(':
		tok->op = OP_LPAREN;
		break;
	case ')':
		tok->op = OP_RPAREN;
		break;
	default:
		return lex_op_redir(lx, tok, c, start);
	}
	if ((lx->flags & SH_POSIX) && (tok->op == OP_PIPEERR ||
	    tok->op == OP_ANDGREAT || tok->op == OP_ANDDGREAT))
		return lx_fail(lx, start, lx->pos,
		    "this operator means something else to sh");
	return 0;
}

/* Scan an unquoted here-document line for expansions. */
static int
heredoc_scan(struct parser *p, const char *line, size_t n)
{
	struct lexer	 sub = p->lx;
	struct wbuf	 tmp;
	int		 c, rc = 0;

	sub.s = line;
	sub.len = n;
	sub.pos = 0;
	sub.nest = 0;
	memset(&tmp, 0, sizeof(tmp));
	buf_init(&tmp.text);
	buf_init(&tmp.mask);
	while (rc == 0 && sub.pos < n) {
		c = (unsigned char)line[sub.pos];
		if (c == '\\' && sub.pos + 1 < n && (line[sub.pos + 1] == '$' ||
		    line[sub.pos + 1] == '`' || line[sub.pos + 1] == '\\'))
			sub.pos += 2;
		else if (c == '`')
			rc = lx_fail(&sub, sub.pos, span_end(&sub, sub.pos, '`',
			    '`'), "command substitution in a here-document is "
			    "not allowed");
		else if (c == '$')
			rc = lex_dollar(&sub, &tmp, D_HEREDOC);
		else
			sub.pos++;
	}
	p->lx.failed = sub.failed;
	buf_free(&tmp.text);
	buf_free(&tmp.mask);
	return rc;
}

/* One logical line of a here-document body. Unquoted bodies join lines at
 * an unescaped backslash-newline, as bash's reader does, before the line is
 * compared with the delimiter. Returns -1 at end of input. */
static int
heredoc_line(struct lexer *lx, int quoted, struct buf *line)
{
	int pass = 0;

	buf_reset(line);
	if (lx->pos >= lx->len)
		return -1;
	while (lx->pos < lx->len) {
		char c = lx->s[lx->pos++];

		if (c == '\n' && !pass)
			return 0;
		if (!quoted && !pass && c == '\\') {
			if (lx->pos < lx->len && lx->s[lx->pos] == '\n') {
				lx->pos++;
				continue;
			}
			pass = 1;
		} else
			pass = 0;
		buf_addc(line, c);
	}
	return 0;
}

static int
heredoc_read(struct parser *p, struct heredoc *hd)
{
	struct buf	 line, body;
	size_t		 start = p->lx.pos, skip;
	int		 rc = -1;

	buf_init(&line);
	buf_init(&body);
	while (heredoc_line(&p->lx, hd->quoted, &line) == 0) {
		skip = 0;
		if (line.data == NULL)
			buf_adds(&line, "");
		if (hd->strip)
			while (skip < line.len && line.data[skip] == '\t')
				skip++;
		if (line.len - skip == strlen(hd->delim) &&
		    memcmp(line.data + skip, hd->delim, line.len - skip) == 0) {
			rc = 0;
			break;
		}
		if (!hd->quoted && heredoc_scan(p, line.data + skip,
		    line.len - skip) == -1)
			goto out;
		buf_add(&body, line.data + skip, line.len - skip);
		buf_addc(&body, '\n');
	}
	if (rc == -1)
		lx_fail(&p->lx, start, start, "here-document is not "
		    "terminated");
	else
		p->sc->bodies[hd->body] = buf_steal(&body);
out:
	buf_free(&line);
	buf_free(&body);
	return p->lx.failed ? -1 : rc;
}

static int
heredocs_read(struct parser *p)
{
	size_t	i;
	int	rc = 0;

	for (i = 0; i < p->npend; i++) {
		if (rc == 0 && heredoc_read(p, &p->pend[i]) == -1)
			rc = -1;
		free(p->pend[i].delim);
	}
	p->npend = 0;
	return rc;
}

/* Skip blanks, splices and a comment. */
static void
skip_blank(struct lexer *lx)
{
	int c;

	while ((c = cur(lx)) == ' ' || c == '\t')
		lx->pos++;
	if (c == '#')
		while (lx->pos < lx->len && lx->s[lx->pos] != '\n')
			lx->pos++;
}

static int
lex(struct parser *p, struct token *tok)
{
	struct lexer	*lx = &p->lx;
	int		 c;

	memset(tok, 0, sizeof(*tok));
	skip_blank(lx);
	tok->start = lx->pos;
	if ((c = cur(lx)) == -1) {
		tok->kind = TK_EOF;
		if (p->npend > 0)
			return lx_fail(lx, lx->len, lx->len,
			    "here-document is not terminated");
		return 0;
	}
	if (c == '\n') {
		lx->pos++;
		tok->kind = TK_NL;
		return heredocs_read(p);
	}
	if (is_meta(c))
		return lex_op(lx, tok, c);
	tok->kind = TK_WORD;
	return lex_word(lx, tok);
}

static struct token *
peek(struct parser *p)
{
	if (!p->have) {
		if (lex(p, &p->tok) == -1) {
			free(p->tok.w.text);
			memset(&p->tok, 0, sizeof(p->tok));
			p->tok.kind = TK_EOF;
			p->lx.failed = 1;
		}
		p->have = 1;
	}
	return &p->tok;
}

/* Take the current token; a word's text now belongs to the caller. */
static struct token
take(struct parser *p)
{
	struct token t;

	peek(p);
	t = p->tok;
	memset(&p->tok, 0, sizeof(p->tok));
	p->have = 0;
	return t;
}

static int
fail_tok(struct parser *p, const char *why)
{
	struct token *t = peek(p);

	if (t->kind == TK_EOF)
		return lx_fail(&p->lx, p->lx.len, p->lx.len, why);
	return lx_fail(&p->lx, t->start, frag_end(&p->lx, t->start), why);
}

static int
is_op(struct parser *p, enum op op)
{
	struct token *t = peek(p);

	return !p->lx.failed && t->kind == TK_OP && t->op == op;
}

/* A reserved word: unquoted, the whole word, where a command may start. */
static int
is_word(struct parser *p, const char *w)
{
	struct token *t = peek(p);

	return !p->lx.failed && t->kind == TK_WORD &&
	    !(t->w.flags & SH_W_QUOTED) && strcmp(t->w.text, w) == 0;
}

static int
expect_word(struct parser *p, const char *w)
{
	struct token t;

	if (!is_word(p, w)) {
		char why[64];

		snprintf(why, sizeof(why), "syntax error: expected \"%s\"", w);
		return fail_tok(p, why);
	}
	t = take(p);
	free(t.w.text);
	return 0;
}

static void
skip_nl(struct parser *p)
{
	while (!p->lx.failed && peek(p)->kind == TK_NL)
		take(p);
}

static int
is_redir_op(enum op op)
{
	return op >= OP_LESS;
}

static struct sh_cmd *
cmd_new(struct parser *p)
{
	struct sh_script *sc = p->sc;

	sc->cmds = xreallocarray(sc->cmds, sc->ncmds + 1, sizeof(*sc->cmds));
	memset(&sc->cmds[sc->ncmds], 0, sizeof(*sc->cmds));
	return &sc->cmds[sc->ncmds++];
}

static void
word_push(struct sh_word **v, size_t *n, struct sh_word w)
{
	*v = xreallocarray(*v, *n + 1, sizeof(**v));
	(*v)[(*n)++] = w;
}

static const enum sh_redir_op redir_map[] = {
	[OP_LESS] = SH_R_IN, [OP_GREAT] = SH_R_OUT, [OP_DGREAT] = SH_R_APPEND,
	[OP_CLOBBER] = SH_R_CLOBBER, [OP_LESSGREAT] = SH_R_RDWR,
	[OP_ANDGREAT] = SH_R_OUTERR, [OP_ANDDGREAT] = SH_R_APPERR,
	[OP_LESSAND] = SH_R_DUPIN, [OP_GREATAND] = SH_R_DUPOUT,
	[OP_DLESS] = SH_R_HEREDOC, [OP_DLESSDASH] = SH_R_HEREDOC,
	[OP_TLESS] = SH_R_HERESTR
};

/* The here-document's delimiter is its word after quote removal, never
 * expanded; a quoted delimiter makes the body literal. */
static int
heredoc_add(struct parser *p, struct sh_redir *r, int strip, size_t start)
{
	struct sh_script	*sc = p->sc;
	struct heredoc		*hd;

	if (r->target.flags & (SH_W_PARAM | SH_W_LOCALE | SH_W_ODD))
		return lx_fail(&p->lx, start, frag_end(&p->lx, start),
		    "a here-document delimiter must be plain text");
	sc->bodies = xreallocarray(sc->bodies, sc->nbodies + 1,
	    sizeof(*sc->bodies));
	sc->bodies[sc->nbodies] = NULL;
	r->body = sc->nbodies++;
	p->pend = xreallocarray(p->pend, p->npend + 1, sizeof(*p->pend));
	hd = &p->pend[p->npend++];
	hd->delim = xstrdup(r->target.text);
	hd->quoted = (r->target.flags & SH_W_QUOTED) != 0;
	hd->strip = strip;
	hd->body = r->body;
	return 0;
}

static int
parse_redir(struct parser *p, struct sh_cmd *c, int fd)
{
	struct token	 op = take(p), w;
	struct sh_redir	 r;

	memset(&r, 0, sizeof(r));
	r.fd = fd;
	r.op = redir_map[op.op];
	if (peek(p)->kind != TK_WORD)
		return fail_tok(p, "syntax error: a redirection needs a "
		    "target");
	w = take(p);
	r.target = w.w;
	c->redirs = xreallocarray(c->redirs, c->nredirs + 1,
	    sizeof(*c->redirs));
	c->redirs[c->nredirs++] = r;
	if (r.op == SH_R_HEREDOC)
		return heredoc_add(p, &c->redirs[c->nredirs - 1],
		    op.op == OP_DLESSDASH, w.start);
	return 0;
}

/* A redirection at the current token, N> forms included; 0 if none. */
static int
maybe_redir(struct parser *p, struct sh_cmd *c)
{
	struct token	*t = peek(p), w;
	char		*e;
	long		 fd;

	if (p->lx.failed)
		return -1;
	if (t->kind == TK_OP && is_redir_op(t->op))
		return parse_redir(p, c, -1) == -1 ? -1 : 1;
	if (t->kind != TK_WORD || !t->adj_redir)
		return 0;
	if (t->fdvar)
		return fail_tok(p, "named file descriptors ({var}>) are not "
		    "allowed");
	if (t->w.flags != 0 || t->w.text[0] == '\0' ||
	    strspn(t->w.text, "0123456789") != strlen(t->w.text))
		return 0;
	fd = strtol(t->w.text, &e, 10);
	w = take(p);
	free(w.w.text);
	if (peek(p)->kind != TK_OP || !is_redir_op(p->tok.op))
		return fail_tok(p, "syntax error after a descriptor number");
	return parse_redir(p, c, fd > 0xffff ? 0xffff : (int)fd) == -1 ?
	    -1 : 1;
}

/* Words and redirections of one simple command. */
static int
parse_simple(struct parser *p)
{
	struct sh_cmd	 c;
	struct token	*t, w;
	int		 r;

	memset(&c, 0, sizeof(c));
	for (;;) {
		if ((r = maybe_redir(p, &c)) == -1)
			goto fail;
		if (r == 1)
			continue;
		t = peek(p);
		if (t->kind != TK_WORD)
			break;
		if (c.nwords == 0 && t->assign == 2) {
			fail_tok(p, "array assignments are not allowed");
			goto fail;
		}
		w = take(p);
		if (c.nwords == 0 && w.assign == 1)
			word_push(&c.assigns, &c.nassigns, w.w);
		else
			word_push(&c.words, &c.nwords, w.w);
		if (is_op(p, OP_LPAREN)) {
			if (c.nwords == 0)
				fail_tok(p, "array assignments are not "
				    "allowed");
			else if (c.nwords == 1 && c.nassigns == 0)
				fail_tok(p, "function definitions are not "
				    "allowed");
			else
				fail_tok(p, "syntax error near \"(\"");
			goto fail;
		}
	}
	if (p->lx.failed)
		goto fail;
	*cmd_new(p) = c;
	return 0;
fail:
	*cmd_new(p) = c;	/* freed with the script */
	return -1;
}

/* Redirections after a compound command apply to all of it. */
static int
parse_trailing_redirs(struct parser *p)
{
	struct sh_cmd	c;
	int		r;

	memset(&c, 0, sizeof(c));
	while ((r = maybe_redir(p, &c)) == 1)
		;
	if (c.nredirs > 0 || r == -1)
		*cmd_new(p) = c;
	return r == -1 || p->lx.failed ? -1 : 0;
}

static int
parse_body(struct parser *p, const char *open, const char *close)
{
	if (expect_word(p, open) == -1 || parse_list(p) == -1)
		return -1;
	return expect_word(p, close);
}

static int
parse_if_rest(struct parser *p)
{
	for (;;) {
		if (expect_word(p, "then") == -1 || parse_list(p) == -1)
			return -1;
		if (!is_word(p, "elif"))
			break;
		expect_word(p, "elif");
		if (parse_list(p) == -1)
			return -1;
	}
	if (is_word(p, "else")) {
		expect_word(p, "else");
		if (parse_list(p) == -1)
			return -1;
	}
	return expect_word(p, "fi");
}

static int
valid_name(const char *s)
{
	if (!is_name_start((unsigned char)*s))
		return 0;
	while (is_name((unsigned char)*s))
		s++;
	return *s == '\0';
}

static int
parse_for(struct parser *p)
{
	struct token	 t;
	struct sh_cmd	*c;

	if (is_op(p, OP_LPAREN))
		return fail_tok(p, "arithmetic for loops are not allowed");
	if (peek(p)->kind != TK_WORD || p->tok.w.flags != 0 ||
	    !valid_name(p->tok.w.text))
		return fail_tok(p, "syntax error: bad for loop variable");
	t = take(p);
	c = cmd_new(p);
	c->for_var = t.w.text;
	skip_nl(p);
	if (is_word(p, "in")) {
		expect_word(p, "in");
		while (peek(p)->kind == TK_WORD) {
			t = take(p);
			free(t.w.text);
		}
		if (!is_op(p, OP_SEMI) && peek(p)->kind != TK_NL)
			return fail_tok(p, "syntax error in a for loop");
		take(p);
	} else if (is_op(p, OP_SEMI))
		take(p);
	skip_nl(p);
	if (parse_body(p, "do", "done") == -1)
		return -1;
	return 0;
}

static int
parse_case_item(struct parser *p)
{
	struct token t;

	if (is_op(p, OP_LPAREN))
		take(p);
	for (;;) {
		if (peek(p)->kind != TK_WORD)
			return fail_tok(p, "syntax error in a case pattern");
		t = take(p);
		free(t.w.text);
		if (!is_op(p, OP_PIPE))
			break;
		take(p);
	}
	if (!is_op(p, OP_RPAREN))
		return fail_tok(p, "syntax error in a case pattern");
	take(p);
	return parse_list(p);
}

static int
parse_case(struct parser *p)
{
	struct token t;

	if (peek(p)->kind != TK_WORD)
		return fail_tok(p, "syntax error in a case command");
	t = take(p);
	free(t.w.text);
	skip_nl(p);
	if (expect_word(p, "in") == -1)
		return -1;
	for (;;) {
		skip_nl(p);
		if (p->lx.failed)
			return -1;
		if (is_word(p, "esac"))
			break;
		if (parse_case_item(p) == -1)
			return -1;
		if (!is_op(p, OP_DSEMI) && !is_op(p, OP_SEMIAMP) &&
		    !is_op(p, OP_DSEMIAMP))
			break;
		take(p);
	}
	return expect_word(p, "esac");
}

/* Reserved words that start a command we refuse. */
static const char *refused_words[][2] = {
	{ "function", "function definitions are not allowed" },
	{ "select", "select loops are not supported" },
	{ "coproc", "coprocesses are not allowed" },
	{ "[[", "[[ .. ]] is not supported; use [ .. ]" },
	{ "]]", "syntax error" },
	{ "then", "syntax error" }, { "elif", "syntax error" },
	{ "else", "syntax error" }, { "fi", "syntax error" },
	{ "do", "syntax error" }, { "done", "syntax error" },
	{ "esac", "syntax error" }, { "}", "syntax error" },
	{ "in", "syntax error" }
};

static int
parse_compound(struct parser *p, const char *kw)
{
	struct token	t = take(p);
	int		r;

	free(t.w.text);
	if (strcmp(kw, "{") == 0)
		r = parse_list(p) == -1 ? -1 : expect_word(p, "}");
	else if (strcmp(kw, "if") == 0)
		r = parse_list(p) == -1 ? -1 : parse_if_rest(p);
	else if (strcmp(kw, "while") == 0 || strcmp(kw, "until") == 0)
		r = parse_list(p) == -1 ? -1 : parse_body(p, "do", "done");
	else if (strcmp(kw, "for") == 0)
		r = parse_for(p);
	else
		r = parse_case(p);
	return r == -1 ? -1 : parse_trailing_redirs(p);
}

static int
parse_command_in(struct parser *p)
{
	static const char *kw[] = { "{", "if", "while", "until", "for",
	    "case" };
	struct token	*t = peek(p);
	size_t		 i;

	if (p->lx.failed)
		return -1;
	if (t->kind == TK_OP && t->op == OP_LPAREN) {
		if (cur(&p->lx) == '(')
			return fail_tok(p, "arithmetic commands (( .. )) are "
			    "not allowed");
		take(p);
		if (parse_list(p) == -1)
			return -1;
		if (!is_op(p, OP_RPAREN))
			return fail_tok(p, "syntax error: expected \")\"");
		take(p);
		return parse_trailing_redirs(p);
	}
	for (i = 0; i < nitems(kw); i++)
		if (is_word(p, kw[i]))
			return parse_compound(p, kw[i]);
	for (i = 0; i < nitems(refused_words); i++)
		if (is_word(p, refused_words[i][0]))
			return fail_tok(p, refused_words[i][1]);
	if (t->kind == TK_WORD || (t->kind == TK_OP && is_redir_op(t->op)))
		return parse_simple(p);
	return fail_tok(p, "syntax error");
}

static int
parse_command(struct parser *p)
{
	int r;

	if (++p->depth > SH_MAX_DEPTH)
		return fail_tok(p, "commands are nested too deeply");
	r = parse_command_in(p);
	p->depth--;
	return r;
}

static int
parse_pipeline(struct parser *p)
{
	struct token t;

	while (is_word(p, "!")) {
		t = take(p);
		free(t.w.text);
	}
	for (;;) {
		if (parse_command(p) == -1)
			return -1;
		if (!is_op(p, OP_PIPE) && !is_op(p, OP_PIPEERR))
			return 0;
		take(p);
		skip_nl(p);
	}
}

static int
parse_and_or(struct parser *p)
{
	for (;;) {
		if (parse_pipeline(p) == -1)
			return -1;
		if (!is_op(p, OP_ANDIF) && !is_op(p, OP_ORIF))
			return 0;
		take(p);
		skip_nl(p);
	}
}

/* Where a list ends and its caller takes over. */
static int
list_end(struct parser *p)
{
	static const char *ends[] = { "then", "elif", "else", "fi", "do",
	    "done", "esac", "}" };
	struct token	*t = peek(p);
	size_t		 i;

	if (p->lx.failed || t->kind == TK_EOF)
		return 1;
	if (t->kind == TK_OP)
		return t->op == OP_RPAREN || t->op == OP_DSEMI ||
		    t->op == OP_SEMIAMP || t->op == OP_DSEMIAMP;
	for (i = 0; i < nitems(ends); i++)
		if (is_word(p, ends[i]))
			return 1;
	return 0;
}

static int
parse_list(struct parser *p)
{
	for (;;) {
		skip_nl(p);
		if (list_end(p))
			return p->lx.failed ? -1 : 0;
		if (parse_and_or(p) == -1)
			return -1;
		if (is_op(p, OP_SEMI) || is_op(p, OP_AMP))
			take(p);
		else if (peek(p)->kind != TK_NL)
			return p->lx.failed ? -1 : 0;
	}
}

static void
cmd_free(struct sh_cmd *c)
{
	size_t i;

	for (i = 0; i < c->nassigns; i++)
		free(c->assigns[i].text);
	for (i = 0; i < c->nwords; i++)
		free(c->words[i].text);
	for (i = 0; i < c->nredirs; i++)
		free(c->redirs[i].target.text);
	free(c->assigns);
	free(c->words);
	free(c->redirs);
	free(c->for_var);
}

void
sh_script_free(struct sh_script *sc)
{
	size_t i;

	for (i = 0; i < sc->ncmds; i++)
		cmd_free(&sc->cmds[i]);
	for (i = 0; i < sc->nbodies; i++)
		free(sc->bodies[i]);
	free(sc->cmds);
	free(sc->bodies);
	memset(sc, 0, sizeof(*sc));
}

int
sh_parse(const char *src, size_t len, int flags, struct sh_script *out,
    struct sh_error *err)
{
	struct parser	p;
	const char	*nul;
	size_t		i;

	memset(out, 0, sizeof(*out));
	memset(err, 0, sizeof(*err));
	memset(&p, 0, sizeof(p));
	p.lx.s = src;
	p.lx.len = len;
	p.lx.flags = flags;
	p.lx.err = err;
	p.sc = out;
	if (len > SH_MAX_INPUT) {
		sh_quote(err->what, sizeof(err->what), src, len, SH_MAX_WHAT);
		snprintf(err->why, sizeof(err->why), "the command line is "
		    "longer than %d bytes", SH_MAX_INPUT);
		return -1;
	}
	if ((nul = memchr(src, '\0', len)) != NULL) {
		lx_fail(&p.lx, 0, (size_t)(nul - src), "the command line "
		    "contains a NUL byte");
		return -1;
	}
	if (parse_list(&p) == 0 && peek(&p)->kind != TK_EOF)
		fail_tok(&p, "syntax error");
	if (p.have)
		free(p.tok.w.text);
	for (i = 0; i < p.npend; i++)
		free(p.pend[i].delim);
	free(p.pend);
	if (p.lx.failed) {
		if (err->why[0] == '\0')
			snprintf(err->why, sizeof(err->why), "syntax error");
		sh_script_free(out);
		return -1;
	}
	return 0;
}

int
sh_word_literal(const struct sh_word *w)
{
	return (w->flags & SH_W_NONLIT) == 0;
}

size_t
sh_assign_name_len(const char *s)
{
	size_t i = 0;

	while (is_name((unsigned char)s[i]))
		i++;
	return i;
}
