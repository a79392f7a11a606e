package render

import "github.com/tern-dev/tern/internal/jsonscan"

// Ollama (POST /api/chat), as api.ChatRequest spells it:
//
//	{"model":…,"messages":[…],"tools":[…],"options":{}}
//
//   - every message has string content: a message's text parts are joined
//     with a blank line; images go in "images" (base64), on user and tool
//     messages; files inline as text when textual, else as a placeholder;
//   - the instructions are the first message, role "system"; journal system
//     messages stay in place;
//   - an assistant step is one assistant message with its tool_calls
//     (arguments a JSON object, see writeArgsObject; "index" is the call's
//     position in the step); then one "tool" message per call, in call
//     order, naming the tool and the call id;
//   - thinking goes back only to the same model and host;
//   - there is no error flag on results: an error result's text starts with
//     "error: ";
//   - a tool's parameters are cut down to what api.ToolFunctionParameters
//     holds (type, $defs, items, required, properties; and per property
//     anyOf, type, items, description, enum, properties): Ollama decodes
//     them into those types and drops the rest anyway;
//   - "options" is {} (api.ChatRequest always sends the field).

var ollamaMedia = mediaPolicy{image: commonImages}

const ollamaJoin = "\n\n"

func (p *plan) ollama(w *writer) {
	w.raw(`{"model":`)
	w.str(p.t.Model)
	w.raw(`,"messages":[`)
	l := list{w: w}
	if p.agent.Instructions != "" {
		l.next()
		w.raw(`{"role":"system","content":`)
		w.str(p.agent.Instructions)
		w.raw("}")
	}
	p.each(func(e *entry) {
		pol, where, r := ollamaMedia, "a user message", "user"
		if e.role == roleSystem {
			pol, where, r = noMedia, "a system message", "system"
		}
		pcs := p.pieces(e.parts, pol, where, false)
		l.next()
		w.raw(`{"role":"` + r + `","content":`)
		w.joined(pcs, ollamaJoin)
		ollamaImages(w, pcs)
		w.raw("}")
	}, func(u *unit) {
		p.ollamaStep(w, u, &l)
	})
	w.raw("]")
	if len(p.tools) > 0 {
		w.raw(`,"tools":[`)
		p.writeTools(w, toolsOllama)
		w.raw("]")
	}
	w.raw(`,"options":{}}`)
}

// ollamaImages writes the "images" field for the media pieces, if any.
func ollamaImages(w *writer, pcs []piece) {
	n := 0
	for i := range pcs {
		if pcs[i].isText() {
			continue
		}
		if n == 0 {
			w.raw(`,"images":[`)
		} else {
			w.raw(",")
		}
		n++
		w.base64(pcs[i].data)
	}
	if n > 0 {
		w.raw("]")
	}
}

func (p *plan) ollamaStep(w *writer, u *unit, l *list) {
	keep := p.replayable(u)
	nparts, ncalls, nthink := 0, 0, 0
	for i, e := range u.items {
		switch e.kind {
		case entMessage:
			nparts += len(e.parts)
		case entCall:
			ncalls++
		case entReasoning:
			if keep != nil && keep[i] {
				nthink++
			}
		}
	}
	if nparts == 0 && ncalls == 0 {
		return
	}
	l.next()
	w.raw(`{"role":"assistant","content":"`)
	first := true
	for _, e := range u.items {
		if e.kind != entMessage {
			continue
		}
		pcs := p.pieces(e.parts, noMedia, "an assistant message", false)
		for j := range pcs {
			if !first {
				w.raw(`\n\n`)
			}
			first = false
			w.pieceInner(&pcs[j])
		}
	}
	w.raw(`"`)
	if nthink > 0 {
		w.raw(`,"thinking":"`)
		first := true
		for i, e := range u.items {
			if e.kind != entReasoning || !keep[i] {
				continue
			}
			if !first {
				w.raw(`\n\n`)
			}
			first = false
			w.rawb(e.rsn.text[1 : len(e.rsn.text)-1])
		}
		w.raw(`"`)
	}
	if ncalls > 0 {
		w.raw(`,"tool_calls":[`)
		k := 0
		for _, c := range u.items {
			if c.kind != entCall {
				continue
			}
			if k > 0 {
				w.raw(",")
			}
			w.raw(`{"id":`)
			w.str(p.ids.of(c))
			w.raw(`,"function":{"index":`)
			w.int(k)
			w.raw(`,"name":`)
			w.str(c.name)
			w.raw(`,"arguments":`)
			writeArgsObject(w, c.args)
			w.raw("}}")
			k++
		}
		w.raw("]")
	}
	w.raw("}")
	for i, c := range u.calls {
		r := u.results[i]
		pcs := p.pieces(r.parts, ollamaMedia, "a tool result", r.isError)
		l.next()
		w.raw(`{"role":"tool","content":`)
		w.joined(pcs, ollamaJoin)
		ollamaImages(w, pcs)
		w.raw(`,"tool_name":`)
		w.str(c.name)
		w.raw(`,"tool_call_id":`)
		w.str(p.ids.of(c))
		w.raw("}")
	}
}

