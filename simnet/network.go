package simnet

import (
	"github.com/tern-dev/tern/fencing"
)

// send is the transport adapter of h: it fills in a transfer's bytes, as the
// real one reads them from the capsule, and puts the message on the network.
func (r *Runner) send(h *host, msg *fencing.Message) {
	if msg.Type == fencing.MsgTransfer && msg.Index >= 0 && msg.Index < numFiles {
		msg.Data, _ = r.content.get(msg.Index, h.migVers[msg.Index])
	}
	switch msg.Type {
	case fencing.MsgPropose:
		h.lastProp = *msg
	case fencing.MsgActivate:
		h.lastAct = *msg
	}
	r.transmit(msg)
}

// transmit applies the network's faults to msg and schedules its delivery.
// Once healed, the network delivers everything, in 1 to 1+Jitter ticks.
func (r *Runner) transmit(msg *fencing.Message) {
	from, to := hostIndex(msg.From), hostIndex(msg.To)
	if from < 0 || to < 0 {
		r.violation("message between unknown nodes: %s", msg)
		return
	}
	latency := int64(1)
	if r.set.Jitter > 0 {
		latency += int64(r.rng.IntN(r.set.Jitter + 1))
	}
	if !r.healed {
		s := &r.set
		if r.cut[from*len(r.hosts)+to] > 0 {
			if r.trace != nil {
				r.tracef("cut: %s", msg)
			}
			return
		}
		if s.Drop > 0 && r.rng.Float64() < s.Drop {
			if r.trace != nil {
				r.tracef("drop: %s", msg)
			}
			return
		}
		if s.Delay > 0 && r.rng.Float64() < s.Delay {
			latency += int64(longDelayMin + r.rng.IntN(longDelayMax-longDelayMin+1))
		}
		if s.Replay > 0 && r.nhist > 0 && r.rng.Float64() < s.Replay {
			old := &r.history[r.rng.IntN(min(r.nhist, historySize))]
			if r.trace != nil {
				r.tracef("replay: %s", old)
			}
			r.enqueue(old, latency+int64(r.rng.IntN(longDelayMax)))
		}
		if s.Duplicate > 0 && r.rng.Float64() < s.Duplicate {
			r.enqueue(msg, latency+int64(1+r.rng.IntN(12)))
		}
		if s.Corrupt > 0 && msg.Type == fencing.MsgTransfer && len(msg.Data) > 0 && r.rng.Float64() < s.Corrupt {
			bad := *msg
			bad.Data = append([]byte(nil), msg.Data...)
			bad.Data[r.rng.IntN(len(bad.Data))] ^= 1 << r.rng.IntN(8)
			if r.trace != nil {
				r.tracef("corrupt: %s", msg)
			}
			if s.Replay > 0 {
				r.remember(&bad)
			}
			r.enqueue(&bad, latency)
			return
		}
		if s.Replay > 0 {
			r.remember(msg)
		}
	}
	r.enqueue(msg, latency)
}

// remember keeps msg for later replays.
func (r *Runner) remember(msg *fencing.Message) {
	r.history[r.nhist%historySize] = *msg
	r.nhist++
}

func (r *Runner) enqueue(msg *fencing.Message, latency int64) {
	var i int32
	if n := len(r.free); n > 0 {
		i = r.free[n-1]
		r.free = r.free[:n-1]
		r.slab[i] = *msg
	} else {
		i = int32(len(r.slab))
		r.slab = append(r.slab, *msg)
	}
	r.schedule(r.now+latency, evDeliver, int32(hostIndex(msg.To)), i)
}

func (r *Runner) release(i int32) {
	r.free = append(r.free, i) // overwritten when reused
}

// hostIndex parses the node ids "n0", "n1", … the runner gives its hosts.
func hostIndex(id string) int {
	if len(id) < 2 || id[0] != 'n' {
		return -1
	}
	n := 0
	for _, c := range id[1:] {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// partition cuts links for a while: every link between a random group and
// the rest, both ways, or one direction of one link.
func (r *Runner) partition(oneWay bool) {
	if r.healed {
		return
	}
	n := len(r.hosts)
	p := partition{oneWay: oneWay, active: true}
	if oneWay {
		p.a = r.rng.IntN(n)
		p.b = (p.a + 1 + r.rng.IntN(n-1)) % n
		if r.trace != nil {
			r.tracef("partition: n%d -> n%d cut", p.a, p.b)
		}
	} else {
		p.group = 1 + r.rng.Uint64N(1<<n-2) // neither empty nor everyone
		if r.trace != nil {
			r.tracef("partition: group %b cut off", p.group)
		}
	}
	r.applyPartition(&p, 1)
	r.relink()
	r.parts = append(r.parts, p)
	r.schedule(r.now+int64(partitionMin+r.rng.IntN(partitionMax-partitionMin+1)), evRepair, 0, int32(len(r.parts)-1))
}

func (r *Runner) repair(i int) {
	p := &r.parts[i]
	if !p.active {
		return
	}
	p.active = false
	r.applyPartition(p, -1)
	if r.trace != nil {
		r.tracef("partition %d repaired", i)
	}
	for _, h := range r.hosts {
		r.connectAll(h)
	}
}

func (r *Runner) applyPartition(p *partition, d int) {
	n := len(r.hosts)
	if p.oneWay {
		r.cut[p.a*n+p.b] += d
		return
	}
	for a := 0; a < n; a++ {
		for b := 0; b < n; b++ {
			if (p.group>>a)&1 != (p.group>>b)&1 {
				r.cut[a*n+b] += d
			}
		}
	}
}
