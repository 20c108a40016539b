package pgsink

import (
	"github.com/streamproc/processor/sink"
	"strconv"
	"strings"
	"unicode/utf8"
)

// paramKind is what a named parameter of the statement carries.
type paramKind uint8

const (
	paramKey        paramKind = iota // @key: the key, bytea
	paramKeyText                     // @key_text: the key as UTF-8 text
	paramValue                       // @value: the value as text holding JSON (cast it: @value::jsonb)
	paramValueText                   // @value_text: the value as UTF-8 text
	paramValueBytes                  // @value_bytes: the value, bytea
	paramTopic                       // @topic: the input record's topic
	paramPartition                   // @partition: its partition, int
	paramOffset                      // @offset: its offset, bigint
	paramSeq                         // @seq: the output's index among its input's outputs, int
	paramTimestamp                   // @timestamp: the record's timestamp, timestamptz
	paramHeader                      // @header_<name>: the first header <name>'s value as text
)

// namedParams are the statement's parameters and the SQL type each is sent
// as. Every parameter is written as ($n::type), so that its type does not
// depend on where it stands: PostgreSQL converts from there (an int8 into
// an int column, a timestamptz into a timestamp one), and anything else
// takes a cast (@value::jsonb, @key_text::int).
var namedParams = map[string]struct {
	kind    paramKind
	sqlType string
}{
	"key":         {paramKey, "bytea"},
	"key_text":    {paramKeyText, "text"},
	"value":       {paramValue, "text"},
	"value_text":  {paramValueText, "text"},
	"value_bytes": {paramValueBytes, "bytea"},
	"topic":       {paramTopic, "text"},
	"partition":   {paramPartition, "int4"},
	"offset":      {paramOffset, "int8"},
	"seq":         {paramSeq, "int4"},
	"timestamp":   {paramTimestamp, "timestamptz"},
}

// headerPrefix starts the name of a header parameter.
const headerPrefix = "header_"

// paramsWant is ConfigError.Want for a statement whose parameters are not
// the sink's.
const paramsWant = "SQL with named parameters among @key, @key_text, @value (text holding JSON: @value::jsonb), @value_text, @value_bytes, @topic, @partition, @offset, @seq, @timestamp and @header_<name> ([A-Za-z0-9_])"

// statementKinds are the first words a statement may start with: one that
// writes (or reads) rows. Transaction control would end the sink's
// transaction from within, so it is refused.
var statementKinds = []string{"INSERT", "UPDATE", "DELETE", "MERGE", "WITH", "SELECT", "VALUES", "CALL"}

// param is one positional parameter of the rewritten statement.
type param struct {
	kind   paramKind
	header string // the header's name, for paramHeader
}

// statement is the user's statement with its named parameters replaced by
// positional ones.
type statement struct {
	src       string  // as given
	sql       string  // with ($n::type) for each named parameter
	params    []param // $1, $2, ...
	wantsJSON bool    // @value is used: a value must be JSON
}

// parseStatement finds src's named parameters (@name outside string
// literals, quoted identifiers, comments and dollar-quoted strings; an @
// right after another @ belongs to an operator such as @@) and returns the
// statement with positional ones in their place. An unknown name, a
// positional parameter, an unterminated literal or comment, or a first word
// that is not one of statementKinds is a *settings.Error.
func parseStatement(src string) (*statement, error) {
	bad := func(why string) error {
		return settingError(SettingStatement, src, paramsWant+"; "+why)
	}
	first := firstWord(src)
	ok := false
	for _, k := range statementKinds {
		if strings.EqualFold(first, k) {
			ok = true
		}
	}
	if !ok {
		return nil, bad("it must start with one of " + strings.Join(statementKinds, ", ") + ", not " + strconv.Quote(first))
	}
	st := &statement{src: src}
	index := map[string]int{} // name -> $n
	var out strings.Builder
	out.Grow(len(src) + 32)
	for i := 0; i < len(src); {
		j, why := verbatim(src, i)
		if why != "" {
			return nil, bad(why)
		}
		if j > i {
			out.WriteString(src[i:j])
			i = j
			continue
		}
		var next byte
		if i+1 < len(src) {
			next = src[i+1]
		}
		if src[i] != '@' || (i > 0 && src[i-1] == '@') || !identStart(next) {
			out.WriteByte(src[i])
			i++
			continue
		}
		if i, why = st.param(src, i, index, &out); why != "" {
			return nil, bad(why)
		}
	}
	st.sql = out.String()
	return st, nil
}

// verbatim returns the end of the string literal, quoted identifier,
// comment or dollar-quoted string that starts at src[i], which the
// statement keeps as it is; i when none starts there; and why, when one
// is not terminated or src[i] starts a positional parameter.
func verbatim(src string, i int) (int, string) {
	c := src[i]
	var next byte
	if i+1 < len(src) {
		next = src[i+1]
	}
	switch {
	case c == '\'':
		// E'...' strings take backslash escapes; others do not
		// (standard_conforming_strings, on since PostgreSQL 9.1).
		escapes := i > 0 && (src[i-1] == 'E' || src[i-1] == 'e') && (i < 2 || !identChar(src[i-2]))
		if j, ok := skipQuoted(src, i, '\'', escapes); ok {
			return j, ""
		}
		return i, "a string literal is not terminated"
	case c == '"':
		if j, ok := skipQuoted(src, i, '"', false); ok {
			return j, ""
		}
		return i, "a quoted identifier is not terminated"
	case c == '-' && next == '-':
		j := strings.IndexByte(src[i:], '\n')
		if j < 0 {
			return len(src), ""
		}
		return i + j, ""
	case c == '/' && next == '*':
		if j, ok := skipBlockComment(src, i); ok {
			return j, ""
		}
		return i, "a /* comment */ is not terminated"
	case c == '$' && (i == 0 || !identChar(src[i-1])):
		if next >= '0' && next <= '9' {
			return i, "positional parameters such as $1 are not supported"
		}
		if j, ok := skipDollarQuoted(src, i); ok {
			return j, ""
		}
		return i, "a $tag$ string is not terminated"
	}
	return i, ""
}

