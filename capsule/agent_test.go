package capsule

import (
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
	} {
		fields := strings.TrimSuffix(c.fields, "}")
		_, err := ParseAgent([]byte(`{"name":"a","instructions":"","tools":[],` + fields + `}`))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.fields, err, c.want)
		}
	}
	a, err := ParseAgent([]byte(`{"name":"a","instructions":"","provider":"openai-chat","model":"qwen2.5-7b","base_url":"http://127.0.0.1:8080/v1","key_secret":"LOCAL_KEY","tools":[]}`))
	if err != nil || a.BaseURL != "http://127.0.0.1:8080/v1" || a.KeySecret != "LOCAL_KEY" {
		t.Fatalf("%+v %v", a, err)
	}
}
