package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// param is one argument of a built-in tool. The list of a tool's params is
// the one source of both its JSON Schema and the checks of its arguments.
type param struct {
	name     string
	kind     string // "string", "integer", "boolean", or "headers" (an object of strings)
	required bool
	desc     string
	min, max int64    // an integer's bounds; max 0: none
	enum     []string // a string's values (compared without case)
}

// schema returns the JSON Schema of an object with these params.
func schema(params []param) json.RawMessage {
	props := map[string]any{}
	required := []string{}
	for _, p := range params {
		prop := map[string]any{"description": p.desc}
		switch p.kind {
		case "headers":
			prop["type"] = "object"
			prop["additionalProperties"] = map[string]string{"type": "string"}
		case "integer":
			prop["type"] = "integer"
			prop["minimum"] = p.min
			if p.max > 0 {
				prop["maximum"] = p.max
			}
		default:
			prop["type"] = p.kind
		}
		if p.enum != nil {
			prop["enum"] = p.enum
		}
		props[p.name] = prop
		if p.required {
			required = append(required, p.name)
		}
	}
	b, err := json.Marshal(map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             required,
		"additionalProperties": false,
	})
	if err != nil {
		panic(err) // the params are literals of this package
	}
	return b
}

// parseArgs checks raw against params and decodes it into dst (a pointer
// to a struct whose json tags are the params' names). It returns "" or
// what is wrong, naming the field, for an error result.
func parseArgs(raw json.RawMessage, params []param, dst any) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return fmt.Sprintf("the arguments are not a JSON object (%s)", names(params))
	}
	var unknown []string
	for k := range fields {
		if !slices.ContainsFunc(params, func(p param) bool { return p.name == k }) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fmt.Sprintf("unknown field %s (the fields are %s)", strings.Join(unknown, ", "), names(params))
	}
	for _, p := range params {
		v, ok := fields[p.name]
		if !ok {
			if p.required {
				return fmt.Sprintf("missing field %s: %s", p.name, p.desc)
			}
			continue
		}
		if msg := checkValue(p, v); msg != "" {
			return msg
		}
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Sprintf("the arguments do not decode: %v", err)
	}
	return ""
}

// checkValue checks one field's value against its param.
func checkValue(p param, v json.RawMessage) string {
	if string(v) == "null" {
		return fmt.Sprintf("field %s is null: give a value or leave the field out", p.name)
	}
	switch p.kind {
	case "string":
		var s string
		if json.Unmarshal(v, &s) != nil {
			return fmt.Sprintf("field %s must be a string, not %s", p.name, short(v))
		}
		if p.enum != nil && !slices.ContainsFunc(p.enum, func(e string) bool { return strings.EqualFold(e, s) }) {
			return fmt.Sprintf("field %s must be one of %s, not %q", p.name, strings.Join(p.enum, ", "), s)
		}
	case "integer":
		// Not through json.Number, which takes a string holding a number.
		i, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return fmt.Sprintf("field %s must be an integer, not %s", p.name, short(v))
		}
		if i < p.min || (p.max > 0 && i > p.max) {
			if p.max > 0 {
				return fmt.Sprintf("field %s must be from %d to %d, not %d", p.name, p.min, p.max, i)
			}
			return fmt.Sprintf("field %s must be at least %d, not %d", p.name, p.min, i)
		}
	case "boolean":
		var b bool
		if json.Unmarshal(v, &b) != nil {
			return fmt.Sprintf("field %s must be true or false, not %s", p.name, short(v))
		}
	case "headers":
		var m map[string]string
		if json.Unmarshal(v, &m) != nil {
			return fmt.Sprintf("field %s must be an object of strings, not %s", p.name, short(v))
		}
	}
	return ""
}

// names lists the params, the required ones first as the schema has them.
func names(params []param) string {
	var s []string
	for _, p := range params {
		if p.required {
			s = append(s, p.name)
		} else {
			s = append(s, p.name+"?")
		}
	}
	return strings.Join(s, ", ")
}

// short quotes a JSON value for a message, cut to a readable length.
func short(v json.RawMessage) string {
	r := []rune(string(v))
	if len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return string(r)
}
