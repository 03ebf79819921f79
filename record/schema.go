package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Column is one column of a table.
type Column struct {
	Name    string
	Type    DataType
	Comment string // "" means no comment
}

// String returns the column as ParseColumns reads it back: the name (in
// backticks when it is not a plain identifier), the canonical type, and
// COMMENT '...' when there is a comment.
func (c Column) String() string {
	var b strings.Builder
	b.WriteString(quoteIdent(c.Name))
	b.WriteByte(' ')
	b.WriteString(c.Type.String())
	if c.Comment != "" {
		b.WriteString(" COMMENT '")
		b.WriteString(strings.ReplaceAll(c.Comment, "'", "''"))
		b.WriteByte('\'')
	}
	return b.String()
}

// FormatColumns returns columns in the DDL form ParseColumns reads:
// "a BIGINT NOT NULL, b STRING".
func FormatColumns(cols []Column) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = c.String()
	}
	return strings.Join(parts, ", ")
}

// Schema is the columns of a table and its primary key (empty for a log
// table). Column ids are the column positions: Strom has no schema evolution
// yet, and Fluss assigns ids 0..n-1 to the columns of a new schema.
type Schema struct {
	Columns    []Column
	PrimaryKey []string
}

// Column returns the column called name (case-sensitive, as in Fluss), its
// position, and whether it exists.
func (s Schema) Column(name string) (Column, int, bool) {
	for i, c := range s.Columns {
		if c.Name == name {
			return c, i, true
		}
	}
	return Column{}, -1, false
}

// ColumnNames returns the column names in order.
func (s Schema) ColumnNames() []string {
	names := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		names[i] = c.Name
	}
	return names
}

// HasPrimaryKey reports whether the schema declares a primary key.
func (s Schema) HasPrimaryKey() bool { return len(s.PrimaryKey) > 0 }

// PrimaryKeyIndexes returns the positions of the primary-key columns, in key
// order; -1 for a name that is not a column.
func (s Schema) PrimaryKeyIndexes() []int {
	out := make([]int, len(s.PrimaryKey))
	for i, name := range s.PrimaryKey {
		_, out[i], _ = s.Column(name)
	}
	return out
}

func (s Schema) clone() Schema {
	return Schema{Columns: slices.Clone(s.Columns), PrimaryKey: slices.Clone(s.PrimaryKey)}
}

// ReservedColumnNames are the names a column may not have: Fluss's system
// columns (__offset, __timestamp, __bucket, and the $changelog/$binlog
// metadata columns _change_type, _log_offset, _commit_timestamp) and the
// metadata fields Strom adds to rows rendered as JSON (_offset, _timestamp,
// _bucket, _change_type).
var ReservedColumnNames = []string{
	"__offset", "__timestamp", "__bucket",
	"_change_type", "_log_offset", "_commit_timestamp",
	"_offset", "_timestamp", "_bucket",
}

// columnNameProblem returns why name cannot be a column name, or "". Fluss
// itself only rejects duplicates and its system columns; Strom also rejects
// names that would be unprintable or unusable in JSON rows.
func columnNameProblem(name string) string {
	switch {
	case name == "":
		return "column name is empty"
	case !utf8.ValidString(name):
		return fmt.Sprintf("column name %q is not valid UTF-8", name)
	case strings.TrimSpace(name) != name:
		return fmt.Sprintf("column name %q has leading or trailing white space; remove it", name)
	case strings.ContainsFunc(name, unicode.IsControl):
		return fmt.Sprintf("column name %q contains a control character", name)
	case slices.Contains(ReservedColumnNames, name):
		return fmt.Sprintf("column name %q is reserved for a system column; reserved names are %s; rename the column",
			name, strings.Join(ReservedColumnNames, ", "))
	}
	return ""
}

// isPlainIdent reports whether name can be written without backticks: a
// letter or '_' followed by letters, digits, '_' or '$'.
func isPlainIdent(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		ok := r == '_' || unicode.IsLetter(r) || i > 0 && (r == '$' || unicode.IsDigit(r))
		if !ok {
			return false
		}
	}
	return true
}

