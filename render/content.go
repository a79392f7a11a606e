package render

// piece is one content part as a provider will see it: text (a token from
// the journal, or a literal render wrote, after an optional prefix), or
// media sent as data.
type piece struct {
	prefix string // text: written before tok or lit
	tok    []byte // text: a JSON string token from the journal
	lit    string // text: literal text (a placeholder, an inlined file)
	media  *part  // media: the part, when it goes as data
	data   []byte // media: the blob
}

func (pc *piece) isText() bool { return pc.media == nil }

// pieces turns parts into pieces under the provider's media policy pol
// (where names the place, for notes). With errorFlag, an error result's
// text starts with "error: ", for providers that have no error flag. The
// result is valid until the next call.
func (p *plan) pieces(parts []part, pol mediaPolicy, where string, errorFlag bool) []piece {
	out := p.scratch[:0]
	for i := range parts {
		pt := &parts[i]
		if pt.kind == partText {
			out = append(out, piece{tok: pt.text})
			continue
		}
		m := p.resolve(*pt, pol, where)
		if m.data != nil {
			out = append(out, piece{media: pt, data: m.data})
		} else {
			out = append(out, piece{lit: m.text})
		}
	}
	if errorFlag {
		if len(out) > 0 && out[0].isText() {
			out[0].prefix = errorPrefix
		} else {
			out = append(out, piece{})
			copy(out[1:], out)
			out[0] = piece{lit: "error"}
		}
	}
	p.scratch = out
	return out
}

// piece writes a text piece as one JSON string.
func (w *writer) piece(pc *piece) {
	w.b = append(w.b, '"')
	w.pieceInner(pc)
	w.b = append(w.b, '"')
}

// pieceInner writes a text piece's escaped content, without quotes.
func (w *writer) pieceInner(pc *piece) {
	w.b = appendEscaped(w.b, pc.prefix)
	if pc.tok != nil {
		w.b = append(w.b, pc.tok[1:len(pc.tok)-1]...)
	} else {
		w.b = appendEscaped(w.b, pc.lit)
	}
}

// joined writes the text pieces of pcs as one JSON string, separated by
// sep; media pieces are left out.
func (w *writer) joined(pcs []piece, sep string) {
	w.b = append(w.b, '"')
	first := true
	for i := range pcs {
		pc := &pcs[i]
		if !pc.isText() {
			continue
		}
		if !first {
			w.b = appendEscaped(w.b, sep)
		}
		first = false
		w.pieceInner(pc)
	}
	w.b = append(w.b, '"')
}

// onlyText reports whether every piece is text.
func onlyText(pcs []piece) bool {
	for i := range pcs {
		if !pcs[i].isText() {
			return false
		}
	}
	return true
}

// list writes items separated by commas: call it before each item.
type list struct {
	w *writer
	n int
}

func (l *list) next() {
	if l.n > 0 {
		l.w.raw(",")
	}
	l.n++
}
