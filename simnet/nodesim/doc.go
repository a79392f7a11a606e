// Package nodesim is the simulator's node and libp2p layers
// (docs/SIMULATION.md): real tern nodes, their stores, registries,
// fencing machines and protocols, under the faults of the model layer.
//
//   - nodelayer.go: the node layer. Nodes on memnet, an in-memory network
//     that moves only when the run delivers, inside one testing/synctest
//     bubble: a seed's run is a function of the seed.
//   - libp2player.go: the libp2p layer. Nodes on go-libp2p's mocknet, in
//     real time, with lost, late and repeated migrate messages.
//
// Both reach a node only through node.Harness: the transport (a host on
// their network), the spawner (the node layer's gate, which lets one
// goroutine start or wake at a time), the clock (the node layer ticks the
// nodes itself, and fires every timer they and memnet set, one at a time),
// and the hooks the checker (simnet.Ledger) watches.
package nodesim
