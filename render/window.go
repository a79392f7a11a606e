package render

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tern-dev/tern/internal/jsonscan"
)

// Window fitting. When the estimated request exceeds the target's window,
// render keeps the most recent units that fit (a unit is a message, or an
// assistant step with the results of its calls, so a call is never split
// from its result), always keeps the last user message, and puts a short
// summary of what it left out at the head, as a user message. A trimmed
// request carries no reasoning. Fitting is one pass from the end: O(n).

// ErrWindowTooSmall means the window cannot hold even the instructions,
// the tool definitions and the last user message.
var ErrWindowTooSmall = errors.New("context window too small")

// WindowError says how small the window was and what had to fit.
type WindowError struct {
	Window   int // the target's window, in estimated tokens
	Fixed    int // instructions, tool definitions and request overhead
	LastUser int // the last user message (0 if there is none)
}

func (e *WindowError) Error() string {
	return fmt.Sprintf("%v: a window of %d tokens cannot hold the instructions and tools (~%d tokens) and the last user message (~%d tokens); it needs at least %d",
		ErrWindowTooSmall, e.Window, e.Fixed, e.LastUser, e.Fixed+e.LastUser)
}

func (e *WindowError) Unwrap() error { return ErrWindowTooSmall }

// maxSummaryBytes bounds the summary's text, so that its room can be
// reserved before knowing what it will say; a tight window gets a shorter
// one.
const maxSummaryBytes = 512

// minSummaryBytes is the shortest summary worth sending.
const minSummaryBytes = 48

// summaryReserve is the most tokens a summary can cost.
const summaryReserve = EventOverhead + (3*maxSummaryBytes+5)/6

// fitted is what window fitting keeps.
type fitted struct {
	units   []*unit // in order
	summary *entry  // a user message describing what was left out, or nil
	dropped int     // journal events left out
	tokens  int     // estimate of the units and the summary
	noRoom  bool    // events were left out, but the window had no room to say so
}

// fit chooses the units of a request whose fixed part costs fixed tokens
// for a window of window tokens (<= 0: unlimited).
func fit(units []unit, fixed, window int) (fitted, error) {
	total := 0
	for i := range units {
		total += units[i].tokens
	}
	all := func() fitted {
		f := fitted{units: make([]*unit, len(units)), tokens: total}
		for i := range units {
			f.units[i] = &units[i]
		}
		return f
	}
	if window <= 0 || fixed+total <= window {
		return all(), nil
	}
	lastUser := -1
	for i := len(units) - 1; i >= 0; i-- {
		if units[i].isUser() {
			lastUser = i
			break
		}
	}
	pinned := 0
	if lastUser >= 0 {
		pinned = units[lastUser].tokens
	}
	if fixed+pinned > window {
		return fitted{}, &WindowError{Window: window, Fixed: fixed, LastUser: pinned}
	}
	// The summary gets its room first, up to summaryReserve; the rest
	// goes to the most recent units.
	reserve := min(summaryReserve, window-fixed-pinned)
	budget := window - fixed - pinned - reserve
	start := len(units)
	for start > 0 {
		i := start - 1
		if i != lastUser {
			if units[i].tokens > budget {
				break
			}
			budget -= units[i].tokens
		}
		start = i
	}
	f := fitted{units: make([]*unit, 0, len(units)-start+1)}
	for i := 0; i < start; i++ {
		if i != lastUser {
			f.dropped += units[i].events
		}
	}
	if lastUser >= 0 && lastUser < start {
		f.units = append(f.units, &units[lastUser])
		f.tokens += units[lastUser].tokens
	}
	for i := start; i < len(units); i++ {
		f.units = append(f.units, &units[i])
		f.tokens += units[i].tokens
	}
	if start > 1 || start == 1 && lastUser != 0 {
		room := 2 * (reserve - EventOverhead - 1) // bytes whose estimate fits the reserve
		if room < minSummaryBytes {
			f.noRoom = true
			return f, nil
		}
		s := clip(summarize(units[:start], lastUser, f.dropped), min(room, maxSummaryBytes))
		f.summary = &entry{kind: entMessage, role: roleUser,
			parts:  []part{{kind: partText, text: jsonString(s)}},
			tokens: EventOverhead + estimateString(s)}
		f.tokens += f.summary.tokens
	}
	return f, nil
}

// summarize writes the summary of the units left out (left, but for the
// pinned unit at index keep): how many events of each kind, which tools
// were called, and how the conversation began.
func summarize(left []unit, keep, events int) string {
	var users, assistants, systems, calls, errs int
	tools := map[string]int{}
	var first []byte
	for i := range left {
		u := &left[i]
		if i == keep {
			continue
		}
		if u.msg != nil {
			switch u.msg.role {
			case roleUser:
				users++
				if first == nil {
					for _, p := range u.msg.parts {
						if p.kind == partText {
							first = p.text
							break
						}
					}
				}
			case roleSystem:
				systems++
			}
			continue
		}
		for _, e := range u.items {
			switch e.kind {
			case entMessage:
				assistants++
			case entCall:
				calls++
				tools[e.name]++
			}
		}
		for _, r := range u.results {
			if r.isError {
				errs++
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[tern: %d earlier %s of this conversation %s left out to fit the context window:",
		events, plural(events, "event", "events"), plural(events, "was", "were"))
	var counts []string
	if users > 0 {
		counts = append(counts, count(users, "user message"))
	}
	if assistants > 0 {
		counts = append(counts, count(assistants, "assistant message"))
	}
	if systems > 0 {
		counts = append(counts, count(systems, "system message"))
	}
	if calls > 0 {
		s := count(calls, "tool call") + " (" + topTools(tools) + ")"
		if errs > 0 {
			s += " with " + count(errs, "error result")
		}
		counts = append(counts, s)
	}
	b.WriteString(" " + strings.Join(counts, ", ") + ".")
	if first != nil {
		b.WriteString(" It began with the user saying: \"" + clip(jsonscan.Unquote(first), 120) + "\"")
	}
	b.WriteString("]")
	return b.String()
}

// topTools names the five most called tools with their counts.
func topTools(tools map[string]int) string {
	names := make([]string, 0, len(tools))
	for n := range tools {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if tools[names[i]] != tools[names[j]] {
			return tools[names[i]] > tools[names[j]]
		}
		return names[i] < names[j]
	})
	var parts []string
	for i, n := range names {
		if i == 5 {
			parts = append(parts, count(len(names)-5, "other tool"))
			break
		}
		parts = append(parts, clip(n, 32)+" "+strconv.Itoa(tools[n])+"x")
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// clip shortens s to at most max bytes on a rune boundary, marking the cut
// with "...".
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
