package render

// OpenAI Chat Completions (POST /v1/chat/completions), as
// openai.ChatCompletionNewParams spells it:
//
//	{"model":…,"messages":[…],"tools":[…]}
//
//   - the agent's instructions are the first message, role "system"; a
//     journal system message stays a system message where it is;
//   - a message whose content is one text part has string content, any
//     other an array of parts; images go as image_url data URLs, PDFs as
//     file parts with file_data, textual files inline as text;
//   - an assistant step is one assistant message: its text, then its
//     tool_calls (arguments as a JSON string); then one "tool" message per
//     call, in call order. Tool messages take only text: an image or PDF a
//     tool returned is named in the tool message and sent in one user
//     message after the step's tool messages;
//   - Chat Completions has no error flag on results: an error result's text
//     starts with "error: ";
//   - reasoning is never sent (the API takes none back).

var (
	chatUserMedia = mediaPolicy{image: commonImages, file: isPDF}
	noMedia       = mediaPolicy{}
)

func (p *plan) openAIChat(w *writer) {
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
		l.next()
		p.chatMessage(w, e)
	}, func(u *unit) {
		p.chatStep(w, u, &l)
	})
	w.raw("]")
	if len(p.tools) > 0 {
		w.raw(`,"tools":[`)
		p.writeTools(w, toolsChat)
		w.raw("]")
	}
	if p.t.Stream {
		w.raw(`,"stream":true,"stream_options":{"include_usage":true}`)
	}
	w.raw("}")
}

// chatMessage writes a user or system message.
func (p *plan) chatMessage(w *writer, e *entry) {
	pol, where, r := chatUserMedia, "a user message", "user"
	if e.role == roleSystem {
		pol, where, r = noMedia, "a system message", "system"
	}
	pcs := p.pieces(e.parts, pol, where, false)
	w.raw(`{"role":"` + r + `","content":`)
	chatContent(w, pcs)
	w.raw("}")
}

// chatContent writes content: a string for one text piece, else an array.
func chatContent(w *writer, pcs []piece) {
	if len(pcs) == 1 && pcs[0].isText() {
		w.piece(&pcs[0])
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
			w.raw(`{"type":"text","text":`)
			w.piece(pc)
			w.raw("}")
		case pc.media.kind == partImage:
			w.raw(`{"type":"image_url","image_url":{"url":`)
			w.dataURL(pc.media.mediaType, pc.data)
			w.raw("}}")
		default:
			w.raw(`{"type":"file","file":{"file_data":`)
			w.dataURL(pc.media.mediaType, pc.data)
			if pc.media.name != "" {
				w.raw(`,"filename":`)
				w.str(pc.media.name)
			}
			w.raw("}}")
		}
	}
	w.raw("]")
}

// chatStep writes an assistant step and its tool messages.
func (p *plan) chatStep(w *writer, u *unit, l *list) {
	nparts, ncalls := 0, 0
	for _, e := range u.items {
		switch e.kind {
		case entMessage:
			nparts += len(e.parts)
		case entCall:
			ncalls++
		}
	}
	if nparts == 0 && ncalls == 0 {
		return
	}
	l.next()
	w.raw(`{"role":"assistant"`)
	if nparts > 0 {
		w.raw(`,"content":`)
		if nparts > 1 {
			w.raw("[")
		}
		first := true
		for _, e := range u.items {
			if e.kind != entMessage {
				continue
			}
			pcs := p.pieces(e.parts, noMedia, "an assistant message", false)
			for i := range pcs {
				if nparts > 1 {
					if !first {
						w.raw(",")
					}
					w.raw(`{"type":"text","text":`)
				}
				first = false
				w.piece(&pcs[i])
				if nparts > 1 {
					w.raw("}")
				}
			}
		}
		if nparts > 1 {
			w.raw("]")
		}
	}
	if ncalls > 0 {
		w.raw(`,"tool_calls":[`)
		first := true
		for _, c := range u.items {
			if c.kind != entCall {
				continue
			}
			if !first {
				w.raw(",")
			}
			first = false
			w.raw(`{"id":`)
			w.str(p.ids.of(c))
			w.raw(`,"type":"function","function":{"name":`)
			w.str(c.name)
			w.raw(`,"arguments":`)
			writeArgsString(w, c.args)
			w.raw("}}")
		}
		w.raw("]")
	}
	w.raw("}")

	var moved []piece // media from tool results, sent in a user message after the step
	for i, c := range u.calls {
		r := u.results[i]
		pcs := p.pieces(r.parts, chatUserMedia, "a tool result", r.isError)
		l.next()
		w.raw(`{"role":"tool","tool_call_id":`)
		w.str(p.ids.of(c))
		w.raw(`,"content":`)
		switch {
		case len(pcs) == 0:
			w.raw(`""`)
		case len(pcs) == 1 && pcs[0].isText():
			w.piece(&pcs[0])
		default:
			w.raw("[")
			for j := range pcs {
				if j > 0 {
					w.raw(",")
				}
				pc := pcs[j]
				if !pc.isText() {
					moved = append(moved, pc)
					pc = piece{lit: placeholder(*pc.media, "sent in the next user message")}
				}
				w.raw(`{"type":"text","text":`)
				w.piece(&pc)
				w.raw("}")
			}
			w.raw("]")
		}
		w.raw("}")
	}
	if len(moved) > 0 {
		l.next()
		w.raw(`{"role":"user","content":`)
		chatContent(w, append([]piece{{lit: ToolMediaLead}}, moved...))
		w.raw("}")
	}
}