// param writes the positional parameter, with its cast, of the named one
// at src[i] (its @) to out, numbering each name once in index, and
// returns where the name ends; or why it is not one.
func (st *statement) param(src string, i int, index map[string]int, out *strings.Builder) (int, string) {
	j := i + 1
	for j < len(src) && paramChar(src[j]) {
		j++
	}
	name := src[i+1 : j]
	p, sqlType, ok := lookupParam(name)
	if !ok {
		return i, "@" + name + " is not one"
	}
	if p.kind == paramValue {
		st.wantsJSON = true
	}
	n, seen := index[name]
	if !seen {
		st.params = append(st.params, p)
		n = len(st.params)
		index[name] = n
	}
	out.WriteString("($")
	out.WriteString(strconv.Itoa(n))
	out.WriteString("::")
	out.WriteString(sqlType)
	out.WriteByte(')')
	return j, ""
}

// lookupParam returns the parameter called name and its SQL type.
func lookupParam(name string) (param, string, bool) {
	if p, ok := namedParams[name]; ok {
		return param{kind: p.kind}, p.sqlType, true
	}
	if h, ok := strings.CutPrefix(name, headerPrefix); ok && h != "" {
		return param{kind: paramHeader, header: h}, "text", true
	}
	return param{}, "", false
}

func identStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func paramChar(c byte) bool { return identStart(c) || (c >= '0' && c <= '9') }

// identChar tells whether c can be part of an SQL identifier (including
// its non-ASCII bytes and $, which PostgreSQL allows after the first
// character).
func identChar(c byte) bool { return paramChar(c) || c == '$' || c >= utf8.RuneSelf }

// skipQuoted returns the index after the literal or quoted identifier that
// starts with the quote q at src[i]; a doubled quote is one quote inside,
// and with escapes a backslash escapes the next byte.
func skipQuoted(src string, i int, q byte, escapes bool) (int, bool) {
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			if escapes {
				j++
			}
		case q:
			if j+1 < len(src) && src[j+1] == q {
				j++
				continue
			}
			return j + 1, true
		}
	}
	return 0, false
}

// skipBlockComment returns the index after the (nestable) /* comment */
// that starts at src[i].
func skipBlockComment(src string, i int) (int, bool) {
	depth := 0
	for j := i; j+1 < len(src); j++ {
		switch {
		case src[j] == '/' && src[j+1] == '*':
			depth++
			j++
		case src[j] == '*' && src[j+1] == '/':
			depth--
			j++
			if depth == 0 {
				return j + 1, true
			}
		}
	}
	return 0, false
}

// skipDollarQuoted returns the index after the $tag$...$tag$ string that
// starts at src[i], or i+1 when the $ there does not open one.
func skipDollarQuoted(src string, i int) (int, bool) {
	j := i + 1
	if j < len(src) && identStart(src[j]) {
		for j < len(src) && paramChar(src[j]) {
			j++
		}
	}
	if j >= len(src) || src[j] != '$' {
		return i + 1, true // a lone $: not a string
	}
	tag := src[i : j+1]
	end := strings.Index(src[j+1:], tag)
	if end < 0 {
		return 0, false
	}
	return j + 1 + end + len(tag), true
}

// firstWord returns the statement's first word, after blanks, comments
// and opening parentheses.
func firstWord(src string) string {
	i := 0
	for i < len(src) {
		switch c := src[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '(':
			i++
		case strings.HasPrefix(src[i:], "--"):
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				return ""
			}
			i += j
		case strings.HasPrefix(src[i:], "/*"):
			j, ok := skipBlockComment(src, i)
			if !ok {
				return ""
			}
			i = j
		default:
			j := i
			for j < len(src) && identStart(src[j]) {
				j++
			}
			if j == i {
				return src[i : i+1]
			}
			return src[i:j]
		}
	}
	return ""
}

// args returns the statement's arguments for row r, in a new slice (a
// pgx.Batch keeps them until it is sent). A value that is not JSON when
// the statement uses @value is an error.
func (st *statement) args(r *sink.Row) ([]any, error) {
	if st.wantsJSON && r.Value != nil && !validJSON(r.Value) {
		return nil, errNotJSON
	}
	args := make([]any, len(st.params))
	for i, p := range st.params {
		switch p.kind {
		case paramKey:
			args[i] = r.Key
		case paramKeyText:
			if r.Key != nil {
				args[i] = string(r.Key)
			}
		case paramValue, paramValueText:
			if r.Value != nil {
				args[i] = string(r.Value)
			}
		case paramValueBytes:
			args[i] = r.Value
		case paramTopic:
			args[i] = r.Topic
		case paramPartition:
			args[i] = r.Partition
		case paramOffset:
			args[i] = r.Offset
		case paramSeq:
			args[i] = int32(r.Seq)
		case paramTimestamp:
			if !r.Timestamp.IsZero() {
				args[i] = r.Timestamp
			}
		case paramHeader:
			for _, h := range r.Headers {
				if h.Key == p.header {
					if h.Value != nil {
						args[i] = string(h.Value)
					}
					break
				}
			}
		}
	}
	return args, nil
}