// quoteIdent returns name as ParseColumns reads it: bare when it is a plain
// identifier that cannot be mistaken for a table constraint, else quoted.
func quoteIdent(name string) string {
	switch {
	case !isPlainIdent(name),
		strings.EqualFold(name, "primary"),
		strings.EqualFold(name, "constraint"),
		strings.EqualFold(name, "watermark"):
		return "`" + strings.ReplaceAll(name, "`", "``") + "`"
	}
	return name
}

// ParseColumns parses a column list in SQL DDL form:
//
//	a BIGINT NOT NULL, b STRING, `c d` DECIMAL(10, 2) COMMENT 'it''s c'
//
// Commas inside parentheses do not split; a name may be quoted with backticks
// (a backtick inside is doubled); a comment is a single-quoted string (a
// quote inside is doubled). Types are read by ParseDataType. Every problem is
// reported, as errors.Join of *InvalidError with Field "columns[i]" (0-based)
// and a reason quoting the column's text.
func ParseColumns(ddl string) ([]Column, error) {
	var p problems
	segs, reason := splitColumns(ddl)
	if reason != "" {
		p.add("columns", "%s", reason)
		return nil, p.err()
	}
	if len(segs) == 1 && strings.TrimSpace(segs[0].text) == "" {
		p.add("columns", "no columns given; write them as \"name TYPE, ...\"")
		return nil, p.err()
	}
	cols := make([]Column, 0, len(segs))
	first := map[string]int{}
	for i, seg := range segs {
		field := fmt.Sprintf("columns[%d]", i)
		text := strings.TrimSpace(seg.text)
		if seg.problem != "" {
			p.add(field, "`%s`: %s", text, seg.problem)
			continue
		}
		if text == "" {
			if i == len(segs)-1 {
				p.add(field, "empty column definition after the last comma; remove the trailing comma")
			} else {
				p.add(field, "empty column definition between two commas")
			}
			continue
		}
		c, reason := parseColumn(text)
		if reason != "" {
			p.add(field, "`%s`: %s", text, reason)
			continue
		}
		if j, dup := first[c.Name]; dup {
			p.add(field, "`%s`: duplicate column name %q (also columns[%d])", text, c.Name, j)
			continue
		}
		first[c.Name] = i
		cols = append(cols, c)
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return cols, nil
}

type columnSegment struct {
	text    string
	problem string // unbalanced parentheses within the segment
}

// splitColumns splits ddl at commas outside parentheses, backticks and
// quotes. An unterminated quote is a problem of the whole list; unbalanced
// parentheses are a problem of the segment they are in.
func splitColumns(ddl string) ([]columnSegment, string) {
	var segs []columnSegment
	start, depth, open := 0, 0, -1
	var bad string
	for i := 0; i < len(ddl); i++ {
		switch ddl[i] {
		case '`', '\'':
			q := ddl[i]
			j := i + 1
			for {
				k := strings.IndexByte(ddl[j:], q)
				if k < 0 {
					what := "backtick"
					if q == '\'' {
						what = "quote"
					}
					return nil, fmt.Sprintf("unterminated %s starting at offset %d of the column list: `%s`", what, i, strings.TrimSpace(ddl[i:]))
				}
				j += k + 1
				if j < len(ddl) && ddl[j] == q { // doubled: an escaped quote
					j++
					continue
				}
				break
			}
			i = j - 1
		case '(':
			if depth == 0 {
				open = i
			}
			depth++
		case ')':
			depth--
			if depth < 0 && bad == "" {
				bad = fmt.Sprintf("unbalanced parentheses: ')' at offset %d of the column list has no matching '('", i)
			}
		case ',':
			if depth == 0 {
				segs = append(segs, columnSegment{ddl[start:i], bad})
				start, bad = i+1, ""
			}
		}
	}
	if depth > 0 && bad == "" {
		bad = fmt.Sprintf("unbalanced parentheses: '(' at offset %d of the column list is never closed", open)
	}
	segs = append(segs, columnSegment{ddl[start:], bad})
	return segs, ""
}

// parseColumn parses "name TYPE [COMMENT 'text']".
func parseColumn(text string) (Column, string) {
	var c Column
	rest := text
	if rest[0] == '`' {
		var b strings.Builder
		i := 1
		for {
			k := strings.IndexByte(rest[i:], '`')
			if k < 0 { // splitColumns guarantees termination
				return c, "unterminated backtick"
			}
			b.WriteString(rest[i : i+k])
			i += k + 1
			if i < len(rest) && rest[i] == '`' {
				b.WriteByte('`')
				i++
				continue
			}
			break
		}
		c.Name, rest = b.String(), rest[i:]
		if rest != "" && !isSpace(rest[0]) {
			return c, fmt.Sprintf("expected white space after the quoted name `%s`", c.Name)
		}
	} else {
		end := strings.IndexFunc(rest, func(r rune) bool { return unicode.IsSpace(r) || r == '(' })
		if end < 0 {
			end = len(rest)
		}
		c.Name, rest = rest[:end], rest[end:]
		upper := strings.ToUpper(c.Name)
		next := strings.ToUpper(firstWord(rest))
		if upper == "PRIMARY" && next == "KEY" || upper == "CONSTRAINT" || upper == "WATERMARK" {
			return c, "table constraints are not columns; give the primary key separately (Schema.PrimaryKey)"
		}
		if !isPlainIdent(c.Name) {
			return c, fmt.Sprintf("column name %q is not a plain identifier; quote it with backticks", c.Name)
		}
	}
	if reason := columnNameProblem(c.Name); reason != "" {
		return c, reason
	}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return c, fmt.Sprintf("missing type for column %q; known types are %s", c.Name, knownTypes)
	}
	typeText := rest
	if k := commentKeyword(rest); k >= 0 {
		typeText = strings.TrimSpace(rest[:k])
		comment, reason := parseComment(strings.TrimSpace(rest[k+len("COMMENT"):]))
		if reason != "" {
			return c, reason
		}
		c.Comment = comment
		if typeText == "" {
			return c, fmt.Sprintf("missing type for column %q before COMMENT", c.Name)
		}
	}
	t, reason := parseDataType(typeText)
	if reason != "" {
		return c, reason
	}
	c.Type = t
	return c, ""
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func firstWord(s string) string {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	end := strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == '(' })
	if end < 0 {
		return s
	}
	return s[:end]
}

