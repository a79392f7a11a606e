// Package capsule is tern's on-disk format: a folder of plain files (or a tar
// of it) that holds one agent's whole state and proves its own integrity.
//
// A capsule is manifest.json plus the files it lists (see Layout). The
// manifest records the sha256 and size of every other file and a digest of
// itself, so Verify detects any truncation or tampering offline. Every write
// is atomic (temp file, fsync, rename, fsync the folder) and multi-file
// updates commit through the manifest (see docs/FORMAT.md, "Updates"), so a
// crash leaves either the old capsule or the new one.
//
// The package never talks to the network and never writes outside the
// capsule folder it was given, except the output paths its caller names.
package capsule
