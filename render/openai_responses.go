package render

// OpenAI Responses (POST /v1/responses), stateless, as
// responses.ResponseNewParams spells it:
//
//	{"model":…,"instructions":…,"input":[…],"tools":[…],"store":false,"include":["reasoning.encrypted_content"]}
//
//   - nothing is stored at OpenAI, so no item carries an id from an earlier
//     response (an id without its reasoning item is refused); reasoning
//     items, replayed only to the same model and host, carry their own id
//     and encrypted content, just before the item they preceded;
//   - user and system messages are message items: string content for one
//     text part, else input_text / input_image / input_file parts;
//   - each text part of an assistant message is one assistant message item
//     with string content; each call a function_call item; then one
//     function_call_output per call, in call order, whose output is a
//     string or, with media, a list of input parts;
//   - there is no error flag on outputs: an error result's text starts with
//     "error: ".

var responsesMedia = mediaPolicy{image: commonImages, file: isPDF}

func (p *plan) openAIResponses(w *writer) {
	w.raw(`{"model":`)
	w.str(p.t.Model)
	if p.agent.Instructions != "" {
		w.raw(`,"instructions":`)
		w.str(p.agent.Instructions)
	}
	w.raw(`,"input":[`)
	l := list{w: w}
	p.each(func(e *entry) {
		pol, where, r := responsesMedia, "a user message", "user"
		if e.role == roleSystem {
			pol, where, r = noMedia, "a system message", "system"
		}
		pcs := p.pieces(e.parts, pol, where, false)
		l.next()
		w.raw(`{"type":"message","role":"` + r + `","content":`)
		responsesContent(w, pcs)
		w.raw("}")
	}, func(u *unit) {
		p.responsesStep(w, u, &l)
	})
	w.raw("]")
	if len(p.tools) > 0 {
		w.raw(`,"tools":[`)
		p.writeTools(w, toolsResponses)
		w.raw("]")
	}
	w.raw(`,"store":false,"include":["reasoning.encrypted_content"]`)
	if p.t.Stream {
		w.raw(`,"stream":true`)
	}
	w.raw("}")
}

// responsesContent writes message content or a call output: a string for
// one text piece, else a list of input parts.
func responsesContent(w *writer, pcs []piece) {
	if len(pcs) == 1 && pcs[0].isText() {
		w.piece(&pcs[0])
		return
	}
	if len(pcs) == 0 {
		w.raw(`""`)
		return
	}
	w.raw("[")
	for i := range pcs {
		if i > 0 {
			w.raw(",")
		}
		pc := &pcs[i]
		switch {
		case pc.isText():
			w.raw(`{"type":"input_text","text":`)
			w.piece(pc)
			w.raw("}")
		case pc.media.kind == partImage:
			w.raw(`{"type":"input_image","image_url":`)
			w.dataURL(pc.media.mediaType, pc.data)
			w.raw(`,"detail":"auto"}`)
		default:
			w.raw(`{"type":"input_file","file_data":`)
			w.dataURL(pc.media.mediaType, pc.data)
			if pc.media.name != "" {
				w.raw(`,"filename":`)
				w.str(pc.media.name)
			}
			w.raw("}")
		}
	}
	w.raw("]")
}

func (p *plan) responsesStep(w *writer, u *unit, l *list) {
	keep := p.replayable(u)
	for i, e := range u.items {
		switch e.kind {
		case entReasoning:
			if keep == nil || !keep[i] {
				continue
			}
			l.next()
			w.raw(`{"type":"reasoning","id":`)
			w.rawb(e.rsn.stringField("id"))
			w.raw(`,"summary":`)
			if s := e.rsn.field("summary"); len(s) > 0 && s[0] == '[' {
				w.rawb(s)
			} else {
				w.raw("[]")
			}
			w.raw(`,"encrypted_content":`)
			w.rawb(e.rsn.stringField("encrypted_content"))
			w.raw("}")
		case entMessage:
			pcs := p.pieces(e.parts, noMedia, "an assistant message", false)
			for j := range pcs {
				l.next()
				w.raw(`{"type":"message","role":"assistant","content":`)
				w.piece(&pcs[j])
				w.raw("}")
			}
		case entCall:
			l.next()
			w.raw(`{"type":"function_call","call_id":`)
			w.str(p.ids.of(e))
			w.raw(`,"name":`)
			w.str(e.name)
			w.raw(`,"arguments":`)
			writeArgsString(w, e.args)
			w.raw("}")
		}
	}
	for i, c := range u.calls {
		r := u.results[i]
		pcs := p.pieces(r.parts, responsesMedia, "a tool result", r.isError)
		l.next()
		w.raw(`{"type":"function_call_output","call_id":`)
		w.str(p.ids.of(c))
		w.raw(`,"output":`)
		responsesContent(w, pcs)
		w.raw("}")
	}
}
