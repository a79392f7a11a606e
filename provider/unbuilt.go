package provider

import (
	"io"
	"net/http"
)

// unbuiltWire stands for an adapter not written yet: NewWith refuses it.
type unbuiltWire struct{}

func (unbuiltWire) endpoint(Settings) string                     { return "" }
func (unbuiltWire) auth(http.Header, string)                     {}
func (unbuiltWire) read(*httpModel, io.Reader, *assembler) error { return nil }
func (unbuiltWire) message([]byte) string                        { return "" }
