package render

import (
	"strings"

	"github.com/tern-dev/tern/internal/jsonscan"
)

// Gemini generateContent (POST /v1beta/models/{model}:generateContent), with
// the JSON names of the genai types (camelCase): contents is []*genai.Content,
// systemInstruction a genai.Content, tools []*genai.Tool. The model is in
// the URL, not the body.
//
//	{"systemInstruction":{"parts":[…]},"contents":[…],"tools":[{"functionDeclarations":[…]}]}
//
//   - the instructions, then the text of any journal system message, are
//     the systemInstruction's parts;
//   - roles ("user", "model") alternate and the first content is the
//     user's; a step's function responses open the next user content, one
//     functionResponse part per functionCall part, in call order, before
//     anything the user said next;
//   - a thought signature goes back at the part it was on (the first part
//     of the event after the reasoning event that carries it), only to the
//     same model and host (AI Studio and Vertex AI signatures differ);
//   - the first functionCall part of a step without its own signature (the
//     call came from another model, or its reasoning was dropped) carries
//     the documented sentinel skip_thought_signature_validator, base64 on
//     the wire as genai's []byte is, so that Gemini 3 accepts it;
//   - a result's response is {"output": v} or, for an error, {"error": v},
//     where v is the result's text parsed as JSON when it is JSON, else the
//     text; its images and PDFs go in the functionResponse's parts;
//   - function arguments are a JSON object (see writeArgsObject); tools
//     declare parametersJsonSchema, the agent's JSON Schema as it is.

// skipSignature is base64("skip_thought_signature_validator").
const skipSignature = `"c2tpcF90aG91Z2h0X3NpZ25hdHVyZV92YWxpZGF0b3I="`

var geminiMedia = mediaPolicy{image: geminiImages, file: func(mt string) bool {
	mt = baseType(mt)
	return mt == "application/pdf" || strings.HasPrefix(mt, "audio/") || strings.HasPrefix(mt, "video/")
}}

func (p *plan) gemini(w *writer) {
	w.raw("{")
	sys := list{w: w}
	systemPart := func(pc *piece) {
		if sys.n == 0 {
			w.raw(`"systemInstruction":{"parts":[`)
		}
		sys.next()
		w.raw(`{"text":`)
		w.piece(pc)
		w.raw("}")
	}
	if p.agent.Instructions != "" {
		systemPart(&piece{lit: p.agent.Instructions})
	}
	p.each(func(e *entry) {
		if e.role == roleSystem {
			pcs := p.pieces(e.parts, noMedia, "a system message", false)
			for i := range pcs {
				systemPart(&pcs[i])
			}
		}
	}, func(*unit) {})
	if sys.n > 0 {
		w.raw("]},")
	}

	w.raw(`"contents":[`)
	a := &alternation{w: w, user: "user", end: "]}",
		begin: func(role string) { w.raw(`{"role":"` + role + `","parts":[`) },
		lead:  `{"text":"` + leadText + `"}`,
	}
	p.each(func(e *entry) {
		if e.role == roleSystem {
			return
		}
		pcs := p.pieces(e.parts, geminiMedia, "a user message", false)
		for i := range pcs {
			a.block("user")
			geminiPart(w, &pcs[i], nil)
		}
	}, func(u *unit) {
		p.geminiStep(w, u, a)
	})
	a.close()
	w.raw("]")
	if len(p.tools) > 0 {
		w.raw(`,"tools":[{"functionDeclarations":[`)
		p.writeTools(w, toolsGemini)
		w.raw("]}]")
	}
	w.raw("}")
}

// geminiPart writes a text or inline-data part, with a thought signature
// when sig is not nil.
func geminiPart(w *writer, pc *piece, sig []byte) {
	if pc.isText() {
		w.raw(`{"text":`)
		w.piece(pc)
	} else {
		w.raw(`{"inlineData":{"mimeType":`)
		w.str(baseType(pc.media.mediaType))
		w.raw(`,"data":`)
		w.base64(pc.data)
		w.raw("}")
	}
	if sig != nil {
		w.raw(`,"thoughtSignature":`)
		w.rawb(sig)
	}
	w.raw("}")
}

func (p *plan) geminiStep(w *writer, u *unit, a *alternation) {
	keep := p.replayable(u)
	var sig []byte // a signature waiting for the next part
	firstCall := true
	for i, e := range u.items {
		switch e.kind {
		case entReasoning:
			if keep != nil && keep[i] {
				sig = e.rsn.stringField("thought_signature")
			}
		case entMessage:
			pcs := p.pieces(e.parts, noMedia, "a model message", false)
			for j := range pcs {
				a.block("model")
				geminiPart(w, &pcs[j], sig)
				sig = nil
			}
		case entCall:
			if firstCall && sig == nil {
				sig = []byte(skipSignature)
			}
			firstCall = false
			a.block("model")
			w.raw(`{"functionCall":{"id":`)
			w.str(p.ids.of(e))
			w.raw(`,"name":`)
			w.str(e.name)
			if !(e.args[0] == '{' && isEmpty(e.args)) { // genai omits empty args
				w.raw(`,"args":`)
				writeArgsObject(w, e.args)
			}
			w.raw("}")
			if sig != nil {
				w.raw(`,"thoughtSignature":`)
				w.rawb(sig)
				sig = nil
			}
			w.raw("}")
		}
	}
	for i, c := range u.calls {
		r := u.results[i]
		pcs := p.pieces(r.parts, geminiMedia, "a tool result", false)
		a.block("user")
		w.raw(`{"functionResponse":{"id":`)
		w.str(p.ids.of(c))
		w.raw(`,"name":`)
		w.str(c.name)
		if r.isError {
			w.raw(`,"response":{"error":`)
		} else {
			w.raw(`,"response":{"output":`)
		}
		p.geminiValue(w, pcs)
		w.raw("}")
		if !onlyText(pcs) {
			w.raw(`,"parts":[`)
			n := 0
			for j := range pcs {
				pc := &pcs[j]
				if pc.isText() {
					continue
				}
				if n > 0 {
					w.raw(",")
				}
				n++
				w.raw(`{"inlineData":{"mimeType":`)
				w.str(baseType(pc.media.mediaType))
				w.raw(`,"data":`)
				w.base64(pc.data)
				w.raw("}}")
			}
			w.raw("]")
		}
		w.raw("}}")
	}
}

// geminiValue writes a result's text: the JSON it holds when it is one
// JSON text, else the text as a string.
func (p *plan) geminiValue(w *writer, pcs []piece) {
	texts := 0
	var only *piece
	for i := range pcs {
		if pcs[i].isText() {
			texts++
			only = &pcs[i]
		}
	}
	if texts == 1 && only.tok != nil {
		s := only.tok[1 : len(only.tok)-1]
		if hasEscape(s) {
			p.buf = jsonscan.AppendUnquote(p.buf[:0], only.tok)
			s = p.buf
		}
		if v, err := jsonscan.Trim(s); err == nil {
			w.rawb(v)
			return
		}
	}
	w.joined(pcs, "\n")
}
