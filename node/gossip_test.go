package node

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pprotocol "github.com/libp2p/go-libp2p/core/protocol"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/protocol"
	"github.com/tern-dev/tern/syncpolicy"
)

// startQuietNode runs a node whose anti-entropy timer never fires within
// a test: after the sync on connect, only gossip moves events.
func startQuietNode(t *testing.T, tr ...transport) *Node {
	t.Helper()
	on := tcp
	if len(tr) > 0 {
		on = tr[0]
	}
	return on.startEvery(t, t.TempDir(), time.Hour)
}

func inTopic(n *Node, agent string, p peer.ID) bool {
	return slices.Contains(n.gossip.net.(pubsubTopics).ps.ListPeers(topicPrefix+agent), p)
}

// eventCount counts the events n holds of agent besides those that name
// its members.
func eventCount(t *testing.T, n *Node, agent string) int {
	t.Helper()
	evs, err := n.store.Events(agent, "")
	if err != nil {
		t.Fatal(err)
	}
	return len(withoutMembers(evs))
}

// gossipingPair is two quiet nodes (startQuietNode), paired and
// connected, sharing an agent, each in the other's view of its topic.
func gossipingPair(t *testing.T, tr transport) (a, b *Node, agent string) {
	t.Helper()
	a, b = startQuietNode(t, tr), startQuietNode(t, tr)
	agent = sharedCapsule(t, a, b)
	pair(t, a, b)
	if err := a.host.Connect(context.Background(), peer.AddrInfo{ID: b.host.ID(), Addrs: b.host.Addrs()}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "each node sees the other in the agent's topic", func() bool {
		return inTopic(a, agent, b.host.ID()) && inTopic(b, agent, a.host.ID())
	})
	return a, b, agent
}

func TestNewEventsReachAPeerByGossipAlone(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b, agent := gossipingPair(t, tr)
		// The round the connection started must be over, or an exchange of it
		// could carry the first new event before gossip does. (Both hold the
		// capsule alike, so the leader's round runs none.)
		leader := a
		if !syncpolicy.Leads(string(a.host.ID()), string(b.host.ID())) {
			leader = b
		}
		eventually(t, "the round on connect has ended", func() bool { return testutil.ToFloat64(leader.stats.rounds) >= 1 })
		start := eventCount(t, b, agent)
		for i := 1; i <= 10; i++ {
			body, _ := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]string{"type": "text", "text": "hello"}}})
			if _, err := a.Append(context.Background(), agent, []journal.Draft{{Type: "message", Session: "s", Body: body}}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "b holds the new event", func() bool { return eventCount(t, b, agent) == start+i })
		}
		// The validator counts an event after it stored it: wait for the count.
		eventually(t, "b counts all 10 events as accepted by gossip", func() bool {
			return testutil.ToFloat64(b.stats.gossip.WithLabelValues("accepted")) == 10
		})
	})
}

// rogue is a paired peer that speaks gossip directly, to send what a tern
// node never would.
type rogue struct {
	signer *journal.KeySigner
	ps     *pubsub.PubSub
	topic  *pubsub.Topic
}

