package provider

// anthropicWire is not built yet (see unbuilt.go).
type anthropicWire = unbuiltWire
