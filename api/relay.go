package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/sse"
	"github.com/tern-dev/tern/protocol"
	"github.com/tern-dev/tern/session"
)

// TurnRelayID is the protocol by which a node follows a turn that runs on
// a peer: a client that followed the turn on the node the agent left gets
// the rest of it through that node, without noticing the move.
//
// The asking node sends one frame, {"agent", "session", "turn", "after"};
// the peer answers with the turn's server-sent events after that sequence
// number, exactly as its HTTP API streams them, and closes the stream
// after turn.ended, or after a "moved" event when the agent moved on.
const TurnRelayID = "/tern/turn/1.0.0"

// relayRequest is the frame that asks a peer for a turn's events.
type relayRequest struct {
	Agent   string `json:"agent"`
	Session string `json:"session"`
	Turn    string `json:"turn"`
	After   int    `json:"after"`
}

// ServeRelay answers one TurnRelayID stream from a paired peer (node
// lets no one else connect): it reads the request and streams the turn.
// False means the request was refused, or the stream could not be
// written to the turn's end or move; the node then resets the stream.
func (srv *Server) ServeRelay(ctx context.Context, stream io.ReadWriter) bool {
	p, err := protocol.ReadFrame(bufio.NewReader(stream), 4<<10)
	if err != nil {
		return false
	}
	var req relayRequest
	if err := json.Unmarshal(p, &req); err != nil || !capsule.ValidAgentID(req.Agent) || req.After < 0 || !srv.node.Holds(req.Agent) {
		return false
	}
	st, err := srv.rt.State(req.Agent)
	if err != nil {
		return false
	}
	sess := st.Session(req.Session)
	if sess == nil || sess.Turn(req.Turn) == nil {
		return false
	}
	out := &sseOut{w: stream}
	moved, _ := srv.streamTurn(ctx, out, req.Agent, sess.Turn(req.Turn), req.After)
	if moved != "" {
		out.buf.Write(encodeFrame(jsonFrame("moved", map[string]string{"peer": moved})))
		return out.flush()
	}
	return true
}

// relayTurn copies the turn's events after sequence number after from
// the peer that runs the agent now to out, and returns the peer it moved
// on to, if it did, and the last sequence number written. An error means
// the peer could not be followed to the turn's end.
func (srv *Server) relayTurn(ctx context.Context, out *sseOut, to, agent string, t *session.Turn, after int) (movedTo string, sent int, err error) {
	sent = after
	id, err := peer.Decode(to)
	if err != nil {
		return "", sent, fmt.Errorf("%q is not a peer ID", to)
	}
	if id.String() == srv.cfg.Info.PeerID {
		return "", sent, errors.New("the agent's holder is this node, which does not run it")
	}
	stream, done, err := srv.node.OpenRelay(ctx, id)
	if err != nil {
		return "", sent, err
	}
	defer func() { done(err == nil) }() // the turn ended or moved: what follows is the peer's end
	req, _ := json.Marshal(relayRequest{Agent: agent, Session: t.Session, Turn: t.ID, After: after})
	if err := protocol.WriteFrame(stream, req); err != nil {
		return "", sent, err
	}
	// Each frame is read as a browser would and written again whole, so
	// no field of the peer's can become another frame here; comments (the
	// peer's heartbeats) are passed on as they come.
	frames := sse.NewReader(stream, MaxFrame)
	frames.Comment = func(text string) {
		if b, err := sse.AppendComment(nil, text); err == nil {
			out.buf.Write(b)
			out.flush() // a client that is gone cancels ctx, which ends the stream
		}
	}
	for {
		f, err := frames.Next()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return "", sent, errors.New("the peer's stream ended before the turn did")
		}
		if err != nil {
			return "", sent, err
		}
		if f.Event == "moved" {
			var m struct {
				Peer string `json:"peer"`
			}
			json.Unmarshal([]byte(f.Data), &m)
			return m.Peer, sent, nil
		}
		seq, _ := strconv.Atoi(f.ID)
		if seq == 0 || seq > sent { // a delta, or an event not written yet
			out.buf.Write(encodeFrame(f))
			if seq > 0 {
				sent = seq
			}
			if !out.flush() {
				return "", sent, ctx.Err()
			}
		}
		if f.Event == session.TurnEnded {
			return "", sent, nil
		}
	}
}
