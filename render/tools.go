package render

import (
	"bytes"
	"encoding/json"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/jsonscan"
)

// toolDef is a tool definition from agent.json, ready for any provider.
type toolDef struct {
	name        string
	description string
	params      []byte // a compact JSON Schema object that has a "type"
	tokens      int
}

// emptySchema is the parameters of a tool that declares none: every
// provider accepts an object schema, and Anthropic requires one.
var emptySchema = []byte(`{"type":"object","properties":{}}`)

// toolDefs prepares the agent's tools, in agent.json's order. A schema
// that is not a JSON object is replaced by the empty object schema, with a
// note; one without "type" gets "type":"object" (Anthropic's input_schema
// is always an object schema).
func toolDefs(a capsule.Agent, n *notes) []toolDef {
	defs := make([]toolDef, 0, len(a.Tools))
	for _, t := range a.Tools {
		d := toolDef{name: t.Name, description: t.Description, params: emptySchema}
		raw := bytes.TrimSpace(t.Parameters)
		switch {
		case len(raw) == 0 || string(raw) == "null":
		case raw[0] != '{' || !jsonscan.Valid(raw):
			n.addf("tool %q: parameters are not a JSON object; sent as an empty object schema", t.Name)
		default:
			var buf bytes.Buffer
			json.Compact(&buf, raw) // valid: checked above
			d.params = withType(buf.Bytes())
		}
		d.tokens = EventOverhead + estimateString(d.name) + estimateString(d.description) + Estimate(d.params)
		defs = append(defs, d)
	}
	return defs
}

// withType adds "type":"object" to a schema object that has no "type".
func withType(obj []byte) []byte {
	it := jsonscan.Object(obj)
	for k, _, ok := it.Member(); ok; k, _, ok = it.Member() {
		if jsonscan.Equal(k, "type") {
			return obj
		}
	}
	if string(obj) == "{}" {
		return []byte(`{"type":"object"}`)
	}
	return append([]byte(`{"type":"object",`), obj[1:]...)
}

// toolShape is how one provider spells a tool definition: the object opens
// with head, then the name, an optional description, the schema under
// schemaKey (written by params), and closes with tail.
type toolShape struct {
	head, schemaKey, tail string
	params                func(w *writer, schema []byte)
}

func rawSchema(w *writer, schema []byte) { w.rawb(schema) }

// The tool shapes of the providers.
var (
	toolsChat      = toolShape{head: `{"type":"function","function":{"name":`, schemaKey: "parameters", tail: "}}", params: rawSchema}
	toolsOllama    = toolShape{head: `{"type":"function","function":{"name":`, schemaKey: "parameters", tail: "}}", params: ollamaParameters}
	toolsAnthropic = toolShape{head: `{"name":`, schemaKey: "input_schema", tail: "}", params: rawSchema}
	toolsGemini    = toolShape{head: `{"name":`, schemaKey: "parametersJsonSchema", tail: "}", params: rawSchema}
	toolsResponses = toolShape{head: `{"type":"function","name":`, schemaKey: "parameters", tail: `,"strict":false}`, params: rawSchema}
)

// writeTools writes the agent's tools, comma-separated, in s's shape.
func (p *plan) writeTools(w *writer, s toolShape) {
	for i, t := range p.tools {
		if i > 0 {
			w.raw(",")
		}
		w.raw(s.head)
		w.str(t.name)
		if t.description != "" {
			w.raw(`,"description":`)
			w.str(t.description)
		}
		w.raw(`,"` + s.schemaKey + `":`)
		s.params(w, t.params)
		w.raw(s.tail)
	}
}
