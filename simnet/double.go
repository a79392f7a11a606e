package simnet

import (
	"fmt"

	"github.com/tern-dev/tern/fencing"
)

// Peer is a node as another node sees it: deliver one request and get back
// the messages it sends in answer. Tests put a fencing.Machine behind it;
// a real node would answer over a migrate stream protocol, which is not
// built yet.
type Peer interface {
	Deliver(req fencing.Message) []fencing.Message
}

// When says where Faulty fails a call.
type When uint8

// Where a call fails.
const (
	// Before: the request is lost; the peer never runs it.
	Before When = iota + 1
	// After: the peer runs the request and its answer is lost.
	After
)

func (w When) String() string {
	switch w {
	case Before:
		return "before"
	case After:
		return "after"
	}
	return fmt.Sprintf("when(%d)", w)
}

// Calls are the requests of the migration protocol a Faulty can fail.
var Calls = []fencing.MsgType{fencing.MsgPropose, fencing.MsgTransfer, fencing.MsgPrepare,
	fencing.MsgActivate, fencing.MsgQuery, fencing.MsgAbort}

// Faulty is a test double that wraps a Peer and fails the first Times
// requests of type Call (one if Times is 0), Before or After they run.
// Every other request passes through. It is not safe for concurrent use.
type Faulty struct {
	Peer  Peer
	Call  fencing.MsgType
	When  When
	Times int
	// Failed counts the requests it failed.
	Failed int
}

var _ Peer = (*Faulty)(nil)

// Deliver implements Peer.
func (f *Faulty) Deliver(req fencing.Message) []fencing.Message {
	times := f.Times
	if times == 0 {
		times = 1
	}
	if req.Type != f.Call || f.Failed >= times {
		return f.Peer.Deliver(req)
	}
	f.Failed++
	if f.When == Before {
		return nil
	}
	f.Peer.Deliver(req)
	return nil
}
