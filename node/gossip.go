package node

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/journal"
)

// topicPrefix names the GossipSub topic of an agent: topicPrefix + agent id.
const topicPrefix = "/tern/events/1.0.0/"

// seenEvents bounds the cache of event ids gossip has already stored or
// found held, so that a duplicate costs no signature check.
const seenEvents = 1 << 16

// gossip is the fast path of sync: one GossipSub topic per agent carries
// each new event, as its canonical line, from the machine that wrote it.
// A peer's message is forwarded only once it has checked (signature, id,
// sender, chain link) and is durably stored. It is a hint: anti-entropy
// brings whatever gossip missed.
type gossip struct {
	n    *Node
	ps   *pubsub.PubSub
	seen *lru.Cache[string, struct{}]

	mu     sync.Mutex
	topics map[string]*pubsub.Topic
	link   map[string]*sync.Mutex // per agent: a chain-link check and its store are one step
}

func startGossip(ctx context.Context, n *Node) (*gossip, error) {
	seen, _ := lru.New[string, struct{}](seenEvents)
	g := &gossip{n: n, seen: seen, topics: map[string]*pubsub.Topic{}, link: map[string]*sync.Mutex{}}
	ps, err := pubsub.NewGossipSub(ctx, n.host,
		pubsub.WithPeerFilter(g.admits),
		pubsub.WithSubscriptionFilter(subscriptions{g}),
		pubsub.WithMessageIdFn(messageID),
		pubsub.WithMessageSignaturePolicy(pubsub.StrictSign),
		// A person's machines are few: send our own events to every peer
		// in the topic, not only to the mesh, which is empty until the
		// first heartbeat after a connection.
		pubsub.WithFloodPublish(true),
	)
	if err != nil {
		return nil, fmt.Errorf("start gossip: %w", err)
	}
	g.ps = ps
	return g, nil
}

// agentOfTopic returns the agent whose events topic carries.
func agentOfTopic(topic string) (string, bool) {
	return strings.CutPrefix(topic, topicPrefix)
}

// messageID is a message's event id, so that the same event reaching a
// node by two paths is one message. A message that is not an event gets
// the empty id; the validator refuses it.
func messageID(m *pb.Message) string {
	var e struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(m.GetData(), &e) != nil {
		return ""
	}
	return e.ID
}

// admits is pubsub's peer filter: a peer takes part in an agent's topic
// only if it is paired and the agent is shared with it.
func (g *gossip) admits(p peer.ID, topic string) bool {
	agent, ok := agentOfTopic(topic)
	return ok && g.n.peers.Allowed(p) && g.n.store.shares.Shared(agent, p.String())
}

// subscriptions keeps a peer out of an agent's topic (pubsub never counts
// it as a member, so sends it nothing) unless the topic admits it.
type subscriptions struct{ g *gossip }

func (subscriptions) CanSubscribe(topic string) bool {
	_, ok := agentOfTopic(topic)
	return ok
}

func (f subscriptions) FilterIncomingSubscriptions(from peer.ID, subs []*pb.RPC_SubOpts) ([]*pb.RPC_SubOpts, error) {
	return slices.DeleteFunc(subs, func(s *pb.RPC_SubOpts) bool {
		return s.GetSubscribe() && !f.g.admits(from, s.GetTopicid())
	}), nil
}

// join takes part in the agent's topic (idempotent): its validator first,
// then relaying, which forwards checked messages without a subscription.
func (g *gossip) join(agent string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.topics[agent]; ok {
		return nil
	}
	name := topicPrefix + agent
	if err := g.ps.RegisterTopicValidator(name, g.validator(agent)); err != nil {
		return err
	}
	t, err := g.ps.Join(name)
	if err != nil {
		return err
	}
	if _, err := t.Relay(); err != nil {
		return err
	}
	g.topics[agent] = t
	g.link[agent] = &sync.Mutex{}
	return nil
}

// publish sends events this node wrote to the agent's topic.
func (g *gossip) publish(ctx context.Context, agent string, events []*journal.Event) {
	g.mu.Lock()
	t := g.topics[agent]
	g.mu.Unlock()
	if t == nil {
		return
	}
	for _, e := range events {
		if err := t.Publish(ctx, e.Line()); err != nil {
			g.n.log.Debug("gossip publish", "agent", agent, "event", e.ID, "err", err)
			return
		}
	}
}

// validator checks a message on the agent's topic and, if it is an event
// that extends a chain this node holds, stores it before it is forwarded.
func (g *gossip) validator(agent string) pubsub.ValidatorEx {
	return func(ctx context.Context, from peer.ID, m *pubsub.Message) pubsub.ValidationResult {
		if from == g.n.host.ID() {
			return pubsub.ValidationAccept // our own events, stored before they were published
		}
		result := g.check(ctx, agent, from, m)

		g.n.stats.gossip.WithLabelValues(resultName(result)).Inc()
		return result
	}
}

func (g *gossip) check(ctx context.Context, agent string, from peer.ID, m *pubsub.Message) pubsub.ValidationResult {
	if !g.admits(from, m.GetTopic()) {
		return pubsub.ValidationReject
	}
	e, err := journal.ParseLine(m.GetData())
	if err != nil {
		g.n.store.Reject(agent, from.String(), m.GetData(), fmt.Errorf("gossip: %w", err))
		return pubsub.ValidationReject
	}
	if m.GetFrom().String() != e.Machine {
		g.n.log.Warn("gossip: a message carried an event of another machine than its sender", "agent", agent, "peer", from, "event", e.ID)
		return pubsub.ValidationReject
	}
	if g.seen.Contains(e.ID) {
		return pubsub.ValidationIgnore
	}
	g.mu.Lock()
	link := g.link[agent]
	g.mu.Unlock()
	link.Lock()
	defer link.Unlock()
	v, err := g.n.store.Vector(agent)
	if err != nil {
		return pubsub.ValidationIgnore
	}
	head := v[e.Machine]
	switch {
	case e.Seq == head.Seq && e.ID == head.ID:
		g.seen.Add(e.ID, struct{}{})
		return pubsub.ValidationIgnore
	case e.Seq > head.Seq+1:
		// A gap: what comes before it is missing here. Let anti-entropy
		// bring the chain in order.
		g.n.goSync(from)
		return pubsub.ValidationIgnore
	}
	added, err := g.n.store.add(ctx, agent, from.String(), []*journal.Event{e})
	if err != nil {
		g.n.log.Warn("gossip: could not store an event", "agent", agent, "event", e.ID, "err", err)
		return pubsub.ValidationIgnore
	}
	g.seen.Add(e.ID, struct{}{})
	g.n.fetchFor(from, agent, added)
	switch {
	case len(added) == 0: // held already
		return pubsub.ValidationIgnore
	case e.Seq == head.Seq+1 && e.Prev == head.ID:
		return pubsub.ValidationAccept
	default:
		// It does not extend the chain held here: a fork. It is kept, for
		// tern status to show, and not passed on.
		g.n.log.Warn("gossip: a forked event; kept and shown, not forwarded", "agent", agent, "peer", from, "event", e.ID)
		return pubsub.ValidationReject
	}
}

func resultName(r pubsub.ValidationResult) string {
	switch r {
	case pubsub.ValidationAccept:
		return "accepted"
	case pubsub.ValidationReject:
		return "rejected"
	default:
		return "ignored"
	}
}
