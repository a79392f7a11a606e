package memory

import "context"

// EmbedderSpec names what built an index's vectors: the embedder, its
// model and the dimension of its vectors. Two indexes built by the same
// spec from the same notes are equal byte for byte when the embedder is
// deterministic (the built-in one is).
type EmbedderSpec struct {
	Name  string `json:"name"`            // one of providerid.Embedders
	Model string `json:"model,omitempty"` // the provider's model; the built-in embedder's version
	Dim   int    `json:"dim"`
}

// An Embedder turns texts into vectors of its spec's dimension.
type Embedder interface {
	// Spec names the embedder as an index records it.
	Spec() EmbedderSpec
	// Embed returns one vector per text, in order, each of Spec().Dim
	// values. An error names the embedder and what to do.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}
