package protocol

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/internal/clock"
	"github.com/tern-dev/tern/journal"
)

// MigrateID is the libp2p protocol ID of migration: the messages of the
// fencing machines, and the two questions a migration asks besides them.
const MigrateID = "/tern/migrate/1.0.0"

// MaxMigrateFrame bounds one frame of the migrate protocol: a fencing
// message (a transfer carries one file's bytes), a question or an answer.
const MaxMigrateFrame = 16 << 20

// MigrateTimeout bounds one migrate stream. A pull moves what the target
// lacks of a capsule through sync and blob fetches, so it may take long;
// a message or a state question takes a round trip.
const MigrateTimeout = 30 * time.Minute

// The kinds of migrate requests.
const (
	kindMessage = "message" // a fencing message; no answer but the stream's clean end
	kindPull    = "pull"    // take what the asker holds of the agent, then answer a Pulled
	kindState   = "state"   // answer a HolderState
)

// MigrateNode is what the migrate protocol needs from a node.
type MigrateNode interface {
	// Deliver hands a fencing message from peer to the agent's machine.
	Deliver(from string, msg fencing.Message) error
	// Pull syncs the agent with peer now: events both ways, then every
	// blob the agent's capsule wants that peer holds; it returns what
	// this node then holds. epoch is the holder epoch the asker runs the
	// agent at (it is about to migrate it here).
	Pull(ctx context.Context, from, agent string, epoch uint64) (Pulled, error)
	// HolderOf says where the agent stands on this node.
	HolderOf(agent string) (HolderState, error)
}

// Pulled is the answer to a pull: the vector of the agent's events the
// puller holds afterwards, how many of its blobs it still lacks, and how
// many bytes it took (events and blobs).
type Pulled struct {
	Vector journal.Vector `json:"vector"`
	Lacks  int            `json:"lacks"`
	Bytes  int64          `json:"bytes"`
}

// HolderState is where an agent stands on one node, as `tern holder`
// shows it: State is "active", "frozen", "staging", "retired", "copy"
// (the node holds a copy of the capsule but never held the agent) or
// "unknown" (its registry was lost and is not relearnt yet).
type HolderState struct {
	State   string         `json:"state"`
	Epoch   uint64         `json:"epoch"`
	Highest uint64         `json:"highest"`
	Holder  fencing.Holder `json:"holder"` // the latest activation the node knows of
	// Note says, when the state is unknown, why and what would resolve it.
	Note string `json:"note,omitempty"`
}

// migrateRequest is the first frame of a migrate stream.
type migrateRequest struct {
	Kind    string       `json:"kind"`
	Agent   string       `json:"agent"`
	Epoch   uint64       `json:"epoch,omitempty"` // pull: the epoch the asker holds the agent at
	Message *wireMessage `json:"message,omitempty"`
}

// migrateAnswer is the answer frame of a pull or a state question.
type migrateAnswer struct {
	Error  string       `json:"error,omitempty"`
	Pulled *Pulled      `json:"pulled,omitempty"`
	State  *HolderState `json:"state,omitempty"`
}

// wireMessage is a fencing.Message on the wire: sums in hex, file bytes in
// base64 (encoding/json's []byte).
type wireMessage struct {
	Type     uint8      `json:"type"`
	From     string     `json:"from"`
	To       string     `json:"to"`
	Agent    string     `json:"agent"`
	Epoch    uint64     `json:"epoch"`
	Re       uint8      `json:"re,omitempty"`
	Decision uint8      `json:"decision,omitempty"`
	Reason   uint8      `json:"reason,omitempty"`
	Highest  uint64     `json:"highest,omitempty"`
	Files    []wireFile `json:"files,omitempty"`
	Missing  []int      `json:"missing,omitempty"`
	Index    int        `json:"index,omitempty"`
	Data     []byte     `json:"data,omitempty"`
	Nonce    uint64     `json:"nonce,omitempty"`
	Info     *wireInfo  `json:"info,omitempty"`
	Detail   string     `json:"detail,omitempty"`
	Handover []byte     `json:"handover,omitempty"`
}

type wireFile struct {
	Name string `json:"name"`
	Sum  string `json:"sha256"`
	Size int64  `json:"size"`
}

