package fencing_test

import (
	"testing"

	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/fencing/fencingtest"
)

func TestMemRegistryConforms(t *testing.T) {
	open := func(*testing.T) fencing.Registry { return new(fencing.MemRegistry) }
	fencingtest.TestRegistry(t, open, nil)
	fencingtest.TestLostRegistry(t, open, func(t *testing.T, g fencing.Registry) fencing.Registry {
		g.(*fencing.MemRegistry).Lose()
		return g
	})
}

// fileRegistry is the shape of the node's registry: the whole map encoded
// by EncodeRegistry into one file. Here the "file" is a byte slice, so
// reopening proves the durable format keeps everything.
type fileRegistry struct{ data []byte }

func (f *fileRegistry) Load(agent string) (fencing.Record, bool, error) {
	if f.data == nil {
		return fencing.Record{}, false, nil
	}
	recs, err := fencing.DecodeRegistry(f.data)
	if err != nil {
		return fencing.Record{}, false, err
	}
	r, ok := recs[agent]
	return r, ok, nil
}

func (f *fileRegistry) Save(agent string, rec fencing.Record) error {
	recs := map[string]fencing.Record{}
	if f.data != nil {
		var err error
		if recs, err = fencing.DecodeRegistry(f.data); err != nil {
			return err
		}
	}
	recs[agent] = rec.Clone()
	data, err := fencing.EncodeRegistry(recs)
	if err != nil {
		return err
	}
	f.data = data
	return nil
}

func TestTheDurableFormatConforms(t *testing.T) {
	fencingtest.TestRegistry(t, func(*testing.T) fencing.Registry { return new(fileRegistry) },
		func(t *testing.T, old fencing.Registry) fencing.Registry {
			return &fileRegistry{data: append([]byte(nil), old.(*fileRegistry).data...)}
		})
}
