package filter

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Op is a comparison operator.
type Op int

// The operators.
const (
	Eq Op = iota
	Ne
	Lt
	Le
	Gt
	Ge
)

var opNames = [...]string{"=", "!=", "<", "<=", ">", ">="}

func (o Op) String() string { return opNames[o] }

// LitKind is the kind of a literal as written.
type LitKind int

// The literal kinds.
const (
	LitString LitKind = iota
	LitNumber
	LitBool
	LitNull
)

// Literal is a literal as written; Text is the string's content, the
// number's digits or "true"/"false"/"null".
type Literal struct {
	Kind LitKind
	Text string
}

func (l Literal) String() string {
	if l.Kind == LitString {
		return "'" + strings.ReplaceAll(l.Text, "'", "''") + "'"
	}
	return l.Text
}

// Cond is one comparison `Column Op Value`; Pos is the 1-based character
// position of the column in the input, for errors.
type Cond struct {
	Column string
	Op     Op
	Value  Literal
	Pos    int
}

func (c Cond) String() string {
	col := c.Column
	if !isIdent(col) {
		col = "`" + col + "`"
	}
	return fmt.Sprintf("%s %s %s", col, c.Op, c.Value)
}

// Expr is a conjunction of comparisons.
type Expr struct {
	Conds []Cond
}

// String renders e in the filter language (Parse(e.String()) gives e back).
func (e *Expr) String() string {
	parts := make([]string, len(e.Conds))
	for i, c := range e.Conds {
		parts[i] = c.String()
	}
	return strings.Join(parts, " AND ")
}

// SyntaxError reports where the input stops making sense: Pos is the 1-based
// character position of Token ("" at the end of the input).
type SyntaxError struct {
	Pos   int
	Token string
	Msg   string
}

func (e *SyntaxError) Error() string {
	if e.Token == "" {
		return fmt.Sprintf("filter: at position %d (end of input): %s", e.Pos, e.Msg)
	}
	return fmt.Sprintf("filter: at position %d, %q: %s", e.Pos, e.Token, e.Msg)
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokIdent
	tokQuotedIdent
	tokString
	tokNumber
	tokOp
)

type token struct {
	kind tokKind
	text string // identifier, string content, number, operator
	raw  string // as written
	pos  int    // 1-based character position
}

// lexer splits the input into tokens.
type lexer struct {
	src string
	i   int // byte offset
}

func (l *lexer) charPos(byteOff int) int { return utf8.RuneCountInString(l.src[:byteOff]) + 1 }

func (l *lexer) errAt(start int, raw, msg string) *SyntaxError {
	return &SyntaxError{Pos: l.charPos(start), Token: raw, Msg: msg}
}

func (l *lexer) next() (token, error) {
	for l.i < len(l.src) && strings.IndexByte(" \t\r\n", l.src[l.i]) >= 0 {
		l.i++
	}
	start := l.i
	if l.i >= len(l.src) {
		return token{kind: tokEOF, pos: l.charPos(start)}, nil
	}
	c := l.src[l.i]
	tok := func(k tokKind, text string) (token, error) {
		return token{kind: k, text: text, raw: l.src[start:l.i], pos: l.charPos(start)}, nil
	}
	switch {
	case isIdentStart(c):
		for l.i < len(l.src) && isIdentByte(l.src[l.i]) {
			l.i++
		}
		return tok(tokIdent, l.src[start:l.i])
	case c == '`':
		end := strings.IndexByte(l.src[l.i+1:], '`')
		if end < 0 {
			return token{}, l.errAt(start, l.src[start:], "unterminated `quoted column`")
		}
		l.i += end + 2
		if end == 0 {
			return token{}, l.errAt(start, "``", "empty column name")
		}
		return tok(tokQuotedIdent, l.src[start+1:l.i-1])
	case c == '\'':
		var b strings.Builder
		for l.i++; ; l.i++ {
			if l.i >= len(l.src) {
				return token{}, l.errAt(start, l.src[start:], "unterminated string (strings are 'quoted'; double a quote inside: '')")
			}
			if l.src[l.i] == '\'' {
				if l.i+1 < len(l.src) && l.src[l.i+1] == '\'' {
					b.WriteByte('\'')
					l.i++
					continue
				}
				l.i++
				return tok(tokString, b.String())
			}
			b.WriteByte(l.src[l.i])
		}
	case c == '-' || c == '+' || c == '.' || isDigit(c):
		l.i++
		for l.i < len(l.src) {
			d := l.src[l.i]
			// an exponent sign follows e/E only
			if isDigit(d) || d == '.' || d == 'e' || d == 'E' || (d == '-' || d == '+') && (l.src[l.i-1] == 'e' || l.src[l.i-1] == 'E') {
				l.i++
				continue
			}
			break
		}
		raw := l.src[start:l.i]
		if !validNumber(raw) {
			return token{}, l.errAt(start, raw, "malformed number")
		}
		return tok(tokNumber, raw)
	case strings.IndexByte("=!<>", c) >= 0:
		l.i++
		if l.i < len(l.src) && (l.src[l.i] == '=' || c == '<' && l.src[l.i] == '>') {
			l.i++
		}
		raw := l.src[start:l.i]
		switch raw {
		case "=", "==":
			return tok(tokOp, "=")
		case "!=", "<>":
			return tok(tokOp, "!=")
		case "<", "<=", ">", ">=":
			return tok(tokOp, raw)
		}
		return token{}, l.errAt(start, raw, "unknown operator (want = != < <= > >=)")
	}
	_, size := utf8.DecodeRuneInString(l.src[l.i:])
	return token{}, l.errAt(start, l.src[start:start+size], "unexpected character")
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdentByte(c byte) bool  { return isIdentStart(c) || isDigit(c) }

func isIdent(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := range len(s) {
		if !isIdentByte(s[i]) {
			return false
		}
	}
	return !isKeyword(s)
}

func isKeyword(s string) bool {
	switch strings.ToLower(s) {
	case "and", "true", "false", "null":
		return true
	}
	return false
}

// validNumber accepts [+-]digits[.digits][e[+-]digits] (digits on at least
// one side of the point).
func validNumber(s string) bool {
	if s != "" && (s[0] == '-' || s[0] == '+') {
		s = s[1:]
	}
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" && frac == "" || !allDigits(intPart) || !allDigits(frac) || strings.Count(mant, ".") > 1 {
		return false
	}
	if hasExp {
		if exp != "" && (exp[0] == '-' || exp[0] == '+') {
			exp = exp[1:]
		}
		return exp != "" && allDigits(exp)
	}
	return true
}