// newRogue pairs a rogue peer with home, calls setup with its peer ID, then
// connects it and joins the agent's topic.
func newRogue(t *testing.T, home *Node, agent string, setup func(id string)) *rogue {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	h := realHost(t, libp2p.Identity(k))
	if err := home.peers.Add(Peer{ID: h.ID().String(), Name: "rogue"}); err != nil {
		t.Fatal(err)
	}
	setup(h.ID().String())
	ps, err := pubsub.NewGossipSub(t.Context(), h, pubsub.WithFloodPublish(true))
	if err != nil {
		t.Fatal(err)
	}
	topic, err := ps.Join(topicPrefix + agent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := topic.Subscribe(); err != nil {
		t.Fatal(err)
	}
	if err := h.Connect(t.Context(), peer.AddrInfo{ID: home.host.ID(), Addrs: home.host.Addrs()}); err != nil {
		t.Fatal(err)
	}
	s, _ := journal.NewKeySigner(k)
	return &rogue{signer: s, ps: ps, topic: topic}
}

// knows reports whether each side counts the other in the agent's topic.
func (r *rogue) knows(home *Node, agent string) bool {
	return inTopic(home, agent, r.signerID()) && slices.Contains(r.topic.ListPeers(), home.host.ID())
}

func event(t *testing.T, s journal.Signer, seq uint64, prev string) *journal.Event {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]string{"type": "text", "text": "from the rogue"}}})
	e, err := journal.NewEvent(s, journal.Stamp{Seq: seq, Prev: prev, Clock: 1000 + seq, Time: time.Unix(0, 0)},
		journal.Draft{Type: "message", Session: "s", Body: body})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestGossipStoresOnlyEventsThatCheckAndComeFromTheirWriter(t *testing.T) {
	home := startQuietNode(t)
	agent := sharedCapsule(t, home)
	r := newRogue(t, home, agent, func(string) {})
	// A member of the agent: its own events count, once they check.
	if _, err := home.AddMember(t.Context(), agent, r.signer.Machine()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the rogue is in the topic", func() bool { return r.knows(home, agent) })
	count := func(result string) float64 { return testutil.ToFloat64(home.stats.gossip.WithLabelValues(result)) }
	before := eventCount(t, home, agent)

	// Tampered: quarantined, not stored. (A tampered copy of an event
	// shares its id, so pubsub would then drop the real one as seen;
	// anti-entropy brings it. Here the real one is another event.)
	good := event(t, r.signer, 1, "")
	bad := bytes.Replace(event(t, r.signer, 2, good.ID).Line(), []byte("from the rogue"), []byte("FROM THE ROGUE"), 1)
	if err := r.topic.Publish(t.Context(), bad); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the tampered event is rejected", func() bool { return count("rejected") == 1 })
	if home.store.RejectedCount(agent) != 1 {
		t.Fatal("the tampered line was not kept in the quarantine")
	}

	// Written by another machine: a peer gossips only its own events.
	k, _, _ := crypto.GenerateEd25519Key(nil)
	other, _ := journal.NewKeySigner(k)
	if err := r.topic.Publish(t.Context(), event(t, other, 1, "").Line()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the other machine's event is rejected", func() bool { return count("rejected") == 2 })

	// A gap: seq 3 without 2. Not stored; anti-entropy's business.
	if err := r.topic.Publish(t.Context(), event(t, r.signer, 3, good.ID).Line()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the gap is ignored", func() bool { return count("ignored") == 1 })

	// Its own, well-formed, first of its chain: stored.
	if err := r.topic.Publish(t.Context(), good.Line()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the good event is accepted", func() bool { return count("accepted") == 1 })
	if got := eventCount(t, home, agent); got != before+1 {
		t.Fatalf("home holds %d events, want %d", got, before+1)
	}
}

// gossipJudged is how many gossiped messages n's validator has decided on,
// whatever it decided.
func gossipJudged(n *Node) float64 {
	sum := 0.0
	for _, result := range []string{"accepted", "ignored", "rejected"} {
		sum += testutil.ToFloat64(n.stats.gossip.WithLabelValues(result))
	}
	return sum
}

func (r *rogue) signerID() peer.ID { id, _ := peer.Decode(r.signer.Machine()); return id }

func TestAPeerAnAgentIsNotSharedWithIsKeptOutOfItsTopic(t *testing.T) {
	home := startQuietNode(t)
	agent := sharedCapsule(t, home)
	open := sharedCapsule(t, home)
	r := newRogue(t, home, agent, func(id string) {
		if err := home.store.Shares().Set(agent, id, false); err != nil {
			t.Fatal(err)
		}
	})
	openTopic, err := r.ps.Join(topicPrefix + open)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openTopic.Subscribe(); err != nil {
		t.Fatal(err)
	}
	// The rogue asked to join the agent's topic before the other's, on the
	// same stream: once home counts it in the second, it has decided on the
	// first. Once the rogue counts home in the agent's topic, it sends home
	// what it publishes there.
	eventually(t, "the rogue is in the topic of the agent shared with it, and sends to home in the other", func() bool {
		return inTopic(home, open, r.signerID()) && slices.Contains(r.topic.ListPeers(), home.host.ID())
	})
	before := eventCount(t, home, agent)
	if err := r.topic.Publish(t.Context(), event(t, r.signer, 1, "").Line()); err != nil {
		t.Fatal(err)
	}
	// The validator counts a message once it has decided on it (and stored
	// it, had it let it in): the moment to look is when it has.
	eventually(t, "home has judged the rogue's event", func() bool { return gossipJudged(home) == 1 })
	if inTopic(home, agent, r.signerID()) {
		t.Fatal("a peer the agent is not shared with is in its topic")
	}
	if eventCount(t, home, agent) != before {
		t.Fatal("an event from a peer the agent is not shared with was stored")
	}
	if testutil.ToFloat64(home.stats.gossip.WithLabelValues("rejected")) != 1 {
		t.Fatal("home's validator did not reject an event from a peer the agent is not shared with")
	}
}

func TestAnUnpairedHostCannotOpenAnyTernProtocolOrJoinATopic(t *testing.T) {
	home := startQuietNode(t)
	agent := sharedCapsule(t, home)
	k, _, _ := crypto.GenerateEd25519Key(nil)
	stranger := realHost(t, libp2p.Identity(k))
	ps, err := pubsub.NewGossipSub(t.Context(), stranger, pubsub.WithFloodPublish(true))
	if err != nil {
		t.Fatal(err)
	}
	topic, err := ps.Join(topicPrefix + agent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := topic.Subscribe(); err != nil {
		t.Fatal(err)
	}
	before := eventCount(t, home, agent)
	var conns atomic.Int64 // connections home took up with the stranger
	home.host.Network().Notify(&network.NotifyBundle{ConnectedF: func(_ network.Network, c network.Conn) {
		if c.RemotePeer() == stranger.ID() {
			conns.Add(1)
		}
	}})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_ = stranger.Connect(ctx, peer.AddrInfo{ID: home.host.ID(), Addrs: home.host.Addrs()}) // may look done on the dialer's side
	for _, proto := range []string{protocol.SyncID, protocol.BlobID, protocol.CapsuleID, "/meshsub/1.2.0", "/meshsub/1.1.0"} {
		if s, err := stranger.NewStream(ctx, home.host.ID(), libp2pprotocol.ID(proto)); err == nil {
			s.Reset()
			t.Errorf("an unpaired host opened %s", proto)
		}
	}
	signer, _ := journal.NewKeySigner(k)
	_ = topic.Publish(ctx, event(t, signer, 1, "").Line())
	// Home refused the stranger at its handshake. A connection is taken up
	// (its notifiees told) before any stream on it is read: with none taken
	// up, nothing the stranger sent was read or is on its way, and the
	// stranger, done, dials no more.
	eventually(t, "home refused the stranger's handshake", func() bool {
		return slices.ContainsFunc(home.PendingPeers(), func(p PendingPeer) bool { return p.ID == stranger.ID().String() })
	})
	if n := conns.Load(); n != 0 {
		t.Fatalf("home took up %d connections from an unpaired host", n)
	}
	if inTopic(home, agent, stranger.ID()) || eventCount(t, home, agent) != before {
		t.Fatal("an unpaired host joined a topic or got an event stored")
	}
}

// What a node acknowledged just before it stopped is on its peer, not on
// its own disk alone: gossip had no time to send it, and the node's home
// may come back from a backup that lacks it.
func TestAnAppendJustBeforeTheNodeClosesIsOnItsPeer(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b, agent := gossipingPair(t, tr)
		start := eventCount(t, b, agent)
		body, _ := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]string{"type": "text", "text": "the last word"}}})
		evs, err := a.Append(context.Background(), agent, []journal.Draft{{Type: "message", Session: "s", Body: body}})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		held, err := b.store.Events(agent, "")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(held, func(e *journal.Event) bool { return e.ID == evs[0].ID }) {
			t.Fatalf("b holds %d events, %d new, and not the one a acknowledged before it closed", eventCount(t, b, agent), eventCount(t, b, agent)-start)
		}
	})
}
