// Package memory is an agent's memory: notes kept as journal events
// (memory.note: added, revised, removed), folded into the notes a person
// reads (memory/working_memory.md, see Render and Edits) and a semantic
// index (memory/vector_index/index.json, see Index) that finds them
// offline. Both files are derived: the same events (and embedder) give
// the same bytes on every machine, and a reader rebuilds them rather than
// trust them. Notes written apart all survive a merge; two revisions of
// one note made apart stay side by side, a conflict, until a revision
// names both.
//
// The package is a pure core plus the built-in embedder; the provider
// embedders (OpenAI-compatible, Ollama, Gemini) live in package provider,
// which speaks the wire formats, and implement Embedder.
package memory
