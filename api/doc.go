// Package api is a tern node's loopback HTTP API (docs/API.md), its web
// page, and the client the CLI reaches a node with. The handlers only
// translate: what a request asks is done by the Node and Runtime
// interfaces (node.go), which package node implements.
//
// Where things are:
//
//   - server.go: New, the routes, the loopback Host and Origin check, the
//     bearer token and the page's CSRF check, the capsule and peer
//     handlers; errors.go: the one table from an error to the status it is
//     answered with, and the errors a Node reports.
//   - sessions.go: sessions and turns, and the turn streams (server-sent
//     events through internal/sse, resumed from Last-Event-ID, with the
//     model's deltas); relay.go: following a turn that moved to another
//     node over libp2p, as if it had not.
//   - moves.go, members.go, memory.go, mcp.go, model.go: migrations and
//     the holder report, members, memory, MCP servers and their OAuth
//     callback, model tests.
//   - ui.go, ui/: the web page, its one-time login codes and sessions.
//   - types.go: the API's JSON shapes shared with package node;
//     client.go: the client commands use (node.json, retries, following a
//     turn).
package api
