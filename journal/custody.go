package journal

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
)

// ErrNoCustody means a holder.activated event does not prove that the
// agent's holder handed the agent to its writer (docs/FORMAT.md, "Custody
// of epochs").
var ErrNoCustody = errors.New("an activation without the old holder's handover")

// Handover is the old holder's word that it hands an agent to a machine:
// From, holding the agent at its epoch, gives it to To at To's epoch. Sig
// is From's ed25519 signature of HandoverMessage, in standard base64. The
// node that activates carries it into its holder.activated event.
type Handover struct {
	From Bound  `json:"from"`
	To   Bound  `json:"to"`
	Sig  string `json:"sig"`
}

// HandoverMessage is what the old holder signs: a line naming the format,
// then the agent, the old holder and its epoch, the new one and its epoch,
// one per line.
func HandoverMessage(agent string, from, to Bound) []byte {
	return fmt.Appendf(nil, "tern.handover/1\n%s\n%s\n%s\n%s\n%s\n", agent,
		from.Peer, strconv.FormatUint(from.Epoch, 10), to.Peer, strconv.FormatUint(to.Epoch, 10))
}

// SignHandover has s, holding agent at epoch from, hand it to the machine
// to at epoch next.
func SignHandover(s Signer, agent string, from uint64, to string, next uint64) (Handover, error) {
	h := Handover{From: Bound{Peer: s.Machine(), Epoch: from}, To: Bound{Peer: to, Epoch: next}}
	sig, err := s.Sign(HandoverMessage(agent, h.From, h.To))
	if err != nil {
		return Handover{}, fmt.Errorf("sign the handover of %s to %s: %w", agent, to, err)
	}
	h.Sig = base64.StdEncoding.EncodeToString(sig)
	return h, nil
}

// Check reports whether h is From's signature of the handover of agent,
// and an error saying what is wrong otherwise.
func (h Handover) Check(agent string) error {
	switch {
	case h.From.Peer == "" || h.To.Peer == "" || h.From.Peer == h.To.Peer:
		return fmt.Errorf("%w: the handover names no old holder and new one", ErrNoCustody)
	case h.From.Epoch == 0 || h.To.Epoch <= h.From.Epoch:
		return fmt.Errorf("%w: the handover's epochs %d and %d do not follow each other", ErrNoCustody, h.From.Epoch, h.To.Epoch)
	}
	key, err := MachineKey(h.From.Peer)
	if err != nil {
		return fmt.Errorf("%w: the old holder %q: %v", ErrNoCustody, h.From.Peer, err)
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(h.Sig)
	if err != nil || !ed25519.Verify(key, HandoverMessage(agent, Bound{Peer: h.From.Peer, Epoch: h.From.Epoch}, Bound{Peer: h.To.Peer, Epoch: h.To.Epoch}), sig) {
		return fmt.Errorf("%w: the handover is not signed by %s", ErrNoCustody, h.From.Peer)
	}
	return nil
}

// Custody checks that a holder.activated event e of agent proves its
// writer was handed the agent (docs/FORMAT.md, "Custody of epochs"): its
// body names its writer the holder at its own epoch, and carries the
// handover the machine it names as the old holder, a member, signed for
// exactly that: from its epoch to the writer at e's epoch. An event of
// another type passes, and so does an activation written before the
// agent's members were first named (an agent from before members: see
// Members), or in a journal that names none.
func Custody(agent string, e *Event, m Members) error {
	if e.Type != ActivatedType || m.open || e.Clock < m.since {
		return nil
	}
	b, ok := readActivated(e.Body)
	if !ok {
		return fmt.Errorf("%w: its body is not a holder.activated body", ErrNoCustody)
	}
	if _, _, _, ok := boundOf(e); !ok {
		return fmt.Errorf("%w: it does not name its writer the holder at its own epoch after another machine", ErrNoCustody)
	}
	if b.Handover == nil {
		return fmt.Errorf("%w: it carries no handover from %s", ErrNoCustody, b.From.Peer)
	}
	h := *b.Handover
	if h.From.Peer != b.From.Peer || h.From.Epoch != b.From.Epoch || h.To.Peer != e.Machine || h.To.Epoch != e.Epoch {
		return fmt.Errorf("%w: its handover is for %s at %d to %s at %d", ErrNoCustody, h.From.Peer, h.From.Epoch, h.To.Peer, h.To.Epoch)
	}
	if _, was := m.cut[h.From.Peer]; !was {
		return fmt.Errorf("%w: the old holder %s is not a member", ErrNoCustody, h.From.Peer)
	}
	return h.Check(agent)
}

// CustodyError is an activation Custody refused, for a person: the agent,
// its writer, the event and why.
type CustodyError struct {
	Agent, Machine, Event string
	Err                   error
}

func (e *CustodyError) Error() string {
	return fmt.Sprintf("holder.activated %s by machine %s of agent %s: %v", e.Event, e.Machine, e.Agent, e.Err)
}

func (e *CustodyError) Unwrap() error { return e.Err }

// Uncustodied returns a CustodyError for each activation among events
// that Custody refuses, judged by the members events name.
func Uncustodied(agent string, events []*Event) []error {
	m := MembersOf(agent, events)
	var out []error
	for _, e := range events {
		if err := Custody(agent, e, m); err != nil {
			out = append(out, &CustodyError{Agent: agent, Machine: e.Machine, Event: e.ID, Err: err})
		}
	}
	return out
}
