// Package jsonscan reads JSON text where it lies, without decoding it into
// Go values: it checks that bytes are JSON and says where each token and
// value ends, so that a caller can cut an object into its members, copy
// string tokens into other JSON as they are, and decode only the strings
// it needs. It is tern's one JSON scanner: journal checks and cuts
// canonical text with it, render reads event bodies with it.
//
// Two kinds of function, never to be mixed up:
//
//   - Validating: Scanner.String, Number, Literal, Scanner.Value, Valid,
//     Trim and Cursor check every byte against RFC 8259, and also that
//     the bytes of every string are valid UTF-8 (which encoding/json.Valid
//     does not check). They accept nothing encoding/json would refuse,
//     but for one more level of nesting (MaxDepth).
//   - Trusted: SkipString, SkipValue, Walker, Unquote, AppendUnquote and
//     Equal are for text a validating function has accepted; they only
//     find where things end. SkipString, SkipValue and Walker give some
//     answer for any other text, never a panic nor a read out of bounds;
//     Unquote, AppendUnquote and Equal need a valid string token.
//
// Nothing here allocates but Unquote and AppendUnquote, and Cursor.Key
// for a key written with an escape. Everything is safe for concurrent use
// on different values; a Scanner, Cursor or Walker belongs to one
// goroutine.
package jsonscan
