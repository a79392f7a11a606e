package node

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tern-dev/tern/protocol"
)

// metrics are what a node exposes at /metrics for Prometheus.
type metrics struct {
	reg            *prometheus.Registry
	syncs          *prometheus.CounterVec
	eventsSent     prometheus.Counter
	eventsReceived prometheus.Counter
	syncBytes      *prometheus.CounterVec
	blobBytes      prometheus.Counter
	gossip         *prometheus.CounterVec
	rounds         prometheus.Counter
	alike          prometheus.Counter
}

func newMetrics(n *Node) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tern_sync_exchanges_total", Help: "Journal sync exchanges this node started, by result.",
		}, []string{"result"}),
		eventsSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tern_sync_events_sent_total", Help: "Events sent to peers by exchanges this node started.",
		}),
		eventsReceived: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tern_sync_events_received_total", Help: "Events received from peers by exchanges this node started.",
		}),
		syncBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tern_sync_bytes_total", Help: "Frame bytes of exchanges this node started, by direction.",
		}, []string{"direction"}),
		blobBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tern_blob_bytes_received_total", Help: "Blob bytes received from peers (before their hash check).",
		}),
		gossip: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tern_gossip_events_total", Help: "Events peers gossiped, by what this node did with them: accepted (stored and forwarded), ignored (held already, or a gap for anti-entropy to fill), rejected.",
		}, []string{"result"}),
		rounds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tern_sync_rounds_total", Help: "Sync rounds with a peer this node ran to their end (over every capsule).",
		}),
		alike: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tern_sync_alike_total", Help: "Capsules a round found the peer holding alike from its list's digests, so that no exchange ran.",
		}),
	}
	m.reg.MustRegister(m.syncs, m.eventsSent, m.eventsReceived, m.syncBytes, m.blobBytes, m.gossip, m.rounds, m.alike,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tern_peers_connected", Help: "Paired peers connected now."},
			func() float64 { return float64(len(n.host.Network().Peers())) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tern_capsules", Help: "Capsules this node holds."},
			func() float64 { ids, _ := n.store.List(); return float64(len(ids)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tern_peers_paired", Help: "Peers in the allowlist."},
			func() float64 { return float64(len(n.peers.List())) }),
	)
	return m
}

// observe records one exchange this node started.
func (m *metrics) observe(st protocol.SyncStats, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.syncs.WithLabelValues(result).Inc()
	m.eventsSent.Add(float64(st.Sent))
	m.eventsReceived.Add(float64(st.Received))
	m.syncBytes.WithLabelValues("sent").Add(float64(st.BytesSent))
	m.syncBytes.WithLabelValues("received").Add(float64(st.BytesReceived))
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
