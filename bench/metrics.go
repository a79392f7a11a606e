package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/tern-dev/tern/node"
)

// syncCounters are a node's sync counters from its /metrics. Exchanges
// count only the ones the node started, so the traffic of an exchange is
// counted once, by its initiator, whichever way the events went.
type syncCounters struct {
	Exchanges      float64 // tern_sync_exchanges_total, every result
	Failed         float64 // tern_sync_exchanges_total{result="error"}
	EventsSent     float64 // tern_sync_events_sent_total
	EventsReceived float64 // tern_sync_events_received_total
	FrameBytes     float64 // tern_sync_bytes_total, both directions
	BlobBytes      float64 // tern_blob_bytes_received_total
	Rounds         float64 // tern_sync_rounds_total
	Alike          float64 // tern_sync_alike_total
}

func (c syncCounters) minus(o syncCounters) syncCounters {
	return syncCounters{c.Exchanges - o.Exchanges, c.Failed - o.Failed, c.EventsSent - o.EventsSent,
		c.EventsReceived - o.EventsReceived, c.FrameBytes - o.FrameBytes, c.BlobBytes - o.BlobBytes, c.Rounds - o.Rounds, c.Alike - o.Alike}
}

func (c syncCounters) plus(o syncCounters) syncCounters {
	return syncCounters{c.Exchanges + o.Exchanges, c.Failed + o.Failed, c.EventsSent + o.EventsSent,
		c.EventsReceived + o.EventsReceived, c.FrameBytes + o.FrameBytes, c.BlobBytes + o.BlobBytes, c.Rounds + o.Rounds, c.Alike + o.Alike}
}

// scrape reads n's sync counters from its /metrics endpoint, with the
// API's token, as Prometheus would.
func scrape(ctx context.Context, n *node.Node) (syncCounters, error) {
	var c syncCounters
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.Info().API+"/metrics", nil)
	if err != nil {
		return c, err
	}
	req.Header.Set("Authorization", "Bearer "+n.Info().Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, fmt.Errorf("scrape %s: %w", n.Info().API, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c, fmt.Errorf("scrape %s: %s", n.Info().API, resp.Status)
	}
	fields := map[string]*float64{
		"tern_sync_exchanges_total":       &c.Exchanges,
		"tern_sync_events_sent_total":     &c.EventsSent,
		"tern_sync_events_received_total": &c.EventsReceived,
		"tern_sync_bytes_total":           &c.FrameBytes,
		"tern_blob_bytes_received_total":  &c.BlobBytes,
		"tern_sync_rounds_total":          &c.Rounds,
		"tern_sync_alike_total":           &c.Alike,
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// A sample line is: name{labels} value
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		sum, ok := fields[name]
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return c, fmt.Errorf("scrape %s: %q: %v", n.Info().API, line, err)
		}
		*sum += v
		if name == "tern_sync_exchanges_total" && strings.Contains(line, `result="error"`) {
			c.Failed += v
		}
	}
	if err := sc.Err(); err != nil {
		return c, fmt.Errorf("scrape %s: %w", n.Info().API, err)
	}
	return c, nil
}

// scrapeAll sums the counters of every node.
func scrapeAll(ctx context.Context, nodes ...*node.Node) (syncCounters, error) {
	var total syncCounters
	for _, n := range nodes {
		c, err := scrape(ctx, n)
		if err != nil {
			return total, err
		}
		total = total.plus(c)
	}
	return total, nil
}