func allDigits(s string) bool {
	for i := range len(s) {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// Parse parses a filter. It checks syntax only; Bind checks the columns and
// literal types against a schema.
func Parse(src string) (*Expr, error) {
	l := &lexer{src: src}
	var e Expr
	for {
		col, err := l.next()
		if err != nil {
			return nil, err
		}
		switch {
		case col.kind == tokEOF && len(e.Conds) == 0:
			return nil, &SyntaxError{Pos: col.pos, Msg: "empty filter; want column op literal"}
		case col.kind == tokEOF:
			return nil, &SyntaxError{Pos: col.pos, Msg: "expected a column after AND"}
		case col.kind == tokIdent && isKeyword(col.text):
			return nil, l.errAt0(col, "expected a column name, not a keyword (quote it as `"+col.text+"`)")
		case col.kind != tokIdent && col.kind != tokQuotedIdent:
			return nil, l.errAt0(col, "expected a column name")
		}
		op, err := l.next()
		if err != nil {
			return nil, err
		}
		if op.kind != tokOp {
			return nil, l.errAt0(op, "expected a comparison operator (= != < <= > >=)")
		}
		val, err := l.next()
		if err != nil {
			return nil, err
		}
		var lit Literal
		switch {
		case val.kind == tokString:
			lit = Literal{LitString, val.text}
		case val.kind == tokNumber:
			lit = Literal{LitNumber, val.text}
		case val.kind == tokIdent && strings.EqualFold(val.text, "true"), val.kind == tokIdent && strings.EqualFold(val.text, "false"):
			lit = Literal{LitBool, strings.ToLower(val.text)}
		case val.kind == tokIdent && strings.EqualFold(val.text, "null"):
			lit = Literal{LitNull, "null"}
		case val.kind == tokIdent:
			return nil, l.errAt0(val, "expected a literal; quote strings and dates: '"+val.text+"'")
		default:
			return nil, l.errAt0(val, "expected a literal ('string', number, true, false or null)")
		}
		c := Cond{Column: col.text, Op: parseOp(op.text), Value: lit, Pos: col.pos}
		if lit.Kind == LitNull && c.Op != Eq && c.Op != Ne {
			return nil, l.errAt0(op, "null can only be compared with = or !=")
		}
		e.Conds = append(e.Conds, c)
		and, err := l.next()
		if err != nil {
			return nil, err
		}
		if and.kind == tokEOF {
			return &e, nil
		}
		if and.kind != tokIdent || !strings.EqualFold(and.text, "and") {
			return nil, l.errAt0(and, "expected AND or the end of the filter (only AND is supported)")
		}
	}
}

func (l *lexer) errAt0(t token, msg string) *SyntaxError {
	return &SyntaxError{Pos: t.pos, Token: t.raw, Msg: msg}
}

func parseOp(s string) Op {
	for i, n := range opNames {
		if n == s {
			return Op(i)
		}
	}
	panic("filter: unknown operator " + s)
}
