package store

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// QuarantineDir holds, per agent, what peers sent that did not check:
// $TERN_HOME/quarantine/<agent id>.jsonl, one Rejected per line. Nothing in
// it is ever merged; it is evidence for a person.
const QuarantineDir = "quarantine"

// Rejected is one event line a peer sent that failed its checks.
type Rejected struct {
	Time   string          `json:"time"`
	Peer   string          `json:"peer"`
	Reason string          `json:"reason"`
	Line   json.RawMessage `json:"line,omitempty"` // the line, if it was JSON
	Raw    string          `json:"raw,omitempty"`  // the bytes, if it was not
}

// quarantine appends rejected lines to their agent's file and counts them.
type quarantine struct {
	dir string
	mu  sync.Mutex
	n   map[string]int
}

func newQuarantine(home string) *quarantine {
	q := &quarantine{dir: filepath.Join(home, QuarantineDir), n: map[string]int{}}
	if ents, err := os.ReadDir(q.dir); err == nil {
		for _, e := range ents {
			data, err := os.ReadFile(filepath.Join(q.dir, e.Name()))
			if err == nil {
				agent := e.Name()[:len(e.Name())-len(filepath.Ext(e.Name()))]
				for _, b := range data {
					if b == '\n' {
						q.n[agent]++
					}
				}
			}
		}
	}
	return q
}

// add records one rejected line; it is written (append, fsync) before
// add returns.
func (q *quarantine) add(agent, peer string, line []byte, reason error) error {
	r := Rejected{Time: time.Now().UTC().Format(time.RFC3339), Peer: peer, Reason: reason.Error()}
	if json.Valid(line) {
		r.Line = line
	} else {
		r.Raw = string(line)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := os.MkdirAll(q.dir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(q.dir, agent+".jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		return err
	}
	q.n[agent]++
	return f.Sync()
}

func (q *quarantine) count(agent string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n[agent]
}
