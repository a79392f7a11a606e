// Package bench measures how tern nodes sync, with real nodes on
// 127.0.0.1: blob throughput against the two limits under it, catch-up
// after time offline, convergence after a partition heals, and the idle
// memory of a node holding many capsules.
//
// Each exported function runs one measurement and returns its figures. It
// prints nothing and judges nothing: comparing a figure with a goal is the
// caller's business (tern bench sync, docs/PERFORMANCE.md). Every node
// lives in a temporary folder that is removed on return; a measurement
// never touches $TERN_HOME. Measurements are not meant to run
// concurrently: each uses the whole machine, and IdleMemory reads the
// process's heap.
package bench
