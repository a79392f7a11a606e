// Package node is the tern daemon: identity, peers, discovery, stores, the
// agent runtime and the local API. So far it holds the machine identity,
// which offline commands use too, so that the key that signs journal
// events today is the key the node serves under later.
package node
