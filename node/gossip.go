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
	net  topicNet
	seen *lru.Cache[string, struct{}]

	mu         sync.Mutex
	publishers map[string]func(context.Context, []byte) error // by agent, once joined
	link       map[string]*sync.Mutex                         // per agent: a chain-link check and its store are one step
}

// validator decides what gossip does with a message on a topic, as a
// GossipSub validator does: Accept forwards it, Ignore and Reject do not.
// from passed it on; origin published it.
type validator = func(ctx context.Context, from, origin peer.ID, data []byte) pubsub.ValidationResult

// topicNet is what gossip needs of the network: to take part in a topic,
// each message going through a validator, and to publish on it. GossipSub
// is one (pubsubTopics); a host that carries its own gossip, such as the
// simulator's in-memory one, is another.
type topicNet interface {
	Join(topic string, v validator) (publish func(context.Context, []byte) error, err error)
}

func startGossip(ctx context.Context, n *Node) (*gossip, error) {
	seen, _ := lru.New[string, struct{}](seenEvents)
	g := &gossip{n: n, seen: seen, publishers: map[string]func(context.Context, []byte) error{}, link: map[string]*sync.Mutex{}}
	if t, ok := n.host.(topicNet); ok {
		g.net = t
		return g, nil
	}
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
	g.net = pubsubTopics{ps}
	return g, nil
}

// pubsubTopics is GossipSub as a topicNet.
type pubsubTopics struct{ ps *pubsub.PubSub }

// Join registers v as the topic's validator, then relays the topic: checked
// messages are forwarded without a subscription.
func (t pubsubTopics) Join(topic string, v validator) (func(context.Context, []byte) error, error) {
	err := t.ps.RegisterTopicValidator(topic, func(ctx context.Context, from peer.ID, m *pubsub.Message) pubsub.ValidationResult {
		return v(ctx, from, m.GetFrom(), m.GetData())
	})
	if err != nil {
		return nil, err
	}
	tp, err := t.ps.Join(topic)
	if err != nil {
		return nil, err
	}
	if _, err := tp.Relay(); err != nil {
		return nil, err
	}
	return func(ctx context.Context, data []byte) error {
		// With no peer known to follow the topic, pubsub would sign the
		// message and check its own signature (two thirds of what a node's
		// append costs in CPU) to send it to nobody: a peer that subscribes
		// later takes the event in the sync round its connection starts.
		if len(tp.ListPeers()) == 0 {
			return nil
		}
		return tp.Publish(ctx, data)
	}, nil
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
	return ok && g.n.peers.Allowed(p) && g.n.store.Shares().Shared(agent, p.String())
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

// join takes part in the agent's topic (idempotent).
func (g *gossip) join(agent string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.publishers[agent]; ok {
		return nil
	}
	publish, err := g.net.Join(topicPrefix+agent, g.validator(agent))
	if err != nil {
		return err
	}
	g.publishers[agent] = publish
	g.link[agent] = &sync.Mutex{}
	return nil
}

// publish sends events this node wrote to the agent's topic.
func (g *gossip) publish(ctx context.Context, agent string, events []*journal.Event) {
	g.mu.Lock()
	publish := g.publishers[agent]
	g.mu.Unlock()
	if publish == nil {
		return
	}
	for _, e := range events {
		if err := publish(ctx, e.Line()); err != nil {
			g.n.log.Debug("gossip publish", "agent", agent, "event", e.ID, "err", err)
			return
		}
	}
}

// validator checks a message on the agent's topic and, if it is an event
// that extends a chain this node holds, stores it before it is forwarded.
func (g *gossip) validator(agent string) validator {
	return func(ctx context.Context, from, origin peer.ID, data []byte) pubsub.ValidationResult {
		if from == g.n.host.ID() {
			return pubsub.ValidationAccept // our own events, stored before they were published
		}
		result := g.check(ctx, agent, from, origin, data)

		g.n.stats.gossip.WithLabelValues(resultName(result)).Inc()
		return result
	}
}

func (g *gossip) check(ctx context.Context, agent string, from, origin peer.ID, data []byte) pubsub.ValidationResult {
	if !g.admits(from, topicPrefix+agent) {
		return pubsub.ValidationReject
	}
	e, err := journal.ParseLine(data)
	if err != nil {
		g.n.store.Reject(agent, from.String(), data, fmt.Errorf("gossip: %w", err))
		return pubsub.ValidationReject
	}
	if origin.String() != e.Machine {
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
	added, err := g.n.store.AddNew(ctx, agent, from.String(), []*journal.Event{e})
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
