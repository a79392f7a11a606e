package capsule

import (
	"context"
	"fmt"
	"time"

	"github.com/tern-dev/tern/journal"
)

// Heal resolves the forks of s's machine chain in this capsule (see
// journal.Heal): it appends the branches it sets aside, signed again after
// the branch it keeps, and a chain.healed event naming what they replace,
// as one atomic rewrite of the journal; then it brings snapshot.json and
// the editable files to the healed journal and seals it. It returns the
// events it appended. Appends other goroutines have in flight on this Dir
// fail with journal.ErrClosed; later ones continue the healed chain.
// Errors wrap journal.ErrNothingToHeal when the chain is whole.
func (d *Dir) Heal(ctx context.Context, s journal.Signer) ([]*journal.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d.jlMu.Lock()
	healed, err := d.appendHeal(s)
	d.jlMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("heal %s: %w", d.dir, err)
	}
	d.log.Warn("healed this machine's chain", "capsule", d.dir, "machine", s.Machine(), "signed_again", len(healed)-1)
	d.deriveMu.Lock()
	defer d.deriveMu.Unlock()
	files, err := d.derivedUpdates(nil)
	if err != nil {
		return healed, err
	}
	return healed, d.commit(files, nil)
}

// appendHeal closes the journal's Log, appends the heal's events to the
// file atomically, and leaves the Log to be reopened on next use. d.jlMu
// held.
func (d *Dir) appendHeal(s journal.Signer) ([]*journal.Event, error) {
	jl := d.jl
	if jl == nil {
		var err error
		if jl, err = d.openLog(); err != nil {
			return nil, err
		}
	}
	events := jl.Events()
	d.jl = nil
	if err := jl.Close(); err != nil {
		return nil, err
	}
	healed, err := journal.Heal(events, s, time.Now())
	if err != nil {
		return nil, err
	}
	return healed, journal.ExtendFile(d.path(JournalFile), healed)
}