// commentKeyword returns the offset of the word COMMENT in s (outside
// quotes), or -1. Type names never contain the word, so the first one is it.
func commentKeyword(s string) int {
	for i := 0; i+len("COMMENT") <= len(s); i++ {
		if s[i] == '\'' {
			return -1 // a quote before any COMMENT: let the type parser complain
		}
		if (i == 0 || !isWordByte(s[i-1])) && strings.EqualFold(s[i:i+len("COMMENT")], "COMMENT") &&
			(i+len("COMMENT") == len(s) || !isWordByte(s[i+len("COMMENT")])) {
			return i
		}
	}
	return -1
}

// parseComment parses a single-quoted string that must make up all of s.
func parseComment(s string) (string, string) {
	if s == "" || s[0] != '\'' {
		return "", "COMMENT must be followed by a single-quoted string, like COMMENT 'text'"
	}
	var b strings.Builder
	i := 1
	for {
		k := strings.IndexByte(s[i:], '\'')
		if k < 0 {
			return "", "unterminated comment string"
		}
		b.WriteString(s[i : i+k])
		i += k + 1
		if i < len(s) && s[i] == '\'' {
			b.WriteByte('\'')
			i++
			continue
		}
		break
	}
	if rest := strings.TrimSpace(s[i:]); rest != "" {
		return "", fmt.Sprintf("unexpected %q after the comment; a comment ends the column", rest)
	}
	return b.String(), ""
}

// schemaJSONVersion is the "version" SchemaJsonSerde writes.
const schemaJSONVersion = 1

