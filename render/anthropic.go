package render

// Anthropic Messages (POST /v1/messages), as anthropic.MessageNewParams
// spells it, always in its canonical form (content is a list of blocks):
//
//	{"model":…,"max_tokens":…,"system":[…],"messages":[…],"tools":[…]}
//
//   - the instructions, then the text of any journal system message, are
//     the system blocks (the Messages API has no system role);
//   - roles alternate strictly and the first message is the user's: a
//     step's results open the next user message, before anything the user
//     said next; a conversation that begins with the assistant gets a short
//     user message first;
//   - images (JPEG, PNG, GIF, WebP) and PDFs go as base64 blocks, in user
//     messages and tool results; textual files inline as text;
//   - thinking blocks go back only to the model and host that wrote them,
//     byte-exact, in their place, and never after a trim;
//   - tool_use input is a JSON object (see writeArgsObject).

var anthropicMedia = mediaPolicy{image: commonImages, file: isPDF}

func (p *plan) anthropic(w *writer) {
	max := p.t.MaxTokens
	if max <= 0 {
		max = DefaultMaxTokens
	}
	thinking := p.t.Thinking > 0 && p.thinkingAllowed()
	if thinking && max <= p.t.Thinking {
		max = p.t.Thinking + DefaultMaxTokens // max_tokens must exceed the budget
	}
	w.raw(`{"model":`)
	w.str(p.t.Model)
	w.raw(`,"max_tokens":`)
	w.int(max)
	if thinking {
		w.raw(`,"thinking":{"type":"enabled","budget_tokens":`)
		w.int(p.t.Thinking)
		w.raw("}")
	}
	sys := list{w: w}
	systemBlock := func(pc *piece) {
		if sys.n == 0 {
			w.raw(`,"system":[`)
		}
		sys.next()
		w.raw(`{"type":"text","text":`)
		w.piece(pc)
		w.raw("}")
	}
	if p.agent.Instructions != "" {
		systemBlock(&piece{lit: p.agent.Instructions})
	}
	p.each(func(e *entry) {
		if e.role == roleSystem {
			pcs := p.pieces(e.parts, noMedia, "a system message", false)
			for i := range pcs {
				systemBlock(&pcs[i])
			}
		}
	}, func(*unit) {})
	if sys.n > 0 {
		w.raw("]")
	}

	w.raw(`,"messages":[`)
	a := &alternation{w: w, user: "user", end: "]}",
		begin: func(role string) { w.raw(`{"role":"` + role + `","content":[`) },
		lead:  `{"type":"text","text":"` + leadText + `"}`,
	}
	p.each(func(e *entry) {
		if e.role == roleSystem {
			return
		}
		pcs := p.pieces(e.parts, anthropicMedia, "a user message", false)
		for i := range pcs {
			a.block("user")
			anthropicBlock(w, &pcs[i])
		}
	}, func(u *unit) {
		p.anthropicStep(w, u, a)
	})
	a.close()
	w.raw("]")
	if len(p.tools) > 0 {
		w.raw(`,"tools":[`)
		p.writeTools(w, toolsAnthropic)
		w.raw("]")
	}
	if p.t.Stream {
		w.raw(`,"stream":true`)
	}
	w.raw("}")
}

// thinkingAllowed reports whether thinking can be on for this request. A
// request whose final user message opens with tool results (the last step
// has calls, and only user or system messages or silent steps follow it:
// they merge into that user message, go to the system prompt or write
// nothing) continues a tool loop, and
// Anthropic then wants the assistant message before it to start with a
// thinking block. Otherwise it notes why thinking is off.
func (p *plan) thinkingAllowed() bool {
	i := len(p.units) - 1
	for i >= 0 && (p.units[i].msg != nil || silent(p.units[i])) {
		i--
	}
	if i < 0 || len(p.units[i].calls) == 0 {
		return true
	}
	last := p.units[i]
	// The assistant message that holds the last step starts with the first
	// of the steps before it that no result separates from it.
	first := last
	for i--; i >= 0; i-- {
		u := p.units[i]
		if u.msg != nil && u.msg.role == roleSystem || u.msg == nil && silent(u) {
			continue // in the system prompt, or nothing at all
		}
		if u.msg != nil || len(u.calls) > 0 {
			break
		}
		first = u
	}
	keep := p.replayable(first)
	for i, e := range first.items {
		if e.kind != entReasoning {
			break
		}
		if keep != nil && keep[i] {
			return true // the message's first block is this thinking block
		}
	}
	p.notes.addf("thinking turned off for this request: its last tool loop has no thinking block to replay (it came from another model, or was trimmed)")
	return false
}

// silent reports whether a step writes nothing but reasoning (which it
// replays only before output, so: nothing).
func silent(u *unit) bool {
	for _, e := range u.items {
		if e.kind != entReasoning {
			return false
		}
	}
	return true
}

// anthropicBlock writes one content block.
func anthropicBlock(w *writer, pc *piece) {
	switch {
	case pc.isText():
		w.raw(`{"type":"text","text":`)
		w.piece(pc)
		w.raw("}")
	case pc.media.kind == partImage:
		w.raw(`{"type":"image","source":{"type":"base64","media_type":`)
		w.str(baseType(pc.media.mediaType))
		w.raw(`,"data":`)
		w.base64(pc.data)
		w.raw("}}")
	default:
		w.raw(`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":`)
		w.base64(pc.data)
		w.raw("}")
		if pc.media.name != "" {
			w.raw(`,"title":`)
			w.str(pc.media.name)
		}
		w.raw("}")
	}
}

func (p *plan) anthropicStep(w *writer, u *unit, a *alternation) {
	keep := p.replayable(u)
	for i, e := range u.items {
		switch e.kind {
		case entReasoning:
			if keep == nil || !keep[i] {
				continue
			}
			a.block("assistant")
			if sig := e.rsn.stringField("signature"); sig != nil {
				w.raw(`{"type":"thinking","thinking":`)
				if e.rsn.text != nil {
					w.rawb(e.rsn.text)
				} else {
					w.raw(`""`)
				}
				w.raw(`,"signature":`)
				w.rawb(sig)
				w.raw("}")
			} else {
				w.raw(`{"type":"redacted_thinking","data":`)
				w.rawb(e.rsn.stringField("redacted"))
				w.raw("}")
			}
		case entMessage:
			pcs := p.pieces(e.parts, noMedia, "an assistant message", false)
			for j := range pcs {
				a.block("assistant")
				anthropicBlock(w, &pcs[j])
			}
		case entCall:
			a.block("assistant")
			w.raw(`{"type":"tool_use","id":`)
			w.str(p.ids.of(e))
			w.raw(`,"name":`)
			w.str(e.name)
			w.raw(`,"input":`)
			writeArgsObject(w, e.args)
			w.raw("}")
		}
	}
	for i, c := range u.calls {
		r := u.results[i]
		pcs := p.pieces(r.parts, anthropicMedia, "a tool result", false)
		a.block("user")
		w.raw(`{"type":"tool_result","tool_use_id":`)
		w.str(p.ids.of(c))
		if len(pcs) > 0 {
			w.raw(`,"content":[`)
			for j := range pcs {
				if j > 0 {
					w.raw(",")
				}
				anthropicBlock(w, &pcs[j])
			}
			w.raw("]")
		}
		if r.isError {
			w.raw(`,"is_error":true`)
		}
		w.raw("}")
	}
}
