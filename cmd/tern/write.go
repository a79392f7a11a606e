package main

import (
	"context"
	"time"

	"github.com/tern-dev/tern/capsule"
)

// lockWait bounds how long a command waits for another writer of a
// capsule folder (another tern command appending to it, say) to finish.
const lockWait = 30 * time.Second

// openDir opens a capsule folder for writing, waiting up to lockWait for
// another writer.
func (e *env) openDir(ctx context.Context, path string) (*capsule.Dir, error) {
	ctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	return capsule.OpenDir(ctx, path, e.log)
}
