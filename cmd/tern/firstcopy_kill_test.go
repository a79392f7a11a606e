package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/store"
)

// pairedDaemons runs two tern nodes as processes, each paired with the
// other, on TCP (or on QUIC, if quic), and returns them.
func pairedDaemons(t *testing.T, quic ...bool) [2]*daemon {
	t.Helper()
	q := len(quic) > 0 && quic[0]
	ds := [2]*daemon{{t: t, home: t.TempDir(), port: freePort(t), quic: q}, {t: t, home: t.TempDir(), port: freePort(t), quic: q}}
	for _, d := range ds {
		d.start()
		t.Cleanup(d.kill)
	}
	var ids [2]string
	for i, d := range ds {
		var info node.Info
		data, _ := os.ReadFile(filepath.Join(d.home, node.InfoFile))
		json.Unmarshal(data, &info)
		ids[i] = info.PeerID
	}
	for i, d := range ds {
		o := 1 - i
		if code, _, errs := ternQuiet(d.home, "peer", "add", ids[o], ds[o].addr(), "--name", fmt.Sprint("n", o)); code != 0 {
			t.Fatalf("peer add: %s", errs)
		}
	}
	return ds
}

// bigAgent makes a capsule folder whose workspace snapshot holds files
// files of size random bytes each, and returns the folder, the agent id
// and the home of the machine that created it.
func bigAgent(t *testing.T, rng *rand.Rand, files, size int) (dir, agent, home string) {
	t.Helper()
	dir, home = filepath.Join(t.TempDir(), "agent"), t.TempDir()
	code, out, errs := ternQuiet(home, "capsule", "new", dir, "--name", "big")
	if code != 0 {
		t.Fatal(errs)
	}
	ws := t.TempDir()
	for i := range files {
		if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("part-%d.bin", i)), randomBytes(rng, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, errs := ternQuiet(home, "capsule", "snapshot", dir, ws); code != 0 {
		t.Fatal(errs)
	}
	return dir, strings.TrimSpace(out), home
}

// holdsWhole reports whether d's node lists the agent as held and
// complete.
func (d *daemon) holdsWhole(agent string) bool {
	code, out, _ := ternQuiet(d.home, "status", "--json")
	if code != 0 {
		return false
	}
	var st api.Status
	if json.Unmarshal([]byte(out), &st) != nil {
		return false
	}
	i := slices.IndexFunc(st.Capsules, func(c api.CapsuleStatus) bool { return c.ID == agent })
	return i >= 0 && !st.Capsules[i].Incomplete && st.Capsules[i].Damaged == ""
}

// leftovers lists what interrupted transfers and imports left in home.
func leftovers(home string) []string {
	var out []string
	parts, _ := os.ReadDir(filepath.Join(home, node.PartialDir))
	for _, p := range parts {
		out = append(out, filepath.Join(node.PartialDir, p.Name()))
	}
	imports, _ := filepath.Glob(filepath.Join(home, store.CapsulesDir, ".import-*"))
	for _, p := range imports {
		rel, _ := filepath.Rel(home, p)
		out = append(out, rel)
	}
	return out
}

// bytesUnder is the size of the files beneath the folders matching the
// patterns (filepath.Glob's), as they are at this moment: a measure of a
// copy's or an import's progress.
func bytesUnder(patterns ...string) int64 {
	var n int64
	for _, pattern := range patterns {
		dirs, _ := filepath.Glob(pattern)
		for _, dir := range dirs {
			filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
				if err == nil && e.Type().IsRegular() {
					if info, err := e.Info(); err == nil {
						n += info.Size()
					}
				}
				return nil // files come and go under a running copy
			})
		}
	}
	return n
}

// progressEvery is how often awaitProgress measures: a 64 MiB copy on
// this machine takes hundreds of times longer.
const progressEvery = 2 * time.Millisecond

// awaitProgress waits until measure reaches target, or ended (if not nil)
// is closed, and says which; it fails the test if neither happens within
// a minute.
func awaitProgress(t *testing.T, measure func() int64, target int64, ended <-chan struct{}) bool {
	t.Helper()
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for measure() < target {
		select {
		case <-tick.C:
		case <-ended:
			return false
		case <-deadline:
			t.Fatalf("%d bytes not reached within a minute (at %d)", target, measure())
		}
	}
	return true
}

