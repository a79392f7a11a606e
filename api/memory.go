package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tern-dev/tern/memory"
)

// noteRequest is the body of POST /v1/agents/{agent}/memory.
type noteRequest struct {
	Text   string   `json:"text"`
	Tags   []string `json:"tags"`
	Revise string   `json:"revise"` // a note id: revise it instead of adding one
}

func (srv *Server) handleReindex(w http.ResponseWriter, r *http.Request) {
	agent, ok := srv.pathAgent(w, r)
	if !ok {
		return
	}
	count, err := srv.rt.ReindexMemory(r.Context(), agent)
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	writeJSON(w, map[string]int{"texts": count})
}

func (srv *Server) handleNotes(w http.ResponseWriter, r *http.Request) {
	agent, ok := srv.pathAgent(w, r)
	if !ok {
		return
	}
	notes, err := srv.rt.Notes(agent)
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	writeJSON(w, map[string]any{"notes": notes.Views()})
}

func (srv *Server) handleNote(w http.ResponseWriter, r *http.Request) {
	agent, ok := srv.pathAgent(w, r)
	if !ok {
		return
	}
	var req noteRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		srv.httpError(w, http.StatusBadRequest, fmt.Errorf("the request body: %v (want {\"text\": …, \"tags\": […], \"revise\": \"note_…\"})", err))
		return
	}
	id, err := srv.rt.Note(r.Context(), agent, req.Text, req.Tags, req.Revise)
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	w.Header().Set("Location", "/v1/agents/"+agent+"/memory/"+id)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]string{"note": id})
}

func (srv *Server) handleForget(w http.ResponseWriter, r *http.Request) {
	agent, ok := srv.pathAgent(w, r)
	if !ok {
		return
	}
	note := r.PathValue("note")
	if err := srv.rt.Forget(r.Context(), agent, note); err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	writeJSON(w, map[string]string{"note": note, "status": "removed"})
}

// handleSearch is GET /v1/agents/{agent}/memory/search?q=…&k=…&tag=…&since=…&until=….
func (srv *Server) handleSearch(w http.ResponseWriter, r *http.Request) {
	agent, ok := srv.pathAgent(w, r)
	if !ok {
		return
	}
	q, err := queryOf(r)
	if err != nil {
		srv.httpError(w, http.StatusBadRequest, err)
		return
	}
	results, err := srv.rt.SearchMemory(r.Context(), agent, q)
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	if results == nil {
		results = []memory.Result{}
	}
	writeJSON(w, map[string]any{"results": results})
}

// queryOf reads a search from the URL's query.
func queryOf(r *http.Request) (memory.Query, error) {
	v := r.URL.Query()
	q := memory.Query{Text: v.Get("q"), Tags: v["tag"]}
	if q.Text == "" {
		return q, fmt.Errorf("q is empty: give the text to search for")
	}
	if s := v.Get("k"); s != "" {
		k, err := strconv.Atoi(s)
		if err != nil || k < 1 || k > 1000 {
			return q, fmt.Errorf("k %q: give a number from 1 to 1000", s)
		}
		q.K = k
	}
	for _, b := range []struct {
		name string
		t    *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if s := v.Get(b.name); s != "" {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return q, fmt.Errorf("%s %q: give a time like 2026-12-01T00:00:00Z", b.name, s)
			}
			*b.t = t
		}
	}
	return q, nil
}
