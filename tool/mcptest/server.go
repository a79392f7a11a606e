// Package mcptest is an MCP server for tern's tests, built with the
// official Go SDK: a few tools with each effect class, results of each
// kind, and a tool that adds a tool (tools/list_changed). Serve it over
// stdio from a test binary (ServeStdio) or over streamable HTTP (Handler).
package mcptest

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// EnvStdio set to "1" makes a test binary that calls ServeIfAsked serve
// the server on its stdin and stdout.
const EnvStdio = "TERN_TEST_AS_MCP"

// Calls counts the calls of record_call in this process, for tests.
var Calls atomic.Int64

type echoArgs struct {
	Text string `json:"text" jsonschema:"what to echo"`
}

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

type writeArgs struct {
	Path    string `json:"path" jsonschema:"a file of the server's folder"`
	Content string `json:"content"`
}

type sum struct {
	Sum int `json:"sum"`
}

// NewServer returns the test server:
//   - echo (readOnlyHint) answers its text;
//   - add (idempotentHint) answers structured content {"sum": a+b};
//   - record_call (no hints: at-most-once) counts a call and answers "recorded N";
//   - fail answers an error result;
//   - picture answers an image;
//   - vanish ends the server's process during the call (over stdio);
//   - grow adds the tool grown (tools/list_changed);
//   - environment (readOnlyHint) answers the server's environment, a
//     NAME=value a line, sorted;
//   - write_file (idempotentHint, as the reference filesystem server marks
//     its own) writes content to a file of the server's folder, replacing
//     it.
func NewServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "tern-test", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes its text.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two numbers.", Annotations: &mcp.ToolAnnotations{IdempotentHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, a addArgs) (*mcp.CallToolResult, sum, error) {
			return nil, sum{a.A + a.B}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "record_call", Description: "Records a call; never to repeat blind."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			n := Calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "recorded " + strconv.FormatInt(n, 10)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fails.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("it failed, as asked")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "picture", Description: "Answers an image.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a picture:"}, &mcp.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG....")}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "vanish", Description: "Ends the server during the call (served over stdio); never to repeat blind."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if os.Getenv(EnvStdio) == "1" {
				os.Exit(3)
			}
			return nil, nil, errors.New("vanish ends only a server of its own process")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "environment", Description: "Answers the server's environment.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			env := os.Environ()
			slices.Sort(env)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(env, "\n")}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "write_file", Description: "Writes a file, replacing it.", Annotations: &mcp.ToolAnnotations{IdempotentHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, a writeArgs) (*mcp.CallToolResult, any, error) {
			if !filepath.IsLocal(a.Path) {
				return nil, nil, errors.New("path must be a file of the server's folder")
			}
			if err := os.WriteFile(a.Path, []byte(a.Content), 0o644); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wrote " + a.Path}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "grow", Description: "Adds the tool grown."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(s, &mcp.Tool{Name: "grown", Description: "Added by grow.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
				func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "grown"}}}, nil, nil
				})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "grew"}}}, nil, nil
		})
	return s
}

// Handler serves a new test server per session over streamable HTTP.
func Handler() http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return NewServer() }, nil)
}

// ServeIfAsked serves the test server on stdio and exits when EnvStdio is
// "1"; otherwise it returns. Call it first in TestMain.
func ServeIfAsked() {
	if os.Getenv(EnvStdio) != "1" {
		return
	}
	err := NewServer().Run(context.Background(), &mcp.StdioTransport{})
	if err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}
