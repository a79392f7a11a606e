package render

// alternation writes the messages of providers whose roles must alternate
// and whose first message must be the user's (Anthropic, Gemini). A block
// for the role of the open message joins it; a block for the other role
// closes it and opens a new one. So consecutive user messages (a tool
// result, then what the user said) become one message, results first.
type alternation struct {
	w     *writer
	user  string            // the user role's name
	begin func(role string) // writes the opening of a message, up to its first block
	end   string            // closes a message
	lead  string            // a complete user block, for when the model speaks first
	open  string            // the role of the open message, "" before the first
}

// leadText is the user message put first when a conversation begins with
// the assistant (Anthropic and Gemini refuse that).
const leadText = "[tern: the conversation begins with the assistant]"

// block prepares for one block of role: it writes the separator, or closes
// the open message and opens one for role.
func (a *alternation) block(role string) {
	switch {
	case a.open == role:
		a.w.raw(",")
		return
	case a.open != "":
		a.w.raw(a.end)
		a.w.raw(",")
	case role != a.user:
		a.begin(a.user)
		a.w.raw(a.lead)
		a.w.raw(a.end)
		a.w.raw(",")
	}
	a.begin(role)
	a.open = role
}

// close closes the open message, if any.
func (a *alternation) close() {
	if a.open != "" {
		a.w.raw(a.end)
	}
}
