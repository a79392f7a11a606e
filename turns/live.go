package turns

import (
	"sync"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/provider"
	"github.com/tern-dev/tern/session"
)

// liveTurn is a turn running on this node, as its SSE subscribers follow
// it: its events so far (an event's sequence number is its position, from
// 1, as session.Turn.Events numbers them from the journal) and the deltas
// of the model step in flight. Every change closes changed and makes a new
// one, so any number of subscribers wait on one channel and copy what is
// new under the lock.
type liveTurn struct {
	agent, session, turn string

	mu     sync.Mutex
	items  []*journal.Event
	deltas []provider.Delta // of the step in flight; emptied when a step begins
	// The server-sent event of each item and delta, encoded once for every
	// subscriber.
	itemFrames, deltaFrames [][]byte
	step                    int    // counts the steps begun, so a subscriber knows its delta index is stale
	ended                   bool   // the turn ended (its turn.ended is the last item)
	movedTo                 string // the peer that runs the agent now, once it moved
	// detached: no runner feeds this stream any more, though the turn did
	// not end or move with it; subscribers must find the turn again.
	detached bool
	changed  chan struct{}
}

// liveOf returns the turn's live stream, made from the journal the first
// time.
func (rt *Runtime) liveOf(agent, sessionID, turnID string) *liveTurn {
	rt.mu.Lock()
	lt := rt.live[turnID]
	if lt == nil {
		lt = &liveTurn{agent: agent, session: sessionID, turn: turnID, changed: make(chan struct{})}
		rt.live[turnID] = lt
	}
	rt.mu.Unlock()
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.items == nil {
		if v, err := rt.load(agent, sessionID, turnID); err == nil {
			for _, e := range v.turnEvents() {
				lt.items = append(lt.items, e)
				lt.itemFrames = append(lt.itemFrames, api.ItemFrame(len(lt.items), e))
			}
			lt.ended = v.turn.Status != session.Running
		}
	}
	return lt
}

// dropLive forgets the turn's live stream once its runner stops. Its
// subscribers see its end or its move if it had one; else it is detached,
// and they find the turn again (a cancel's end, a resumed runner, the
// node it moved to).
func (rt *Runtime) dropLive(turnID string, lt *liveTurn) {
	rt.mu.Lock()
	if rt.live[turnID] == lt {
		delete(rt.live, turnID)
	}
	rt.mu.Unlock()
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if !lt.ended && lt.movedTo == "" {
		lt.detached = true
		lt.notify()
	}
}

// notify wakes every subscriber. lt.mu held.
func (lt *liveTurn) notify() {
	close(lt.changed)
	lt.changed = make(chan struct{})
}

// add appends an event of the turn.
func (lt *liveTurn) add(e *journal.Event) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	for _, have := range lt.items {
		if have.ID == e.ID {
			return
		}
	}
	lt.items = append(lt.items, e)
	lt.itemFrames = append(lt.itemFrames, api.ItemFrame(len(lt.items), e))
	if e.Type == session.TurnEnded {
		lt.ended = true
	}
	if e.Type != session.TurnEnded && len(lt.deltas) > 0 {
		lt.deltas, lt.deltaFrames = nil, nil // the step's events replace its deltas
	}
	lt.notify()
}

// beginStep starts a model step: the deltas of an earlier attempt go.
func (lt *liveTurn) beginStep() {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.deltas, lt.deltaFrames = nil, nil
	lt.step++
	lt.notify()
}

// delta adds a delta of the step in flight.
func (lt *liveTurn) delta(d provider.Delta) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.deltas = append(lt.deltas, d)
	lt.deltaFrames = append(lt.deltaFrames, api.DeltaFrame(d))
	lt.notify()
}

// move says the agent, and the turn with it, runs on peer now.
func (lt *liveTurn) move(peer string) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.movedTo = peer
	lt.notify()
}

// Since returns what is new after item number after and delta number
// deltaAfter of step step.
func (lt *liveTurn) Since(after, step, deltaAfter int) api.LiveSnapshot {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	s := api.LiveSnapshot{Step: lt.step, Ended: lt.ended, MovedTo: lt.movedTo, Detached: lt.detached, Changed: lt.changed}
	if n := len(lt.itemFrames); after < n {
		s.Items = lt.itemFrames[after:n:n]
	}
	if step != lt.step {
		deltaAfter = 0
	}
	if n := len(lt.deltaFrames); deltaAfter < n {
		s.Deltas = lt.deltaFrames[deltaAfter:n:n]
	}
	return s
}
