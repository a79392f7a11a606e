package fencing

import "fmt"

// MsgType names a message of the migration protocol.
type MsgType uint8

// Message types. Requests go from the node that acts to the node asked;
// every request has one kind of answer.
const (
	_           MsgType = iota
	MsgPropose          // source → target: take epoch Epoch; Files is what you must hold
	MsgAccept           // target → source: accepted; Missing lists the files to send
	MsgRefuse           // target → source: refused, because of Reason; Highest is the target's
	MsgTransfer         // source → target: Files[Index], bytes in Data (filled by the sender's adapter)
	MsgPrepare          // source → target: everything is sent, prepare Epoch
	MsgMissing          // target → source: cannot prepare, Missing still lacks
	MsgPrepared         // target → source: prepared; it will activate Epoch when told
	MsgActivate         // source → target: activate Epoch (the point of no return is behind)
	MsgQuery            // source → target: what did you decide for Epoch? (fences)
	MsgAbort            // source → target: forget Epoch (fences)
	MsgDecision         // target → source: Decision for Epoch, in reply to Re
	MsgAsk              // any → peer: tell me what you know of the agent (Nonce)
	MsgTell             // peer → asker: Highest and Info, echoing Nonce
	MsgFence            // overrider → peer: refuse everything older than Epoch
	MsgFenced           // peer → overrider: fenced (or Reason), Highest and Info
)

var msgNames = [...]string{"?", "propose", "accept", "refuse", "transfer", "prepare", "missing",
	"prepared", "activate", "query", "abort", "decision", "ask", "tell", "fence", "fenced"}

func (t MsgType) String() string {
	if int(t) < len(msgNames) {
		return msgNames[t]
	}
	return fmt.Sprintf("msg(%d)", t)
}

// File is one file of the capsule a proposal moves: its capsule-relative
// name, the sha256 of its bytes and its size.
type File struct {
	Name string
	Sum  [32]byte
	Size int64
}

// Info is what a node tells a peer about its record of the agent, in a Tell
// or a Fenced.
type Info struct {
	Known   bool // false: the node lost its registry and knows nothing
	State   State
	Epoch   uint64
	Peer    string
	Holder  Holder
	Decided Decision // the node's decision for its Highest epoch, if any
	Floor   uint64   // the node lost its registry once: it may have decided epochs up to Floor
}

// Message is one protocol message. Fields a type does not use are zero. A
// Message and the slices it points to are never modified after it is
// handed out, so it may be queued, duplicated and delivered late.
type Message struct {
	Type     MsgType
	From, To string
	Agent    string
	Epoch    uint64
	Re       MsgType  // MsgDecision: the request it answers
	Decision Decision // MsgDecision
	Reason   Reason   // MsgRefuse, MsgFenced
	Highest  uint64   // MsgRefuse, MsgTell, MsgFenced: the sender's highest epoch
	Files    []File   // MsgPropose
	Missing  []int    // MsgAccept, MsgMissing: indexes into the proposal's Files
	Index    int      // MsgTransfer
	Data     []byte   // MsgTransfer
	Nonce    uint64   // MsgAsk, MsgTell
	Info     Info     // MsgTell, MsgFenced
	// Detail says a refusal's reason in words, for a person (MsgRefuse
	// after a failed prepare: what failed). No machine acts on it.
	Detail string
	// Handover, on MsgActivate, is the source's signed word that it hands
	// the agent to the target (journal.Handover, as JSON), which the
	// target's holder.activated event carries. The node adds it and checks
	// it; no machine acts on it.
	Handover []byte
}

// MaxHandover is the longest Handover a message carries.
const MaxHandover = 1024

// MaxDetail is the longest Detail a message carries.
const MaxDetail = 512

func (m *Message) String() string {
	s := fmt.Sprintf("%s %s->%s e%d", m.Type, m.From, m.To, m.Epoch)
	switch m.Type {
	case MsgDecision:
		s += fmt.Sprintf(" %v re %v", m.Decision, m.Re)
	case MsgRefuse, MsgFenced:
		s += fmt.Sprintf(" %v highest %d", m.Reason, m.Highest)
	case MsgAccept, MsgMissing:
		s += fmt.Sprintf(" missing %v", m.Missing)
	case MsgTransfer:
		s += fmt.Sprintf(" file %d (%d bytes)", m.Index, len(m.Data))
	case MsgTell:
		s += fmt.Sprintf(" highest %d %+v", m.Highest, m.Info)
	}
	return s
}
