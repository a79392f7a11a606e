package journal

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// MaxTypeLen is the length limit of an event type, in bytes.
const MaxTypeLen = 64

// typeRule is the rule of event types as an error states it; docs/FORMAT.md
// ("Types") states the same.
const typeRule = "a type is 1 to 64 bytes: a lower-case letter (a-z), then lower-case letters, digits, '_', '.' or '-'"

// checkType reports whether t is an event type: a token matching
// [a-z][a-z0-9_.-]* of at most MaxTypeLen bytes. A type is written
// unescaped where a name goes (the "event:" line of a server-sent event, a
// log field), so it must never hold a line break or anything else that
// could end that line; the token rule is the simple form of that. The
// error quotes t, names the first byte that breaks the rule and states it.
func checkType(t string) error {
	if t == "" {
		return errors.New("the type is empty; " + typeRule)
	}
	if len(t) > MaxTypeLen {
		return fmt.Errorf("type %s is %d bytes long; %s", quoteType(t), len(t), typeRule)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if 'a' <= c && c <= 'z' || i > 0 && ('0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			continue
		}
		r, size := utf8.DecodeRuneInString(t[i:])
		what := fmt.Sprintf("%q", r)
		if r == utf8.RuneError && size == 1 {
			what = fmt.Sprintf("0x%02x (not UTF-8)", c)
		}
		return fmt.Errorf("type %s: byte %d is %s; %s", quoteType(t), i+1, what, typeRule)
	}
	return nil
}

// quoteType quotes a type for an error, cut after 72 characters.
func quoteType(t string) string {
	const most = 72
	if utf8.RuneCountInString(t) > most {
		return fmt.Sprintf("%.*q…", most, t)
	}
	return fmt.Sprintf("%q", t)
}