// MarshalJSON writes s in the shape of Fluss's SchemaJsonSerde:
//
//	{"version":1,"columns":[{"name":"a","data_type":{"type":"BIGINT","nullable":false},
//	 "comment":"...","id":0},...],"primary_key":["a"],"highest_field_id":0}
//
// "comment" only when there is one, "primary_key" only for a primary-key
// table; "id" is the column's position and "highest_field_id" the last one.
func (s Schema) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"version":%d,"columns":[`, schemaJSONVersion)
	for i, c := range s.Columns {
		if reason := c.Type.problem(); reason != "" {
			return nil, fmt.Errorf("record: marshal schema: column %q: %s", c.Name, reason)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"name":`)
		jsonString(&b, c.Name)
		b.WriteString(`,"data_type":`)
		c.Type.appendJSON(&b)
		if c.Comment != "" {
			b.WriteString(`,"comment":`)
			jsonString(&b, c.Comment)
		}
		fmt.Fprintf(&b, `,"id":%d}`, i)
	}
	b.WriteByte(']')
	if len(s.PrimaryKey) > 0 {
		b.WriteString(`,"primary_key":`)
		appendStrings(&b, s.PrimaryKey)
	}
	fmt.Fprintf(&b, `,"highest_field_id":%d}`, len(s.Columns)-1)
	return b.Bytes(), nil
}

func appendStrings(b *bytes.Buffer, ss []string) {
	b.WriteByte('[')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		jsonString(b, s)
	}
	b.WriteByte(']')
}

type columnJSON struct {
	Name        *string         `json:"name"`
	DataType    *DataType       `json:"data_type"`
	Comment     *string         `json:"comment"`
	ID          *int            `json:"id"`
	AggFunction json.RawMessage `json:"agg_function"`
}

type schemaJSON struct {
	Version        *int         `json:"version"`
	Columns        []columnJSON `json:"columns"`
	PrimaryKey     []string     `json:"primary_key"`
	AutoIncrement  []string     `json:"auto_increment_column"`
	HighestFieldID *int         `json:"highest_field_id"`
}

// UnmarshalJSON reads the shape MarshalJSON writes, and schemas written by
// Fluss before column ids existed (no "id", no "highest_field_id"). It
// rejects what Strom cannot represent yet rather than dropping it: column
// ids that are not the positions, auto-increment columns, and aggregation
// functions.
func (s *Schema) UnmarshalJSON(data []byte) error {
	var j schemaJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("record: schema: %w", err)
	}
	if j.Version != nil && *j.Version != schemaJSONVersion {
		return fmt.Errorf("record: schema: unsupported version %d, want %d", *j.Version, schemaJSONVersion)
	}
	if len(j.AutoIncrement) > 0 {
		return fmt.Errorf("record: schema: auto-increment columns %v are not supported yet", j.AutoIncrement)
	}
	out := Schema{Columns: make([]Column, 0, len(j.Columns))}
	for i, c := range j.Columns {
		if c.Name == nil {
			return fmt.Errorf(`record: schema: column %d: missing "name"`, i)
		}
		if c.DataType == nil {
			return fmt.Errorf(`record: schema: column %q: missing "data_type"`, *c.Name)
		}
		if c.ID != nil && *c.ID != i {
			return fmt.Errorf("record: schema: column %q has id %d; Strom supports only column ids equal to positions (this is %d)",
				*c.Name, *c.ID, i)
		}
		if len(c.AggFunction) > 0 && string(c.AggFunction) != "null" {
			return fmt.Errorf("record: schema: column %q: aggregation functions are not supported yet", *c.Name)
		}
		col := Column{Name: *c.Name, Type: *c.DataType}
		if c.Comment != nil {
			col.Comment = *c.Comment
		}
		out.Columns = append(out.Columns, col)
	}
	if j.HighestFieldID != nil && *j.HighestFieldID != len(out.Columns)-1 {
		return fmt.Errorf("record: schema: highest_field_id %d with %d columns; Strom supports only column ids equal to positions",
			*j.HighestFieldID, len(out.Columns))
	}
	if len(j.PrimaryKey) > 0 {
		out.PrimaryKey = j.PrimaryKey
	}
	*s = out
	return nil
}
