package capsule

import (
	"fmt"
	"strings"
	"testing"
)

func TestAgentJSONNamesAProviderAndModelTernKnows(t *testing.T) {
	for _, c := range []struct{ fields, want string }{
		{`"provider":"openai","model":"gpt-5"`, `provider "openai" is not one of openai-chat, openai-responses, anthropic, gemini, ollama, offline`},
		{`"provider":"anthropic","model":""`, "model is empty"},
		{`"provider":"offline","model":"gpt-5"`, `the offline provider has one model, "tern-offline"`},
		{`"provider":"ollama","model":"qwen3","base_url":"localhost:11434"}`, `base_url "localhost:11434" is not an http:// or https:// URL`},
		{`"provider":"anthropic","model":"claude-sonnet-4-5","key_secret":"sk-ant-api03-abc"`, "key_secret is not a secret name"},
		{`"provider":"gemini","model":"gemini-2.5-flash","key_secret":"AIzaSyA1234567890abcdefghijklmnopqrstu"`, "key_secret is not a secret name"},
		{`"provider":"openai-chat","model":"m","base_url":"http://user:pass@127.0.0.1:8080/v1"`, "carries credentials or a query"},
		{`"provider":"openai-chat","model":"m","base_url":"http://127.0.0.1:8080/v1?api_key=sk-xyz"`, "carries credentials or a query"},
		// A path the client adds itself would be posted to twice.
		{`"provider":"openai-chat","model":"m","base_url":"http://127.0.0.1:8080/v1/chat/completions"`, `ends in "/chat/completions", which tern adds itself: write "http://127.0.0.1:8080/v1"`},
		{`"provider":"openai-responses","model":"m","base_url":"https://api.openai.com/v1/responses/"`, `write "https://api.openai.com/v1"`},
		{`"provider":"anthropic","model":"m","base_url":"https://api.anthropic.com/v1"`, `ends in "/v1", which tern adds itself: write "https://api.anthropic.com"`},
		{`"provider":"anthropic","model":"m","base_url":"https://api.anthropic.com/v1/messages"`, `write "https://api.anthropic.com"`},
		{`"provider":"gemini","model":"m","base_url":"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent"`, `write "https://generativelanguage.googleapis.com"`},
		{`"provider":"ollama","model":"m","base_url":"http://127.0.0.1:11434/api/chat"`, `write "http://127.0.0.1:11434"`},
		{`"provider":"ollama","model":"m","base_url":"http://127.0.0.1:11434/v1"`, `use provider "openai-chat" with it, or provider "ollama" with "http://127.0.0.1:11434"`},
		// A wrong type says which field, where, and what it must be, in JSON's words.
		{`"provider":"ollama","model":5`, `line 1, column 71: "model" must be a string, not a number`},
		{`"provider":"ollama","model":"m","tools":"read_file"`, `"tools" must be a list, not a string`},
		{`"provider":"ollama","model":"m","modle":"x"`, `line 1, column 74: unknown field "modle"`},
		// mcp_servers: the shape other MCP clients write, checked.
		{`"provider":"ollama","model":"m","mcp_servers":{"a__b":{"command":"x"}} `, `"a__b" is not a server name`},
		{`"provider":"ollama","model":"m","mcp_servers":{"fs":{"command":"x","url":"http://h/mcp"}} `, `mcp_servers.fs: give either command`},
		{`"provider":"ollama","model":"m","mcp_servers":{"fs":{"type":"sse","url":"http://h/sse"}} `, `the older HTTP+SSE transport`},
		{`"provider":"ollama","model":"m","mcp_servers":{"fs":{"type":"stdio","url":"http://h/mcp"}} `, `type "stdio" needs command`},
		{`"provider":"ollama","model":"m","mcp_servers":{"fs":{"type":"websocket","command":"x"}} `, `type "websocket" is not`},
		{`"provider":"ollama","model":"m","mcp_servers":{"gh":{"url":"ftp://h/mcp"}} `, `is not an http:// or https:// URL`},
		{`"provider":"ollama","model":"m","mcp_servers":{"gh":{"url":"https://h/mcp","headers":{"X":"${GH}"}}} `, `names ${GH}, which secrets does not list`},
		{`"provider":"ollama","model":"m","mcp_servers":{"gh":{"url":"https://h/mcp","headers":{"Authorization":"Bearer ghp_AbCdEf0123456789XyZaBcDeF0123"}}} `, `looks like a key or token`},
		{`"provider":"ollama","model":"m","mcp_servers":{"fs":{"command":"x","cwd":"/tmp"}} `, `unknown field "cwd"`},
	} {
		fields := strings.TrimSuffix(c.fields, "}")
		_, err := ParseAgent([]byte(`{"name":"a","instructions":"","tools":[],` + fields + `}`))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.fields, err, c.want)
		}
	}
	for _, bad := range []string{`{"name":"a",`, `[1]`, ``, `{"name":"a" "model":"m"}`} {
		_, err := ParseAgent([]byte(bad))
		msg := strings.TrimPrefix(fmt.Sprint(err), "agent.json: ")
		if err == nil || strings.Contains(msg, "Go ") || strings.Contains(msg, "json:") {
			t.Errorf("%q: %v, want an error in a person's words", bad, err)
		}
	}
	for _, good := range []string{`{"type":"stdio","command":"npx","args":["-y","x"]}`, `{"type":"http","url":"https://h/mcp"}`, `{"type":"streamable-http","url":"http://127.0.0.1:3001/mcp"}`} {
		if _, err := ParseAgent([]byte(`{"name":"a","instructions":"","provider":"ollama","model":"m","tools":[],"mcp_servers":{"s":` + good + `}}`)); err != nil {
			t.Errorf("%s: %v", good, err)
		}
	}
	a, err := ParseAgent([]byte(`{"name":"a","instructions":"","provider":"openai-chat","model":"qwen2.5-7b","base_url":"http://127.0.0.1:8080/v1","key_secret":"LOCAL_KEY","tools":[]}`))
	if err != nil || a.BaseURL != "http://127.0.0.1:8080/v1" || a.KeySecret != "LOCAL_KEY" {
		t.Fatalf("%+v %v", a, err)
	}
}
