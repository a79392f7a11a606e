// Package render turns one session of a capsule's journal into the exact
// JSON request body a model provider takes: OpenAI Chat Completions,
// OpenAI Responses (stateless), Anthropic Messages, Gemini generateContent
// or Ollama's /api/chat. The journal records what happened, not how a
// provider spells it, so a conversation can switch providers and switch
// back without loss.
//
// Render is a pure function of its Request: the events, the agent
// definition and a Target (provider, model, host, context window). It
// must never do I/O: no files, no network, no clock, no goroutines. The
// bytes of images and files come through the Blobs interface, which the
// caller adapts to its store. The same Request always gives the same
// bytes.
//
// Every provider gets the same history, built once (view.go):
//
//   - each tool call is paired with exactly one result; a call the journal
//     has no result for gets the Interrupted error result, and a result
//     with no call before it is left out, with a note;
//   - reasoning goes back only to the provider, model and host that
//     produced it, byte-exact, and never after a trim (reasoning.go);
//   - when the window is too small, the oldest messages and steps are left
//     out whole (a call never without its result), the last user message
//     stays, and a short summary of what was left out opens the request
//     (window.go); the sizes are the conservative estimates of tokens.go;
//   - tool-call ids are mapped into each provider's alphabet,
//     deterministically and reversibly (ids.go);
//   - each provider's own ordering rules hold (one file per provider).
//
// Events render cannot use (unknown types, malformed bodies) are skipped
// and reported in Result.Notes; they are never an error.
package render
