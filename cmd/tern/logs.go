package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// lineHandler writes log records as one line each, like the rest of the
// CLI's output: "tern: warning: message (key=value, …)" for a command,
// and, for tern node (withTime), the time first: a person reads these.
// tern node --log-format json writes JSON records for machines instead.
type lineHandler struct {
	w        io.Writer
	mu       *sync.Mutex
	level    slog.Leveler
	withTime bool
	attrs    []slog.Attr
	group    string
}

func newLineHandler(w io.Writer, level slog.Leveler, withTime bool) *lineHandler {
	return &lineHandler{w: w, mu: &sync.Mutex{}, level: level, withTime: withTime}
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b bytes.Buffer
	if h.withTime {
		b.WriteString(r.Time.Format(time.TimeOnly) + " ")
	} else {
		b.WriteString("tern: ")
	}
	switch {
	case r.Level >= slog.LevelError:
		b.WriteString("error: ")
	case r.Level >= slog.LevelWarn:
		b.WriteString("warning: ")
	}
	b.WriteString(r.Message)
	var kv []string
	add := func(a slog.Attr) {
		if a.Equal(slog.Attr{}) {
			return
		}
		key := a.Key
		if h.group != "" {
			key = h.group + "." + key
		}
		v := a.Value.Resolve().String()
		if strings.ContainsAny(v, " \t\n") {
			v = fmt.Sprintf("%q", v)
		}
		kv = append(kv, key+"="+v)
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(func(a slog.Attr) bool { add(a); return true })
	if len(kv) > 0 {
		b.WriteString(" (" + strings.Join(kv, ", ") + ")")
	}
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.w.Write(b.Bytes())
	return err
}

func (h *lineHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr{}, h.attrs...), attrs...)
	return &c
}

func (h *lineHandler) WithGroup(name string) slog.Handler {
	c := *h
	if c.group != "" {
		name = c.group + "." + name
	}
	c.group = name
	return &c
}