// A first copy whose sender or receiver is killed at a random point
// resumes when it comes back, and ends with the same capsule on both
// sides, verified, and nothing left of the interrupted transfers.
func TestAFirstCopyResumesAfterKillNineOfEitherSide(t *testing.T) {
	if testing.Short() {
		t.Skip("runs and kills daemons")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 14))
	ds := pairedDaemons(t)
	sender, receiver := ds[0], ds[1]
	// The bytes a first copy brings: the four files of bigAgent.
	const copyBytes = 4 * 16 << 20
	// take imports a new capsule into the sender, kills kill (if not nil)
	// once the receiver has share of the copy's bytes (partly fetched or
	// adopted), and waits until the receiver holds the capsule whole. It
	// returns the agent and whether the capsule was still incomplete on
	// the receiver when the killed node was back (the kill cut the copy
	// short).
	take := func(round int, kill *daemon, share float64) (agent string, cut bool) {
		t.Helper()
		dir, agent, _ := bigAgent(t, rng, 4, 16<<20)
		if code, _, errs := ternQuiet(sender.home, "capsule", "import", dir); code != 0 {
			t.Fatalf("round %d: import: %s", round, errs)
		}
		if kill != nil {
			received := func() int64 {
				return bytesUnder(filepath.Join(receiver.home, node.PartialDir), filepath.Join(receiver.home, store.CapsulesDir, agent, capsule.BlobDir))
			}
			awaitProgress(t, received, int64(share*copyBytes), nil)
			kill.kill()
			kill.start()
			cut = !receiver.holdsWhole(agent)
		}
		err := poll(time.Minute, func() error {
			if receiver.holdsWhole(agent) {
				return nil
			}
			return errors.New("the receiver does not hold the capsule whole")
		})
		if err != nil {
			code, out, _ := ternQuiet(receiver.home, "status")
			t.Fatalf("round %d: %v after a minute (status exit %d):\n%s", round, err, code, out)
		}
		return agent, cut
	}
	take(0, nil, 0)
	agents, cuts := []string{}, 0
	for round := 1; round <= 20 || cuts < 10 && round <= 40; round++ {
		victim := ds[rng.IntN(2)]
		share := rng.Float64() // from before the copy begins to its last byte
		agent, cut := take(round, victim, share)
		agents = append(agents, agent)
		if cut {
			cuts++
		}
		t.Logf("round %d: killed %s at %.0f%% of the copy (cut it short: %v)", round, map[*daemon]string{sender: "the sender", receiver: "the receiver"}[victim], 100*share, cut)
	}
	if cuts < 10 {
		t.Fatalf("only %d kills cut a copy short: the test proved little", cuts)
	}
	sender.kill()
	receiver.kill()
	for _, d := range ds {
		if left := leftovers(d.home); len(left) > 0 {
			t.Errorf("%s keeps leftovers of interrupted transfers: %v", filepath.Base(d.home), left)
		}
	}
	for _, agent := range agents {
		var files [2]map[string]capsule.FileEntry
		for i, d := range ds {
			path := filepath.Join(d.home, store.CapsulesDir, agent)
			rep, err := capsule.Verify(path, capsule.VerifyOptions{})
			if err != nil || !rep.OK() {
				t.Fatalf("agent %s on %s does not verify: %v %v", agent, filepath.Base(d.home), err, rep.Issues())
			}
			c, err := capsule.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			files[i] = c.Manifest().Files
			c.Close()
		}
		for name, e := range files[0] {
			if name != capsule.JournalFile && files[1][name] != e {
				t.Errorf("agent %s: %s differs between the two nodes", agent, name)
			}
		}
	}
}

// An import killed at a random point leaves the node with the capsule
// whole or without it; an import that merges into a held capsule, killed,
// leaves the held capsule (as it was, or merged), never none.
func TestAnImportKilledAtRandomLeavesNothingOrAWholeCapsule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs and kills daemons")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 15))
	d := &daemon{t: t, home: t.TempDir(), port: freePort(t)}
	d.start()
	t.Cleanup(d.kill)

	dir, _, _ := bigAgent(t, rng, 4, 16<<20)
	if code, _, errs := ternQuiet(d.home, "capsule", "import", dir); code != 0 {
		t.Fatal(errs)
	}
	// What the node has staged of the imports under way: it stages a new
	// capsule's 64 MiB, then renames it into place; a merge stages as much,
	// then writes the merged capsule beside it.
	staged := func() int64 { return bytesUnder(filepath.Join(d.home, store.CapsulesDir, ".import-*")) }
	const importBytes = 4 * 16 << 20
	cut := 0
	// Sixteen rounds, and more (up to 40) until a kill cuts a new
	// capsule's import short: a test whose every kill came after the
	// import ended would prove little.
	for round := 1; round <= 16 || cut == 0 && round <= 40; round++ {
		merge := round%2 == 0 // into a capsule the node holds, with more events
		dir, agent, creator := bigAgent(t, rng, 4, 16<<20)
		if merge {
			if code, _, errs := ternQuiet(d.home, "capsule", "import", dir); code != 0 {
				t.Fatal(errs)
			}
			app := ternProcess(creator, draftLine(fmt.Sprint("round ", round)), "journal", "append", dir)
			if out, err := app.CombinedOutput(); err != nil {
				t.Fatalf("journal append: %v: %s", err, out)
			}
		}
		imp := ternProcess(d.home, "", "capsule", "import", dir)
		if err := imp.Start(); err != nil {
			t.Fatal(err)
		}
		ended := make(chan struct{})
		go func() { imp.Wait(); close(ended) }()
		// The kill comes once the node has staged share of the capsule's
		// bytes, or (share past what it stages) once the import ended.
		// Every other new capsule's import is cut while it stages, so
		// that some kills land in it.
		share := 2 * rng.Float64()
		if round%4 == 1 {
			share /= 2
		}
		at := fmt.Sprintf("with %.0f%% of its bytes staged", 100*share)
		if !awaitProgress(t, staged, int64(share*importBytes), ended) {
			at = "after it ended"
		}
		d.kill()
		<-ended
		d.start()
		whole := d.holdsWhole(agent)
		if merge && !whole {
			t.Fatalf("round %d: an interrupted merge left the node without the capsule it held", round)
		}
		path := filepath.Join(d.home, store.CapsulesDir, agent)
		_, err := os.Stat(path)
		switch {
		case !whole && !merge:
			cut++
		case whole:
			if rep, err := capsule.Verify(path, capsule.VerifyOptions{}); err != nil || len(rep.Problems) > 0 {
				t.Fatalf("round %d: the capsule the node holds does not verify: %v %v", round, err, rep.Problems)
			}
		case err == nil:
			t.Fatalf("round %d: the node has a folder for the agent but does not list it whole", round)
		}
		if left := leftovers(d.home); len(left) > 0 {
			t.Fatalf("round %d: leftovers of the interrupted import: %v", round, left)
		}
		t.Logf("round %d (merge %v): killed the node %s; it holds the capsule whole: %v", round, merge, at, whole)
	}
	if cut == 0 {
		t.Fatal("no kill cut a new capsule's import short: the test proved little")
	}
}