// ollamaParameters writes schema cut down to api.ToolFunctionParameters.
func ollamaParameters(w *writer, schema []byte) {
	var typ, defs, items, required, props []byte
	it := jsonscan.Object(schema)
	for k, v, ok := it.Member(); ok; k, v, ok = it.Member() {
		switch {
		case jsonscan.Equal(k, "type"):
			typ = v
		case jsonscan.Equal(k, "$defs"):
			defs = v
		case jsonscan.Equal(k, "items"):
			items = v
		case jsonscan.Equal(k, "required"):
			required = v
		case jsonscan.Equal(k, "properties"):
			props = v
		}
	}
	w.raw(`{"type":`)
	if len(typ) > 0 && typ[0] == '"' {
		w.rawb(typ)
	} else {
		w.raw(`"object"`)
	}
	if present(defs) {
		w.raw(`,"$defs":`)
		w.rawb(defs)
	}
	if present(items) {
		w.raw(`,"items":`)
		w.rawb(items)
	}
	if n, strs := stringArray(required); n > 0 && strs {
		w.raw(`,"required":`)
		w.rawb(required)
	}
	w.raw(`,"properties":`)
	ollamaProperties(w, props)
	w.raw("}")
}

// ollamaProperties writes a properties object, each property cut down to
// api.ToolProperty; members that are not objects are left out.
func ollamaProperties(w *writer, props []byte) {
	w.raw("{")
	l := list{w: w}
	it := jsonscan.Object(props)
	for k, v, ok := it.Member(); ok; k, v, ok = it.Member() {
		if v[0] != '{' {
			continue
		}
		l.next()
		w.rawb(k)
		w.raw(":")
		ollamaProperty(w, v)
	}
	w.raw("}")
}

// ollamaProperty writes one property, leaving out what api.ToolProperty
// does not hold and the empty values it would omit.
func ollamaProperty(w *writer, prop []byte) {
	l := list{w: w}
	w.raw("{")
	it := jsonscan.Object(prop)
	for k, v, ok := it.Member(); ok; k, v, ok = it.Member() {
		switch {
		case jsonscan.Equal(k, "anyOf") && v[0] == '[' && !isEmpty(v):
			l.next()
			w.raw(`"anyOf":[`)
			m := list{w: w}
			arr := jsonscan.Array(v)
			for el, ok := arr.Element(); ok; el, ok = arr.Element() {
				if el[0] == '{' {
					m.next()
					ollamaProperty(w, el)
				}
			}
			w.raw("]")
		case jsonscan.Equal(k, "type"):
			if v[0] == '"' {
				l.next()
				w.raw(`"type":`)
				w.rawb(v)
			} else if n, strs := stringArray(v); n > 0 && strs {
				l.next()
				w.raw(`"type":`)
				if n == 1 { // api.PropertyType writes a one-type list as a string
					arr := jsonscan.Array(v)
					one, _ := arr.Element()
					w.rawb(one)
				} else {
					w.rawb(v)
				}
			}
		case jsonscan.Equal(k, "items") && present(v):
			l.next()
			w.raw(`"items":`)
			w.rawb(v)
		case jsonscan.Equal(k, "description") && v[0] == '"' && len(v) > 2:
			l.next()
			w.raw(`"description":`)
			w.rawb(v)
		case jsonscan.Equal(k, "enum") && v[0] == '[' && !isEmpty(v):
			l.next()
			w.raw(`"enum":`)
			w.rawb(v)
		case jsonscan.Equal(k, "properties") && v[0] == '{':
			l.next()
			w.raw(`"properties":`)
			ollamaProperties(w, v)
		}
	}
	w.raw("}")
}

// present reports whether v is a value other than null.
func present(v []byte) bool { return len(v) > 0 && string(v) != "null" }

// isEmpty reports whether the object or array v has no members.
func isEmpty(v []byte) bool {
	if len(v) == 0 {
		return true
	}
	it := jsonscan.Walker{}
	switch v[0] {
	case '{':
		it = jsonscan.Object(v)
	case '[':
		it = jsonscan.Array(v)
	default:
		return false
	}
	return !it.More() && it.Err() == nil
}

// stringArray counts the elements of the array v and reports whether they
// are all strings.
func stringArray(v []byte) (n int, allStrings bool) {
	if len(v) == 0 || v[0] != '[' {
		return 0, false
	}
	arr := jsonscan.Array(v)
	for el, ok := arr.Element(); ok; el, ok = arr.Element() {
		if el[0] != '"' {
			return n, false
		}
		n++
	}
	return n, arr.Err() == nil
}
