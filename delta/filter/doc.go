// Package filter parses and evaluates the small row filter language of
// `deltaflow cat --where` and `deltaflow optimize --where`:
//
//	expr    = cond { AND cond }
//	cond    = column op literal
//	op      = "=" | "!=" | "<>" | "<" | "<=" | ">" | ">="
//	literal = 'string' | number | true | false | null
//
// Keywords are case-insensitive; a quote inside a string is doubled ('it”s').
// Columns are top-level schema fields, bare ([A-Za-z_][A-Za-z0-9_]*) or in
// backquotes. `col = null` and `col != null` test for null; any other
// comparison with a null value is false, as in SQL. Dates and timestamps are
// written as quoted strings and compared with the column's type.
//
// Learn Parse (syntax, no schema) and Bound (an Expr checked against a
// schema): Bound.Match filters rows exactly, Bound.MatchPartition prunes by
// partition values and Bound.MayMatch skips files by their statistics,
// conservatively. The package is pure: it only reads delta's types.
package filter
