package fencing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// RegistryFormat is the format string of a holder registry file.
const RegistryFormat = "tern.registry/1"

// MaxRegistrySize bounds a registry file; a bigger one is refused unread.
const MaxRegistrySize = 64 << 20

// The durable format, one JSON object per node (a durable Registry writes
// the file whole, atomically: temp file, fsync, rename, fsync the folder;
// no such Registry is built yet, see Registry):
//
//	{
//	  "format": "tern.registry/1",
//	  "agents": {
//	    "<agent id, a lowercase UUID>": {
//	      "highest": 7,              highest epoch seen
//	      "state": "frozen",         none | active | frozen | staging | retired
//	      "epoch": 5,                held / staged / last held epoch (0 for none)
//	      "peer": "12D3KooW…",       frozen: target; staging: source; retired: successor
//	      "next": 7,                 frozen: the proposed epoch
//	      "committing": true,        frozen: past the point of no return
//	      "prepared": false,         staging: prepared
//	      "floor": 0,                after a lost registry: undecided epochs ≤ floor are unknown
//	      "holder": {"peer": "12D3KooW…", "epoch": 5},   latest activation known
//	      "decisions": [{"epoch": 5, "decision": "activated"}, {"epoch": 6, "decision": "refused"}]
//	    }
//	  }
//	}
//
// Agents are sorted by id and decisions by epoch; fields are always
// present. Integers are at most 2^53-1.
type registryFile struct {
	Format string                `json:"format"`
	Agents map[string]recordJSON `json:"agents"`
}

type recordJSON struct {
	Highest    uint64         `json:"highest"`
	State      string         `json:"state"`
	Epoch      uint64         `json:"epoch"`
	Peer       string         `json:"peer"`
	Next       uint64         `json:"next"`
	Committing bool           `json:"committing"`
	Prepared   bool           `json:"prepared"`
	Floor      uint64         `json:"floor"`
	Holder     Holder         `json:"holder"`
	Decisions  []decisionJSON `json:"decisions"`
}

type decisionJSON struct {
	Epoch    uint64 `json:"epoch"`
	Decision string `json:"decision"`
}

const maxSafeInt = 1<<53 - 1

// EncodeRegistry returns the durable bytes of a registry holding recs (agent
// id → record). It fails on an invalid agent id or record.
func EncodeRegistry(recs map[string]Record) ([]byte, error) {
	f := registryFile{Format: RegistryFormat, Agents: make(map[string]recordJSON, len(recs))}
	for id, r := range recs {
		if err := checkAgentID(id); err != nil {
			return nil, fmt.Errorf("encode registry: %w", err)
		}
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("encode registry: agent %s: %w", id, err)
		}
		if r.Highest > maxSafeInt {
			return nil, fmt.Errorf("encode registry: agent %s: epoch %d too large", id, r.Highest)
		}
		j := recordJSON{Highest: r.Highest, State: r.State.String(), Epoch: r.Epoch, Peer: r.Peer,
			Next: r.Next, Committing: r.Committing, Prepared: r.Prepared, Floor: r.Floor, Holder: r.Holder,
			Decisions: make([]decisionJSON, 0, len(r.Decisions))}
		ds := slices.Clone(r.Decisions)
		slices.SortFunc(ds, func(a, b Decided) int { return cmpU64(a.Epoch, b.Epoch) })
		for _, d := range ds {
			j.Decisions = append(j.Decisions, decisionJSON{d.Epoch, d.Decision.String()})
		}
		f.Agents[id] = j
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("encode registry: %w", err)
	}
	return buf.Bytes(), nil
}

// DecodeRegistry parses a registry file. It fails, naming the agent and
// field, on anything EncodeRegistry would not write: an unknown format
// (ErrFutureFormat if it is a newer version), unknown fields, states or
// decisions, a bad agent id, an invalid record.
func DecodeRegistry(data []byte) (map[string]Record, error) {
	if len(data) > MaxRegistrySize {
		return nil, fmt.Errorf("decode registry: %d bytes, more than %d", len(data), MaxRegistrySize)
	}
	var f registryFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("decode registry: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decode registry: data after the object")
	}
	if f.Format != RegistryFormat {
		if v, ok := strings.CutPrefix(f.Format, "tern.registry/"); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 1 {
				return nil, fmt.Errorf("decode registry: format %q: %w", f.Format, ErrFutureFormat)
			}
		}
		return nil, fmt.Errorf("decode registry: format %q, want %q", f.Format, RegistryFormat)
	}
	recs := make(map[string]Record, len(f.Agents))
	for id, j := range f.Agents {
		if err := checkAgentID(id); err != nil {
			return nil, fmt.Errorf("decode registry: %w", err)
		}
		st := slices.Index(stateNames[:], j.State)
		if st < 0 {
			return nil, fmt.Errorf("decode registry: agent %s: unknown state %q", id, j.State)
		}
		r := Record{Highest: j.Highest, State: State(st), Epoch: j.Epoch, Peer: j.Peer, Next: j.Next,
			Committing: j.Committing, Prepared: j.Prepared, Floor: j.Floor, Holder: j.Holder}
		for i, d := range j.Decisions {
			var dd Decision
			switch d.Decision {
			case "activated":
				dd = Activated
			case "refused":
				dd = Refused
			default:
				return nil, fmt.Errorf("decode registry: agent %s: decision %d: %q is not activated or refused", id, i, d.Decision)
			}
			if i > 0 && d.Epoch <= j.Decisions[i-1].Epoch {
				return nil, fmt.Errorf("decode registry: agent %s: decisions not sorted by epoch at %d", id, d.Epoch)
			}
			r.Decisions = append(r.Decisions, Decided{d.Epoch, dd})
		}
		if r.Highest > maxSafeInt {
			return nil, fmt.Errorf("decode registry: agent %s: highest %d too large", id, r.Highest)
		}
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("decode registry: agent %s: %w", id, err)
		}
		recs[id] = r
	}
	return recs, nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkAgentID accepts the canonical agent id: a lowercase UUID, as in the
// capsule manifest.
func checkAgentID(id string) error {
	if len(id) != 36 {
		return fmt.Errorf("agent id %q is not a lowercase UUID", id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return fmt.Errorf("agent id %q is not a lowercase UUID", id)
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return fmt.Errorf("agent id %q is not a lowercase UUID", id)
			}
		}
	}
	return nil
}
