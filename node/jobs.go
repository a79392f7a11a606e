package node

// jobs runs background work by key, one run per key at a time: asking
// while a run is going makes it run once more when it ends, at the highest
// level asked meanwhile, so bursts of requests never pile up. Its maps are
// guarded by the Node's mu.
type jobs[K comparable] struct {
	running map[K]bool
	again   map[K]int // the level asked for while running; 0: none
}

func newJobs[K comparable]() jobs[K] {
	return jobs[K]{running: map[K]bool{}, again: map[K]int{}}
}

// startJob runs work(level) for k on n's wait group, or, if a run for k is
// going, asks it for one more. Nothing starts once n is closing (Close
// waits for the runs already going). n.mu must not be held.
func startJob[K comparable](n *Node, j *jobs[K], k K, level int, work func(level int)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctx.Err() != nil {
		return
	}
	if j.running[k] {
		j.again[k] = max(j.again[k], level)
		return
	}
	j.running[k] = true
	n.wg.Go(n.held(func() {
		for {
			work(level)
			n.mu.Lock()
			level = j.again[k]
			delete(j.again, k)
			if level == 0 || n.ctx.Err() != nil {
				delete(j.running, k)
				n.mu.Unlock()
				return
			}
			n.mu.Unlock()
		}
	}))
}
