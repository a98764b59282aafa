// testserver is an MCP server for the mcp room's tests, written with the
// SDK: its tools report who and where it runs (uid, network interfaces),
// echo, sleep (cancellable), die mid-call, and answer large; with
// -subscribe it takes resource subscriptions, and touch tells of an
// update. It speaks
// stdio, or streamable HTTP on -http ADDR. With -raw MODE it is no real
// server: "garbage" answers the handshake with text that is not
// JSON-RPC; "badnames" offers tools whose names could not be file names.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type whoami struct {
	Uid        int      `json:"uid"`
	Gid        int      `json:"gid"`
	Interfaces []string `json:"interfaces"`
	Home       string   `json:"home"`
}

type echoArgs struct {
	Message string `json:"message" jsonschema:"the text to echo"`
}

type sleepArgs struct {
	Seconds float64 `json:"seconds" jsonschema:"how long to sleep"`
	Mark    string  `json:"mark,omitempty" jsonschema:"a file made when the sleep is cancelled"`
	Started string  `json:"started,omitempty" jsonschema:"a file made when the sleep starts"`
}

type growArgs struct {
	Name string `json:"name" jsonschema:"the name of the tool to add"`
}

type touchArgs struct {
	URI string `json:"uri" jsonschema:"the resource that changed"`
}

type bigArgs struct {
	Bytes int `json:"bytes" jsonschema:"how many bytes of text to answer"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func main() {
	httpAddr := flag.String("http", "", "serve streamable HTTP on this address")
	raw := flag.String("raw", "", "garbage | badnames: a broken server")
	subscribe := flag.Bool("subscribe", false, "take resource subscriptions, and offer touch, which tells of a resource's update")
	flag.Parse()
	if *raw != "" {
		rawServer(*raw)
		return
	}
	opts := &mcp.ServerOptions{Instructions: "a server for tests"}
	if *subscribe {
		opts.SubscribeHandler = func(context.Context, *mcp.SubscribeRequest) error { return nil }
		opts.UnsubscribeHandler = func(context.Context, *mcp.UnsubscribeRequest) error { return nil }
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "testserver", Version: "1"}, opts)
	if *subscribe {
		mcp.AddTool(s, &mcp.Tool{Name: "touch", Description: "tells the subscribers of a resource that it changed"},
			func(ctx context.Context, _ *mcp.CallToolRequest, a touchArgs) (*mcp.CallToolResult, any, error) {
				return text("touched " + a.URI), nil, s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: a.URI})
			})
	}
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "the uid, gid, home and network interfaces the server runs with"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoami, error) {
			w := whoami{Uid: os.Getuid(), Gid: os.Getgid(), Home: os.Getenv("HOME"), Interfaces: []string{}}
			ifs, _ := net.Interfaces()
			for _, i := range ifs {
				w.Interfaces = append(w.Interfaces, i.Name)
			}
			return nil, w, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echoes a message back"},
		func(ctx context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
			return text("echo: " + a.Message), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "sleeps, unless cancelled"},
		func(ctx context.Context, _ *mcp.CallToolRequest, a sleepArgs) (*mcp.CallToolResult, any, error) {
			if a.Started != "" {
				os.WriteFile(a.Started, []byte("started\n"), 0o644)
			}
			select {
			case <-time.After(time.Duration(a.Seconds * float64(time.Second))):
				return text("slept"), nil, nil
			case <-ctx.Done():
				if a.Mark != "" {
					os.WriteFile(a.Mark, []byte("cancelled\n"), 0o644)
				}
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "die", Description: "exits the server in the middle of the call"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "dying as asked")
			go func() { time.Sleep(100 * time.Millisecond); os.Exit(3) }()
			time.Sleep(time.Hour)
			return nil, nil, nil
		})
	// grow adds a tool of the name it is given, which echoes too: the
	// SDK then sends notifications/tools/list_changed.
	mcp.AddTool(s, &mcp.Tool{Name: "grow", Description: "adds a tool of the given name"},
		func(ctx context.Context, _ *mcp.CallToolRequest, a growArgs) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(s, &mcp.Tool{Name: a.Name, Description: "a tool grow added"},
				func(ctx context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
					return text("grown: " + a.Message), nil, nil
				})
			return text("added " + a.Name), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "answers bytes of text"},
		func(ctx context.Context, _ *mcp.CallToolRequest, a bigArgs) (*mcp.CallToolResult, any, error) {
			return text(strings.Repeat("0123456789abcdef", a.Bytes/16+1)[:a.Bytes]), nil, nil
		})
	s.AddResource(&mcp.Resource{URI: "test://readme", Name: "readme", Description: "a resource", MIMEType: "text/plain"},
		func(ctx context.Context, _ *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://readme", Text: "hello"}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Description: "a prompt", Arguments: []*mcp.PromptArgument{{Name: "who", Required: true}}},
		func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Description: "a greeting", Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "Say hello to " + req.Params.Arguments["who"] + "."}}}}, nil
		})
	// test://big/<bytes> (a template: not among the resources listed)
	// reads as that many bytes of text.
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://big/{bytes}", Name: "big", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			var n int
			if _, err := fmt.Sscanf(req.Params.URI, "test://big/%d", &n); err != nil || n < 0 || n > 64<<20 {
				return nil, mcp.ResourceNotFoundError(req.Params.URI)
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain",
				Text: strings.Repeat("0123456789abcdef", n/16+1)[:n]}}}, nil
		})
	if *httpAddr != "" {
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
		log.Fatal(http.ListenAndServe(*httpAddr, h))
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

// rawServer is a broken server on stdio: it reads requests and answers
// as mode says.
func rawServer(mode string) {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for in.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil || len(req.ID) == 0 {
			continue
		}
		answer := func(result string) { fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", req.ID, result) }
		switch {
		case mode == "garbage":
			fmt.Println("this is not JSON-RPC {{{")
		case req.Method == "initialize":
			answer(`{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}`)
		case req.Method == "tools/list":
			answer(`{"tools":[{"name":"ok","inputSchema":{"type":"object"}},{"name":"a/b","inputSchema":{"type":"object"}},{"name":"..","inputSchema":{"type":"object"}},{"name":"x\u0007y","inputSchema":{"type":"object"}}]}`)
		default:
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no such method"}}`+"\n", req.ID)
		}
	}
}
