package provider

// geminiWire is not built yet (see unbuilt.go).
type geminiWire = unbuiltWire
