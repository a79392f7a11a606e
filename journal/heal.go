package journal

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/tern-dev/tern/internal/atomicfile"
)

// HealType is the type of the event with which a machine resolves forks
// of its own chain (see Heal). Its body is a HealBody.
const HealType = "chain.healed"

// HealBody is the body of a chain.healed event: the events of the writing
// machine that are no longer part of its chain, and for each the event
// that carries its content now.
type HealBody struct {
	Replaced []Replacement `json:"replaced"`
}

// Replacement names one event a heal set aside and the event that
// re-appended its content ("" for a heal event, which is not re-appended).
type Replacement struct {
	ID string `json:"id"`
	By string `json:"by"`
}

// ErrNothingToHeal means the machine's chain has no fork or broken link
// to heal.
var ErrNothingToHeal = errors.New("nothing to heal")

// setAside returns the ids that the chain.healed events of one machine's
// chain set aside: every id any of them names, whether or not the heal is
// itself set aside by another, so what is set aside only grows and a later
// heal never brings back a fork an earlier one healed. Only the machine's
// own events are in its chain, so a heal that names another machine's
// events sets nothing of theirs aside (its heals are signed by it: nobody
// else can heal its chain).
//
// One exception: an event whose content a heal signed again after an
// event that turned out to be stale (stale, from staleIn: a heal made
// before the activation that ends that epoch reached the machine) is not
// set aside by that heal. The copy follows what is set aside and cannot be
// read, so the event itself stays readable.
func setAside(chain []*Event, stale map[string]bool) map[string]bool {
	var out map[string]bool
	var afterStale func(id string) bool
	if len(stale) > 0 {
		byID := make(map[string]*Event, len(chain))
		for _, e := range chain {
			byID[e.ID] = e
		}
		memo := map[string]bool{}
		afterStale = func(id string) bool {
			var path []string
			found := false
			for e := byID[id]; e != nil; e = byID[e.Prev] {
				if v, ok := memo[e.ID]; ok {
					found = v
					break
				}
				path = append(path, e.ID)
				if stale[e.ID] {
					found = true
					break
				}
			}
			for _, p := range path {
				memo[p] = found
			}
			return found
		}
	}
	for _, e := range chain {
		if e.Type != HealType {
			continue
		}
		b, ok := readHeal(e.Body)
		if !ok {
			continue
		}
		if out == nil {
			out = map[string]bool{}
		}
		for _, r := range b.Replaced {
			if r.ID == e.ID || afterStale != nil && r.By != "" && !stale[r.ID] && afterStale(r.By) {
				continue
			}
			out[r.ID] = true
		}
	}
	return out
}

// readHeal reads a chain.healed body strictly: an object whose "replaced"
// member (that exact name) is a list of objects, each with a string "id"
// and, if present, a string "by"; other members are ignored. A body of
// another shape names nothing (ok is false).
func readHeal(body []byte) (b HealBody, ok bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return b, false
	}
	var entries []map[string]json.RawMessage
	if raw, has := top["replaced"]; !has || json.Unmarshal(raw, &entries) != nil {
		return b, false
	}
	for _, entry := range entries {
		var r Replacement
		if entry == nil || !isString(entry["id"]) || json.Unmarshal(entry["id"], &r.ID) != nil {
			return HealBody{}, false
		}
		if raw, has := entry["by"]; has && (!isString(raw) || json.Unmarshal(raw, &r.By) != nil) {
			return HealBody{}, false
		}
		b.Replaced = append(b.Replaced, r)
	}
	return b, true
}

// isString reports whether a JSON value is a string.
func isString(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '"' }

