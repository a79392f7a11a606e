package protocol

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/internal/clock"
)

// OfferID is the libp2p protocol ID of blob offers. A node storing blobs
// that an event of an agent will name once it commits (a snapshot of a
// tree it is taking) names them to its peers as they land, so that a peer
// fetches them while the rest is still being stored, not after. An offer
// is a hint: the peer fetches the blobs over BlobID, checks each against
// its name, and keeps them aside; nothing it holds changes until an event
// it accepts names them.
const OfferID = "/tern/offer/1.0.0"

// MaxOffer is the most blobs one offer names.
const MaxOffer = 1024

// maxOfferFrame bounds an offer's frame: MaxOffer names and an agent id.
const maxOfferFrame = 128 + MaxOffer*67

// Offer names blobs of an agent's capsule that the offering node holds
// and that an event will name soon.
type Offer struct {
	Agent string   `json:"agent"`
	Blobs []string `json:"blobs"` // sha256, hex
}

// check says what is wrong with an offer a peer sent, if anything.
func (o Offer) check() error {
	switch {
	case o.Agent == "":
		return fmt.Errorf("%w: an offer names no agent", ErrProtocol)
	case len(o.Blobs) == 0 || len(o.Blobs) > MaxOffer:
		return fmt.Errorf("%w: an offer names %d blobs, not 1 to %d", ErrProtocol, len(o.Blobs), MaxOffer)
	}
	for _, h := range o.Blobs {
		if !isSHA256Hex(h) {
			return fmt.Errorf("%w: an offer names %q, not a sha256", ErrProtocol, h)
		}
	}
	return nil
}

// ServeOffer reads one offer from rw and hands it to take, which must not
// block (it starts the fetch, if any, in the background).
func ServeOffer(rw io.Reader, take func(Offer)) error {
	var o Offer
	if err := readJSON(bufio.NewReader(rw), maxOfferFrame, "an offer", &o); err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	take(o)
	return nil
}

// OfferTimeout bounds one offer's exchange.
const OfferTimeout = 30 * time.Second

// HandleOffer serves OfferID on h: each offer a peer sends goes to take
// with the peer's id (see ServeOffer).
func HandleOffer(h host.Host, take func(p peer.ID, o Offer), log *slog.Logger) {
	h.SetStreamHandler(OfferID, func(s network.Stream) {
		_ = s.SetDeadline(time.Now().Add(OfferTimeout))
		p := s.Conn().RemotePeer()
		err := ServeOffer(s, func(o Offer) { take(p, o) })
		if err != nil {
			s.Reset()
		} else {
			err = Finish(s)
		}
		if err != nil {
			log.Debug("blob offer failed", "peer", p, "err", err)
		}
	})
}

// SendOffer offers o to p. A peer that does not speak OfferID (an older
// tern) fails it; the blobs then reach it as they always did, once the
// event naming them does.
func SendOffer(ctx context.Context, h host.Host, p peer.ID, o Offer) error {
	if err := o.check(); err != nil {
		return err
	}
	data, err := json.Marshal(o)
	if err != nil {
		return err
	}
	ctx, cancel := clock.WithTimeout(clockOf(h), ctx, OfferTimeout)
	defer cancel()
	s, err := h.NewStream(ctx, p, OfferID)
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	if err := WriteFrame(s, data); err != nil {
		s.Reset()
		return err
	}
	return Finish(s)
}

// A snapshot names the blobs it stores in offers of up to offerBatch,
// each sent once offerWait has passed since its first blob.
const (
	offerBatch = 256
	offerWait  = 10 * time.Millisecond
)

// OfferAsStored batches the names of blobs as a snapshot stores them: add
// takes one (from any goroutine), and send gets each batch, on one
// goroutine, once it holds offerBatch names or offerWait has passed since
// its first; end sends what is left and returns once send has returned.
func OfferAsStored(send func(blobs []string)) (add func(sha256Hex string), end func()) {
	stored, done := make(chan string, offerBatch), make(chan struct{})
	go func() {
		defer close(done)
		var batch []string
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		flush := func() {
			timer.Stop()
			if len(batch) > 0 {
				send(batch)
				batch = nil
			}
		}
		for {
			select {
			case h, ok := <-stored:
				if !ok {
					flush()
					return
				}
				if len(batch) == 0 {
					timer.Reset(offerWait)
				}
				if batch = append(batch, h); len(batch) == offerBatch {
					flush()
				}
			case <-timer.C:
				flush()
			}
		}
	}()
	return func(h string) { stored <- h }, func() { close(stored); <-done }
}
