package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/internal/clock"
)

// clocked is a host or a stream that keeps time of its own (the
// simulator's in-memory network does, so that it decides when what waits
// for a timeout wakes): the exchanges over it are timed on its clock.
type clocked interface{ Clock() clock.Clock }

// clockOf is the clock the exchanges over x, a host or a stream, are
// timed on: its own, or the real one.
func clockOf(x any) clock.Clock {
	if c, ok := x.(clocked); ok {
		return c.Clock()
	}
	return clock.Real
}

// Finish ends an exchange on s once this side has written everything it
// will and read everything it expected: it closes its writing side, reads
// the peer's end (anything more is a protocol error) and closes the
// stream. Both sides of every protocol end this way, requester and server
// alike, so neither stops reading while the other still writes.
//
// The peer's clean end is the exchange's outcome: a server that failed
// resets the stream, so a requester that reads the end knows its request
// was carried out. The error of closing the writing side is not: on QUIC
// it fails ("close called for canceled stream") when the peer has already
// stopped reading, which an older peer does as soon as it has what it
// wanted, and on any transport the end that follows says whether the
// exchange went well. A failure resets the stream.
func Finish(s network.Stream) error {
	_ = s.CloseWrite()
	var b [1]byte
	n, err := s.Read(b[:])
	switch {
	case n > 0 || err == nil:
		s.Reset()
		return fmt.Errorf("%w: data after the end of the exchange", ErrProtocol)
	case !errors.Is(err, io.EOF):
		s.Reset()
		return fmt.Errorf("the peer did not end the exchange cleanly: %w", err)
	}
	_ = s.Close() // both sides have ended: nothing is left to fail
	return nil
}

// SyncTimeout bounds one whole sync exchange on a libp2p stream: a peer
// that stalls is reset, never waited for.
const SyncTimeout = 2 * time.Minute

// syncMemory is reserved in a stream's resource scope while it syncs: the
// read buffer and a typical batch of frames. (An exceptional frame of up
// to MaxSyncFrame is allocated when it comes; reserving that much for
// every stream would exhaust a peer's default limits with two streams.)
const syncMemory = 1 << 20

// HandleSync serves /tern/sync/1.0.0 on h from j. Each stream gets a
// deadline and a memory reservation; any error resets it, and is logged.
// Which peers may open the stream at all is the host's connection gater's
// business; which agents they may sync is j's.
func HandleSync(h host.Host, j Journals, log *slog.Logger) {
	h.SetStreamHandler(SyncID, func(s network.Stream) {
		remote := s.Conn().RemotePeer()
		if err := s.Scope().ReserveMemory(syncMemory, network.ReservationPriorityMedium); err != nil {
			log.Warn("sync refused: resource limit", "peer", remote, "err", err)
			s.Reset()
			return
		}
		defer s.Scope().ReleaseMemory(syncMemory)
		ctx, cancel := clock.WithTimeout(clockOf(s), context.Background(), SyncTimeout)
		defer cancel()
		_ = s.SetDeadline(time.Now().Add(SyncTimeout))
		stats, err := Respond(ctx, s, j, remote.String())
		if errors.Is(err, ErrNotShared) {
			// Normal at a first pairing: the peer asks before this node
			// has taken the capsule it shares (or after it stopped sharing).
			log.Debug("sync of a capsule this node does not hold or share", "peer", remote, "err", err)
			s.Reset()
			return
		}
		if err != nil {
			log.Warn("sync with peer failed", "peer", remote, "err", err)
			s.Reset()
			return
		}
		if err := Finish(s); err != nil {
			log.Warn("sync with peer failed at its end", "peer", remote, "err", err)
			return
		}
		log.Debug("synced", "peer", remote, "sent", stats.Sent, "received", stats.Received)
	})
}