// asideDigest summarises the events kept aside from a machine's readable
// line, for version vectors: "" when there are none, else the first 16
// hex digits of the sha256 of their sorted ids, one per line. Two holders
// with the same digest hold the same events aside.
func asideDigest(aside []*Event) string {
	if len(aside) == 0 {
		return ""
	}
	ids := make([]string, len(aside))
	for i, e := range aside {
		ids[i] = e.ID
	}
	slices.Sort(ids)
	h := sha256.New()
	for _, id := range ids {
		h.Write([]byte(id))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Heal returns the events with which machine s.Machine() resolves the
// forks and broken links of its own chain in events, to be appended to
// the journal they came from (see ExtendFile). It is pure.
//
// The chain kept is the readable line continued, at each fork, by the
// branch that reaches the highest seq (the smallest id on a tie). Every
// other event of the machine is set aside: those that are not heals are
// signed again, in total order, after the kept chain's head, with the same
// type, session, turn and body, at epoch 0 (a heal is an offline edit) and
// the given time, once per content (an event an earlier heal signed again
// carries the content of the one it replaced, so two heals of one fork
// made apart do not repeat it); then one chain.healed event names each
// event set aside and the event that carries its content now. Readers leave what a heal set aside out
// of the chain (Check, Readable, VectorOf), so every holder of the heal
// reads the same chain, whatever copies it merged.
//
// Errors: ErrNothingToHeal when the chain is whole; an error naming the
// seq when the chain misses a seq below its top that no event fills (a
// copy that holds it must be merged first: healing without it would fork
// again when it comes back).
func Heal(events []*Event, s Signer, now time.Time) ([]*Event, error) {
	machine := s.Machine()
	var mine []*Event
	var clock uint64
	for _, e := range events {
		clock = max(clock, e.Clock)
		if e.Machine == machine {
			mine = append(mine, e)
		}
	}
	if len(mine) == 0 {
		return nil, fmt.Errorf("heal: machine %s wrote no event here: %w", machine, ErrNothingToHeal)
	}
	slices.SortFunc(mine, bySeq)
	mine = dedupeSorted(mine)
	rules := rulesOf(events)
	c := analyseMachine(mine, rules)
	if len(c.problems) == 0 {
		return nil, fmt.Errorf("heal: the chain of machine %s is whole: %w", machine, ErrNothingToHeal)
	}
	stale := rules.bounds.staleIn(mine)
	replaced := setAside(mine, stale)
	// The events no heal set aside yet. Stale events (written under an
	// epoch after the agent moved on, and what a heal signed again of
	// them) stay aside: a heal neither keeps them nor signs their content
	// again.
	var live []*Event
	for _, e := range mine {
		if !replaced[e.ID] && !stale[e.ID] {
			live = append(live, e)
		}
	}
	// A seq no event holds, live or set aside, may be held elsewhere: a
	// heal without it would fork again when it comes back. A seq held only
	// by events set aside is no hole: the kept line ends below it, and what
	// is live above is signed again.
	for seq, i := uint64(1), 0; i < len(mine); seq++ {
		if mine[i].Seq != seq {
			return nil, fmt.Errorf("heal: machine %s: seq %d is missing here; merge a copy that holds it, then heal", machine, seq)
		}
		for i < len(mine) && mine[i].Seq == seq {
			i++
		}
	}
	kept := longestLine(live)
	onLine := make(map[string]bool, len(kept))
	for _, e := range kept {
		onLine[e.ID] = true
	}
	var redo, drop []*Event
	for _, e := range live {
		switch {
		case onLine[e.ID]:
		case e.Type == HealType:
			drop = append(drop, e)
		default:
			redo = append(redo, e)
		}
	}
	Sort(redo)

	head := Head{}
	if n := len(kept); n > 0 {
		head = Head{Seq: kept[n-1].Seq, ID: kept[n-1].ID}
	}
	var out []*Event
	var body HealBody
	next := func(d Draft, raw []byte) (*Event, error) {
		clock++
		e, err := newEvent(s, Stamp{Seq: head.Seq + 1, Prev: head.ID, Clock: clock, Time: now}, d, raw, nil)
		if err != nil {
			return nil, fmt.Errorf("heal: %w", err)
		}
		head = Head{Seq: e.Seq, ID: e.ID}
		out = append(out, e)
		return e, nil
	}
	// An event an earlier heal signed again carries the content of the
	// event it replaced. Two heals of one fork made apart (copies written
	// under one key) each signed the same content again: it is kept once,
	// by the event that carries it on the kept line, or by the first one
	// signed again now.
	origin := map[string]string{} // re-signed event → the event whose content it carries
	for _, e := range mine {
		if e.Type != HealType {
			continue
		}
		if b, ok := readHeal(e.Body); ok {
			for _, r := range b.Replaced {
				if r.By != "" {
					origin[r.By] = r.ID
				}
			}
		}
	}
	root := func(id string) string {
		for range len(origin) + 1 { // a cycle is not possible (ids are hashes), but bound it
			o, ok := origin[id]
			if !ok {
				break
			}
			id = o
		}
		return id
	}
	carriedBy := map[string]string{} // original content → the event carrying it
	for _, e := range kept {
		carriedBy[root(e.ID)] = e.ID
	}
	for _, e := range redo {
		if by, ok := carriedBy[root(e.ID)]; ok {
			body.Replaced = append(body.Replaced, Replacement{ID: e.ID, By: by})
			continue
		}
		// The body is copied as stored: it was signed once, whatever a
		// newer tern checks of new drafts.
		n, err := next(Draft{Type: e.Type, Session: e.Session, Turn: e.Turn}, e.Body)
		if err != nil {
			return nil, err
		}
		carriedBy[root(e.ID)] = n.ID
		body.Replaced = append(body.Replaced, Replacement{ID: e.ID, By: n.ID})
	}
	for _, e := range drop {
		body.Replaced = append(body.Replaced, Replacement{ID: e.ID})
	}
	slices.SortFunc(body.Replaced, func(a, b Replacement) int { return cmp.Compare(a.ID, b.ID) })
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	raw, err = Canonical(raw)
	if err != nil {
		return nil, err
	}
	if _, err := next(Draft{Type: HealType}, raw); err != nil {
		return nil, err
	}
	return out, nil
}

// longestLine returns, from one machine's events sorted by seq, the chain
// from seq 1 that reaches the highest seq through valid links (prev and a
// growing clock), taking the smallest id where two reach as far.
func longestLine(chain []*Event) []*Event {
	children := map[string][]*Event{} // by prev
	for _, e := range chain {
		children[e.Prev] = append(children[e.Prev], e)
	}
	links := func(parent *Event) []*Event {
		key := ""
		if parent != nil {
			key = parent.ID
		}
		var out []*Event
		for _, c := range children[key] {
			if parent == nil && c.Seq == 1 || parent != nil && c.Seq == parent.Seq+1 && c.Clock > parent.Clock {
				out = append(out, c)
			}
		}
		return out
	}
	reach := map[string]uint64{} // the highest seq reachable from an event
	for i := len(chain) - 1; i >= 0; i-- {
		e := chain[i]
		r := e.Seq
		for _, c := range links(e) {
			r = max(r, reach[c.ID])
		}
		reach[e.ID] = r
	}
	best := func(cands []*Event) *Event {
		var b *Event
		for _, c := range cands {
			if b == nil || reach[c.ID] > reach[b.ID] || reach[c.ID] == reach[b.ID] && c.ID < b.ID {
				b = c
			}
		}
		return b
	}
	var line []*Event
	for e := best(links(nil)); e != nil; e = best(links(e)) {
		line = append(line, e)
	}
	return line
}

// ExtendFile appends events to the journal file at path as one atomic
// step: it writes the file's complete lines (a torn last line is dropped)
// followed by the events' lines to a temporary file beside it, fsyncs it,
// renames it over path and fsyncs the folder. A crash leaves the old file
// or the new one, never a part of events. The file must not be open in a
// Log meanwhile. Events must come from ParseLine, Decode, NewEvent, Heal or
// a Log.
func ExtendFile(path string, events []*Event) (err error) {
	for _, e := range events {
		if len(e.line) == 0 {
			return fmt.Errorf("extend journal %s: event %q has no canonical line", path, e.ID)
		}
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("extend journal %s: %w", path, err)
	}
	old = old[:bytes.LastIndexByte(old, '\n')+1]
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tern-tmp-*")
	if err != nil {
		return fmt.Errorf("extend journal %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if fi, serr := os.Stat(path); serr == nil {
		if err := tmp.Chmod(fi.Mode().Perm()); err != nil {
			return fmt.Errorf("extend journal %s: %w", path, err)
		}
	}
	bw := bufio.NewWriterSize(tmp, 256<<10)
	bw.Write(old)
	for _, e := range events {
		io.WriteString(bw, e.line)
		bw.WriteByte('\n')
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("extend journal %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("extend journal %s: fsync: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("extend journal %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("extend journal %s: %w", path, err)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("extend journal %s: fsync folder: %w", path, err)
	}
	return nil
}