type wireInfo struct {
	Known   bool           `json:"known"`
	State   uint8          `json:"state"`
	Epoch   uint64         `json:"epoch"`
	Peer    string         `json:"peer"`
	Holder  fencing.Holder `json:"holder"`
	Decided uint8          `json:"decided"`
	Floor   uint64         `json:"floor"`
}

func toWire(m fencing.Message) *wireMessage {
	w := &wireMessage{Type: uint8(m.Type), From: m.From, To: m.To, Agent: m.Agent, Epoch: m.Epoch, Re: uint8(m.Re),
		Decision: uint8(m.Decision), Reason: uint8(m.Reason), Highest: m.Highest, Missing: m.Missing, Index: m.Index,
		Data: m.Data, Nonce: m.Nonce, Detail: m.Detail, Handover: m.Handover}
	for _, f := range m.Files {
		w.Files = append(w.Files, wireFile{Name: f.Name, Sum: hex.EncodeToString(f.Sum[:]), Size: f.Size})
	}
	if m.Info != (fencing.Info{}) {
		i := m.Info
		w.Info = &wireInfo{Known: i.Known, State: uint8(i.State), Epoch: i.Epoch, Peer: i.Peer, Holder: i.Holder,
			Decided: uint8(i.Decided), Floor: i.Floor}
	}
	return w
}

// fromWire checks and converts a message read from a stream.
func fromWire(w *wireMessage) (fencing.Message, error) {
	m := fencing.Message{Type: fencing.MsgType(w.Type), From: w.From, To: w.To, Agent: w.Agent, Epoch: w.Epoch,
		Re: fencing.MsgType(w.Re), Decision: fencing.Decision(w.Decision), Reason: fencing.Reason(w.Reason),
		Highest: w.Highest, Missing: w.Missing, Index: w.Index, Data: w.Data, Nonce: w.Nonce, Detail: w.Detail, Handover: w.Handover}
	if len(m.Detail) > fencing.MaxDetail {
		return m, fmt.Errorf("migrate message: detail of %d bytes, at most %d", len(m.Detail), fencing.MaxDetail)
	}
	if len(m.Handover) > fencing.MaxHandover {
		return m, fmt.Errorf("migrate message: handover of %d bytes, at most %d", len(m.Handover), fencing.MaxHandover)
	}
	for _, f := range w.Files {
		b, err := hex.DecodeString(f.Sum)
		if err != nil || len(b) != 32 {
			return m, fmt.Errorf("%w: file %q: sha256 %q is not 64 hex digits", ErrProtocol, f.Name, f.Sum)
		}
		if f.Size < 0 {
			return m, fmt.Errorf("%w: file %q: negative size", ErrProtocol, f.Name)
		}
		var ff fencing.File
		ff.Name, ff.Size = f.Name, f.Size
		copy(ff.Sum[:], b)
		m.Files = append(m.Files, ff)
	}
	for _, i := range m.Missing {
		if i < 0 {
			return m, fmt.Errorf("%w: a negative file index", ErrProtocol)
		}
	}
	if i := w.Info; i != nil {
		m.Info = fencing.Info{Known: i.Known, State: fencing.State(i.State), Epoch: i.Epoch, Peer: i.Peer,
			Holder: i.Holder, Decided: fencing.Decision(i.Decided), Floor: i.Floor}
	}
	return m, nil
}

// HandleMigrate serves /tern/migrate/1.0.0 on h for node. A fencing
// message is handed to the node only if its sender is the peer at the
// other end of the stream and it names the agent of the request; anything
// else resets the stream. Which peers may connect at all is the gater's.
func HandleMigrate(h host.Host, node MigrateNode, log *slog.Logger) {
	h.SetStreamHandler(MigrateID, func(s network.Stream) {
		_ = s.SetDeadline(time.Now().Add(MigrateTimeout))
		remote := s.Conn().RemotePeer().String()
		err := ServeMigrate(s, node, remote)
		if err != nil {
			s.Reset()
		} else {
			err = Finish(s)
		}
		if err != nil {
			log.Warn("migrate request from a peer failed", "peer", remote, "err", err)
		}
	})
}