// Sync runs one exchange for agent with peer p over a new stream: both end
// up holding the union of their events. The stream is reset on any error.
func Sync(ctx context.Context, h host.Host, p peer.ID, agent string, j Journals) (SyncStats, error) {
	ctx, cancel := clock.WithTimeout(clockOf(h), ctx, SyncTimeout)
	defer cancel()
	s, err := h.NewStream(ctx, p, SyncID)
	if err != nil {
		return SyncStats{}, fmt.Errorf("sync %s with %s: %w", agent, p, err)
	}
	if err := s.Scope().ReserveMemory(syncMemory, network.ReservationPriorityMedium); err != nil {
		s.Reset()
		return SyncStats{}, fmt.Errorf("sync %s with %s: %w", agent, p, err)
	}
	defer s.Scope().ReleaseMemory(syncMemory)
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	stats, err := Initiate(ctx, s, j, p.String(), agent)
	if err != nil {
		s.Reset()
		return stats, fmt.Errorf("sync %s with %s: %w", agent, p, err)
	}
	// The responder ends its side once it has stored what we sent.
	if err := Finish(s); err != nil {
		return stats, fmt.Errorf("sync %s with %s: %w", agent, p, err)
	}
	return stats, nil
}

// BlobTimeout bounds one blob stream; a large blob that needs longer is
// resumed on a new stream.
const BlobTimeout = 10 * time.Minute

// MaxBlobStreams bounds how many blob streams a node serves at once.
const MaxBlobStreams = 8

// blobServeMemory is what serving a blob stream holds at most: the
// request's reader and one data frame. It is reserved at medium priority,
// so that libp2p's default limit for one peer's streams of one protocol
// (16 MiB, 60 % of it at that priority) leaves room for MaxBlobStreams of
// them: at low priority (40 %), a peer's fourth stream at once (a fetch's
// workers, an offer's, a have query) was reset.
const blobServeMemory = 4<<10 + binary.MaxVarintLen64 + maxBlobFrame

// HandleBlob serves /tern/blob/1.0.0 on h from src, at most MaxBlobStreams
// at a time (more are reset, and their peers retry).
func HandleBlob(h host.Host, src BlobSource, log *slog.Logger) {
	slots := make(chan struct{}, MaxBlobStreams)
	h.SetStreamHandler(BlobID, func(s network.Stream) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		default:
			s.Reset()
			return
		}
		if err := s.Scope().ReserveMemory(blobServeMemory, network.ReservationPriorityMedium); err != nil {
			s.Reset()
			return
		}
		defer s.Scope().ReleaseMemory(blobServeMemory)
		_ = s.SetDeadline(time.Now().Add(BlobTimeout))
		err := ServeBlob(s, src, s.Conn().RemotePeer().String())
		if err != nil {
			s.Reset()
		} else {
			err = Finish(s)
		}
		if err != nil {
			log.Debug("blob request failed", "peer", s.Conn().RemotePeer(), "err", err)
		}
	})
}

// Fetch fetches one of the agent's blobs from p into the partial file (see
// FetchBlob).
func Fetch(ctx context.Context, h host.Host, p peer.ID, agent, sha256Hex, partial string, progress Progress) (int64, error) {
	return onBlobStream(ctx, h, p, func(s network.Stream, reserve func(int) error) (int64, error) {
		return fetchBlob(s, agent, sha256Hex, partial, progress, reserve)
	})
}

// onBlobStream runs fetch on a new BlobID stream to p, within BlobTimeout,
// memory reserved in the stream's scope as fetch asks (fetchReservation);
// the stream is reset if fetch fails, and ended cleanly if not.
func onBlobStream[N int | int64](ctx context.Context, h host.Host, p peer.ID, fetch func(s network.Stream, reserve func(int) error) (N, error)) (N, error) {
	ctx, cancel := clock.WithTimeout(clockOf(h), ctx, BlobTimeout)
	defer cancel()
	s, err := h.NewStream(ctx, p, BlobID)
	if err != nil {
		return 0, err
	}
	reserve, release := fetchReservation(s)
	defer release()
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	n, err := fetch(s, reserve)
	if err != nil {
		s.Reset()
		return n, err
	}
	return n, Finish(s)
}

