package provider

// responsesWire is not built yet (see unbuilt.go).
type responsesWire = unbuiltWire