// ServeMigrate answers one migrate request from remote on rw.
func ServeMigrate(rw io.ReadWriter, node MigrateNode, remote string) error {
	r := bufio.NewReader(rw)
	p, err := ReadFrame(r, MaxMigrateFrame)
	if err != nil {
		return err
	}
	var req migrateRequest
	if err := json.Unmarshal(p, &req); err != nil {
		return fmt.Errorf("%w: migrate request: %v", ErrProtocol, err)
	}
	var ans migrateAnswer
	switch req.Kind {
	case kindMessage:
		if req.Message == nil {
			return fmt.Errorf("%w: a message request without a message", ErrProtocol)
		}
		msg, err := fromWire(req.Message)
		if err != nil {
			return err
		}
		if msg.From != remote || msg.Agent != req.Agent {
			return fmt.Errorf("%w: a message from %s for %s came from %s for %s", ErrProtocol, msg.From, msg.Agent, remote, req.Agent)
		}
		return node.Deliver(remote, msg)
	case kindPull:
		ctx, cancel := clock.WithTimeout(clockOf(rw), context.Background(), MigrateTimeout)
		defer cancel()
		pulled, err := node.Pull(ctx, remote, req.Agent, req.Epoch)
		if err != nil {
			ans.Error = err.Error()
		} else {
			ans.Pulled = &pulled
		}
	case kindState:
		st, err := node.HolderOf(req.Agent)
		if err != nil {
			ans.Error = err.Error()
		} else {
			ans.State = &st
		}
	default:
		return fmt.Errorf("%w: unknown migrate request %q", ErrProtocol, req.Kind)
	}
	b, err := json.Marshal(ans)
	if err != nil {
		return err
	}
	return WriteFrame(rw, b)
}

// ErrPeerRefused carries an error a peer answered with.
var ErrPeerRefused = errors.New("the peer refused")

// SendMigrate sends one fencing message to p, on a stream of its own.
func SendMigrate(ctx context.Context, h host.Host, p peer.ID, msg fencing.Message) error {
	_, err := migrateRequestTo(ctx, h, p, migrateRequest{Kind: kindMessage, Agent: msg.Agent, Message: toWire(msg)}, false)
	return err
}

// AskPull asks p to pull the agent from this node, which holds it at
// epoch, now (see MigrateNode.Pull) and returns what p holds afterwards.
func AskPull(ctx context.Context, h host.Host, p peer.ID, agent string, epoch uint64) (Pulled, error) {
	ans, err := migrateRequestTo(ctx, h, p, migrateRequest{Kind: kindPull, Agent: agent, Epoch: epoch}, true)
	if err != nil {
		return Pulled{}, err
	}
	if ans.Pulled == nil {
		return Pulled{}, fmt.Errorf("%w: a pull answer without its result", ErrProtocol)
	}
	return *ans.Pulled, nil
}

// AskHolder asks p where the agent stands on it.
func AskHolder(ctx context.Context, h host.Host, p peer.ID, agent string) (HolderState, error) {
	ans, err := migrateRequestTo(ctx, h, p, migrateRequest{Kind: kindState, Agent: agent}, true)
	if err != nil {
		return HolderState{}, err
	}
	if ans.State == nil {
		return HolderState{}, fmt.Errorf("%w: a state answer without the state", ErrProtocol)
	}
	return *ans.State, nil
}

// migrateRequestTo sends req to p on a new stream and, if answered, reads
// the answer. The stream is reset on any error.
func migrateRequestTo(ctx context.Context, h host.Host, p peer.ID, req migrateRequest, answered bool) (migrateAnswer, error) {
	var ans migrateAnswer
	s, err := h.NewStream(ctx, p, MigrateID)
	if err != nil {
		return ans, err
	}
	deadline := time.Now().Add(MigrateTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = s.SetDeadline(deadline)
	b, err := json.Marshal(req)
	if err == nil {
		err = WriteFrame(s, b)
	}
	if err == nil && answered {
		var p []byte
		if p, err = ReadFrame(bufio.NewReader(s), MaxMigrateFrame); err == nil {
			if uerr := json.Unmarshal(p, &ans); uerr != nil {
				err = fmt.Errorf("%w: migrate answer: %v", ErrProtocol, uerr)
			}
		}
	}
	if err != nil {
		s.Reset()
		return ans, err
	}
	// A message has no answer: the server's clean end says it was
	// delivered (it resets the stream if it was not).
	if err := Finish(s); err != nil {
		return ans, err
	}
	if ans.Error != "" {
		return ans, fmt.Errorf("%w: %s", ErrPeerRefused, ans.Error)
	}
	return ans, nil
}