// fetchReservation returns how a fetch on s reserves memory in the
// stream's scope as it learns what its blobs need (at most what the
// largest needs; a reservation only grows), and how it gives it back.
func fetchReservation(s network.Stream) (reserve func(n int) error, release func()) {
	reserved := 0
	reserve = func(n int) error {
		if n <= reserved {
			return nil
		}
		if err := s.Scope().ReserveMemory(n-reserved, network.ReservationPriorityLow); err != nil {
			return err
		}
		reserved = n
		return nil
	}
	return reserve, func() { s.Scope().ReleaseMemory(reserved) }
}

// FetchMany fetches the agent's blobs named hashes from p on one stream
// (see FetchBlobs), and returns how many of them it got to.
func FetchMany(ctx context.Context, h host.Host, p peer.ID, agent string, hashes []string, partial func(string) string, begin func(string) Progress, done BlobDone) (int, error) {
	return onBlobStream(ctx, h, p, func(s network.Stream, reserve func(int) error) (int, error) {
		return fetchBlobs(s, agent, hashes, partial, begin, done, reserve)
	})
}

// PeerHas asks p which of hashes it holds in the agent's capsule, in
// queries of at most MaxHaveQuery names.
func PeerHas(ctx context.Context, h host.Host, p peer.ID, agent string, hashes []string) ([]string, error) {
	var held []string
	for len(hashes) > 0 {
		batch := hashes[:min(len(hashes), MaxHaveQuery)]
		hashes = hashes[len(batch):]
		s, err := h.NewStream(ctx, p, BlobID)
		if err != nil {
			return nil, err
		}
		_ = s.SetDeadline(time.Now().Add(time.Minute))
		got, err := AskHave(s, agent, batch)
		if err != nil {
			s.Reset()
			return nil, err
		}
		if err := Finish(s); err != nil {
			return nil, err
		}
		held = append(held, got...)
	}
	return held, nil
}

// CapsuleTimeout bounds one capsule stream (a list, or one whole tar).
const CapsuleTimeout = 30 * time.Minute

// HandleCapsules serves /tern/capsule/1.0.0 on h from c.
func HandleCapsules(h host.Host, c Capsules, log *slog.Logger) {
	h.SetStreamHandler(CapsuleID, func(s network.Stream) {
		_ = s.SetDeadline(time.Now().Add(CapsuleTimeout))
		err := ServeCapsules(s, c, s.Conn().RemotePeer().String())
		if err != nil {
			s.Reset()
		} else {
			err = Finish(s)
		}
		if err != nil {
			log.Debug("capsule request failed", "peer", s.Conn().RemotePeer(), "err", err)
		}
	})
}

// PeerCapsules asks p which agents it shares with us, with the
// VectorDigest of each it sends.
func PeerCapsules(ctx context.Context, h host.Host, p peer.ID) ([]string, map[string]string, error) {
	s, err := h.NewStream(ctx, p, CapsuleID)
	if err != nil {
		return nil, nil, err
	}
	_ = s.SetDeadline(time.Now().Add(time.Minute))
	ids, vectors, err := ListCapsules(s)
	if err != nil {
		s.Reset()
		return nil, nil, err
	}
	return ids, vectors, Finish(s)
}

// TakeCapsule copies the agent's capsule from p as a tar into w, with all
// its blobs or its small ones only (see FetchCapsule).
func TakeCapsule(ctx context.Context, h host.Host, p peer.ID, agent string, all bool, w io.Writer, max int64) (int64, error) {
	s, err := h.NewStream(ctx, p, CapsuleID)
	if err != nil {
		return 0, err
	}
	_ = s.SetDeadline(time.Now().Add(CapsuleTimeout))
	n, err := FetchCapsule(s, agent, all, w, max)
	if err != nil {
		s.Reset()
		return n, err
	}
	return n, Finish(s)
}
