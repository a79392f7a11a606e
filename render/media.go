package render

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// Blobs gives render the bytes of the blobs that images and files name.
// render never opens files itself: the caller adapts its store (a capsule's
// blob folder, a peer's cache) to this. Blob returns the whole content of
// the blob with the given CID, or an error if it is not available. Render
// calls it at most once per CID per Render call.
type Blobs interface {
	Blob(cid string) ([]byte, error)
}

// errNoBlobs is what a missing Blobs answers.
var errNoBlobs = errors.New("no blob store given")

// blobCache remembers each blob fetched during one Render call.
type blobCache struct {
	src Blobs
	m   map[string]blobResult
}

type blobResult struct {
	data []byte
	err  error
}

func (c *blobCache) get(cid string) ([]byte, error) {
	if r, ok := c.m[cid]; ok {
		return r.data, r.err
	}
	var r blobResult
	if c.src == nil {
		r.err = errNoBlobs
	} else {
		r.data, r.err = c.src.Blob(cid)
	}
	if c.m == nil {
		c.m = make(map[string]blobResult)
	}
	c.m[cid] = r
	return r.data, r.err
}

// ToolMediaLead begins the user message in which OpenAI Chat, whose tool
// messages take only text, is given the images and files of the tool
// results just before it.
const ToolMediaLead = "Media returned by the tool calls above:"

// media is what a renderer does with one image or file part.
type media struct {
	data []byte // the blob, when the part goes in as data
	text string // otherwise the text that stands in for it
}

// mediaPolicy says which media types a provider takes in a given place.
type mediaPolicy struct {
	image func(mediaType string) bool // images sent as images
	file  func(mediaType string) bool // files sent as documents (PDF and the like)
}

// resolve fetches the part's blob and decides how it is sent under pol:
// as data, as inline text (a textual file a provider cannot take as a
// document), or as a bracketed placeholder when it cannot be sent at all.
// Losses are noted.
func (p *plan) resolve(pt part, pol mediaPolicy, where string) media {
	kind := "image"
	ok := pol.image != nil && pol.image(pt.mediaType)
	if pt.kind == partFile {
		kind = "file"
		ok = pol.file != nil && pol.file(pt.mediaType)
	}
	data, err := p.blobs.get(pt.cid)
	if err != nil {
		p.noteBlob(pt.cid, err)
		return media{text: placeholder(pt, "not available")}
	}
	switch {
	case ok:
		return media{data: data}
	case pt.kind == partFile && isTextual(pt.mediaType) && utf8.Valid(data):
		return media{text: inlineFile(pt, data)}
	}
	p.notes.addf("%s %s (%s) in %s: %s does not take it; sent as a placeholder", kind, pt.cid, pt.mediaType, where, p.t.Provider)
	return media{text: placeholder(pt, "not shown, "+string(p.t.Provider)+" does not take it here")}
}

// noteBlob notes a missing blob once.
func (p *plan) noteBlob(cid string, err error) {
	if p.missing == nil {
		p.missing = make(map[string]bool)
	}
	if !p.missing[cid] {
		p.missing[cid] = true
		p.notes.addf("blob %s: %v; its parts are sent as placeholders", cid, err)
	}
}

// placeholder is the text that stands in for media that cannot be sent.
func placeholder(pt part, why string) string {
	var b strings.Builder
	b.WriteString("[")
	if pt.kind == partFile {
		b.WriteString("file")
		if pt.name != "" {
			b.WriteString(" " + pt.name)
		}
	} else {
		b.WriteString("image")
	}
	if pt.mediaType != "" {
		b.WriteString(" (" + pt.mediaType + ")")
	}
	b.WriteString(": " + why + "]")
	return b.String()
}

// inlineFile is a textual file sent as text.
func inlineFile(pt part, data []byte) string {
	name := pt.name
	if name == "" {
		name = pt.cid
	}
	return "<file name=\"" + name + "\" media_type=\"" + pt.mediaType + "\">\n" + string(data) + "\n</file>"
}

// isTextual reports whether a file of this media type is text a model can
// read inline.
func isTextual(mt string) bool {
	mt = baseType(mt)
	switch {
	case strings.HasPrefix(mt, "text/"),
		strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"):
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/yaml", "application/x-yaml",
		"application/toml", "application/javascript", "application/x-sh", "application/sql":
		return true
	}
	return false
}

// baseType is a media type without parameters, lowercased.
func baseType(mt string) string {
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = mt[:i]
	}
	return strings.ToLower(strings.TrimSpace(mt))
}

func oneOf(types ...string) func(string) bool {
	return func(mt string) bool {
		mt = baseType(mt)
		for _, t := range types {
			if mt == t {
				return true
			}
		}
		return false
	}
}

// The image types every provider documents: JPEG, PNG, GIF and WebP
// (Gemini: JPEG, PNG, WebP, HEIC, HEIF).
var (
	commonImages = oneOf("image/jpeg", "image/png", "image/gif", "image/webp")
	geminiImages = oneOf("image/jpeg", "image/png", "image/webp", "image/heic", "image/heif")
	isPDF        = oneOf("application/pdf")
)
