package provider

// ollamaWire is not built yet (see unbuilt.go).
type ollamaWire = unbuiltWire
