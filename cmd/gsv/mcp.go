package main

// The sys.mcp.* commands: gsv mcp add, list, remove, refresh, call and
// tools. Each is one syscall through /sys/call.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
)

func (c *cli) mcpCmd() *cobra.Command {
	mcp := &cobra.Command{
		Use:   "mcp",
		Short: "Add, list, call and remove your MCP servers (sys.mcp.*)",
		Long: "MCP servers are per user: you see and use only your own (root may name a --uid).\n" +
			"A stdio server runs as you, in an exec session of yours (your sandbox); an HTTP server is\n" +
			"reached at an https URL (or http on loopback). Listing never asks a server: it shows what\n" +
			"was discovered when it last connected. Their files are under /mcp/$USER.",
	}
	var uid int
	uidArg := func(cmd *cobra.Command) *uint32 {
		if !cmd.Flags().Changed("uid") {
			return nil
		}
		u := uint32(uid)
		return &u
	}
	withUID := func(cmd *cobra.Command) *cobra.Command {
		cmd.Flags().IntVar(&uid, "uid", 0, "act on this user's servers (root only)")
		return cmd
	}

	var transport, network, workdir, device string
	var headers, env, mounts []string
	add := &cobra.Command{
		Use:   "add NAME (URL | -- COMMAND [ARG...]) [--transport auto|streamable-http|sse] [--header K=V]... [--network none|full] [--mount HOST:GUEST[:ro|rw]]... [--workdir DIR] [--env K=V]... [--device ID]",
		Short: "Add an MCP server, connect it and discover its tools (sys.mcp.add)",
		Long: "Add an MCP server: a URL (https, or http on loopback; --transport and --header apply), or a\n" +
			"command after --, run as you in an exec session of yours (--network, default full; --mount,\n" +
			"--workdir and --env as for gsv session open). It prints the server's summary; a server that\n" +
			"did not come up is kept, failed, with its error (gsv mcp refresh NAME, or remove it).\n" +
			"  gsv mcp add everything -- npx -y @modelcontextprotocol/server-everything\n" +
			"  gsv mcp add tracker https://mcp.example.com/mcp --header 'Authorization=Bearer ...'",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.McpAddArgs{Uid: uidArg(cmd), Name: args[0]}
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				if dash != 1 || len(args) < 2 {
					return fmt.Errorf("usage: gsv mcp add NAME -- COMMAND [ARG...]")
				}
				a.Stdio = &abi.McpStdio{Command: args[1:], NetworkMode: network, Workdir: workdir, Device: device}
				var err error
				if a.Stdio.Env, err = keyValues("--env", env); err != nil {
					return err
				}
				for _, m := range mounts {
					pm, err := abi.ParseMount(m)
					if err != nil {
						return fmt.Errorf("--mount %q: %v", m, err)
					}
					a.Stdio.Mounts = append(a.Stdio.Mounts, pm)
				}
				if transport != "" || len(headers) > 0 {
					return fmt.Errorf("--transport and --header are for a URL server, not a command")
				}
			} else {
				if len(args) != 2 {
					return fmt.Errorf("usage: gsv mcp add NAME URL, or gsv mcp add NAME -- COMMAND [ARG...]")
				}
				if network != "" || workdir != "" || device != "" || len(env) > 0 || len(mounts) > 0 {
					return fmt.Errorf("--network, --mount, --workdir, --env and --device are for a command, not a URL server")
				}
				a.URL = args[1]
				h, err := keyValues("--header", headers)
				if err != nil {
					return err
				}
				if transport != "" || h != nil {
					a.Transport = &abi.McpTransport{Type: transport, Headers: h}
				}
			}
			return show(c, abi.SysMcpAdd, a, func(r *abi.McpServerResult) error { return c.showServer(cmd.ErrOrStderr(), r.Server, args[0]) })
		},
	}
	f := add.Flags()
	f.StringVar(&transport, "transport", "", "auto (default: streamable HTTP, then SSE), streamable-http or sse")
	f.StringArrayVar(&headers, "header", nil, "send header K=V with every request (repeatable; never shown)")
	f.StringVar(&network, "network", "", "the command's network: full (default) or none")
	f.StringArrayVar(&mounts, "mount", nil, "mount HOST:GUEST[:ro|rw] in the command's session (repeatable)")
	f.StringVar(&workdir, "workdir", "", "the command's working directory in its session")
	f.StringArrayVar(&env, "env", nil, "set K=V in the command's environment (repeatable)")
	f.StringVar(&device, "device", "", "run the command on this remote device, as its user (its paths for --mount and --workdir)")
	withUID(add)

	list := withUID(&cobra.Command{
		Use:   "list [--json]",
		Short: "List your MCP servers: state, transport, and the tools, resources and prompts discovered (sys.mcp.list)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.SysMcpList, &abi.McpListArgs{Uid: uidArg(cmd)}, func(r *abi.McpListResult) error {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tSTATE\tTRANSPORT\tTOOLS\tRESOURCES\tPROMPTS\tWHERE")
				for _, s := range r.Servers {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", cell(s.Name), s.State, s.Transport, len(s.Tools), s.ResourceCount, s.PromptCount, cell(where(&s)))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				for _, s := range r.Servers {
					if s.Error != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", cell(s.Name), cell(*s.Error))
					}
				}
				return nil
			})
		},
	})

	remove := withUID(&cobra.Command{
		Use:   "remove NAME",
		Short: "Remove an MCP server and stop it (sys.mcp.remove)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.SysMcpRemove, &abi.McpServerArgs{Uid: uidArg(cmd), ServerID: args[0]}, func(r *abi.McpRemoveResult) error {
				if !r.Removed {
					return fmt.Errorf("%s: %s: no such MCP server", abi.SysMcpRemove.Name, args[0])
				}
				return nil
			})
		},
	})

	refresh := withUID(&cobra.Command{
		Use:   "refresh NAME",
		Short: "Reconnect an MCP server and discover its tools again (sys.mcp.refresh)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.SysMcpRefresh, &abi.McpServerArgs{Uid: uidArg(cmd), ServerID: args[0]}, func(r *abi.McpServerResult) error {
				if r.Server == nil {
					return fmt.Errorf("%s: %s: no such MCP server", abi.SysMcpRefresh.Name, args[0])
				}
				return c.showServer(cmd.ErrOrStderr(), r.Server, args[0])
			})
		},
	})

	var timeout int64
	call := withUID(&cobra.Command{
		Use:   "call SERVER TOOL [ARGS-JSON] [--timeout-ms N] [--json]",
		Short: "Call a tool of an MCP server with a JSON object of arguments (sys.mcp.call)",
		Long: "Call a tool and print its result: the text of its text content, else the JSON of its\n" +
			"structured content, else its content blocks as JSON (--json: the whole result). A tool's own\n" +
			"failure (isError) is printed the same way and exits 1. A result over 1 MiB is kept as a file:\n" +
			"its preview is printed, and its path on stderr.\n" +
			"  gsv mcp call everything echo '{\"message\":\"hi\"}'",
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.McpCallArgs{Uid: uidArg(cmd), ServerID: args[0], Name: args[1]}
			if len(args) == 3 {
				if !json.Valid([]byte(args[2])) {
					return fmt.Errorf("ARGS-JSON %q is not JSON: give an object such as '{\"message\":\"hi\"}'", args[2])
				}
				a.Arguments = json.RawMessage(args[2])
			}
			if cmd.Flags().Changed("timeout-ms") {
				a.TimeoutMs = &timeout
			}
			return show(c, abi.SysMcpCall, a, func(r *abi.McpCallResult) error {
				if err := c.showResult(cmd.ErrOrStderr(), r); err != nil {
					return err
				}
				if r.IsError {
					return &exitError{code: 1}
				}
				return nil
			})
		},
	})
	call.Flags().Int64Var(&timeout, "timeout-ms", 0, "cancel the call after N milliseconds (default 60000, at most 600000)")

	var server string
	var limit int
	tools := withUID(&cobra.Command{
		Use:   "tools [QUERY...] [--server NAME] [--limit N] [--json]",
		Short: "List or search your MCP servers' tools by name and description (sys.mcp.tools)",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.McpToolsArgs{Uid: uidArg(cmd), ServerID: server, Query: strings.Join(args, " "), Limit: limit}
			return show(c, abi.SysMcpTools, a, func(r *abi.McpToolsResult) error {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "SERVER\tTOOL\tDESCRIPTION")
				for _, t := range r.Tools {
					d := ""
					if t.Description != nil {
						d, _, _ = strings.Cut(*t.Description, "\n")
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", cell(t.Server), cell(t.Name), cell(d))
				}
				return tw.Flush()
			})
		},
	})
	tools.Flags().StringVar(&server, "server", "", "only this server's tools")
	tools.Flags().IntVar(&limit, "limit", 0, "at most N tools (default 20, at most 200)")

	var readTimeout int64
	read := withUID(&cobra.Command{
		Use:   "read SERVER URI [NAME=VALUE...] [--timeout-ms N] [--json]",
		Short: "Read a resource of an MCP server by its URI (sys.mcp.resource.read)",
		Long: "Read a resource (resources/read) and print its text contents, or, for contents that are not\n" +
			"all text, its contents as JSON (--json: the whole result). Contents over 1 MiB are kept as a\n" +
			"file: its preview is printed, and its path on stderr. Its URIs are in\n" +
			"/mcp/$USER/SERVER/resources/ (what discovery found; reading them asks the server nothing).\n" +
			"With NAME=VALUE arguments, URI is a resource template (RFC 6570) expanded with them.\n" +
			"  gsv mcp read everything demo://resource/static/document/architecture.md\n" +
			"  gsv mcp read t 'test://big/{bytes}' bytes=10",
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.McpResourceReadArgs{Uid: uidArg(cmd), ServerID: args[0], URI: args[1]}
			for _, kv := range args[2:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("template argument %q: want NAME=VALUE", kv)
				}
				if a.Arguments == nil {
					a.Arguments = map[string]string{}
				}
				a.Arguments[k] = v
			}
			if cmd.Flags().Changed("timeout-ms") {
				a.TimeoutMs = &readTimeout
			}
			return show(c, abi.SysMcpResourceRead, a, func(r *abi.McpResourceReadResult) error {
				if r.Blob != nil {
					return c.showBlob(cmd.ErrOrStderr(), r.Blob)
				}
				var contents []struct {
					Text *string `json:"text"`
				}
				var texts []string
				if json.Unmarshal(r.Contents, &contents) == nil {
					for _, x := range contents {
						if x.Text != nil {
							texts = append(texts, strings.TrimSuffix(*x.Text, "\n"))
						}
					}
				}
				if len(texts) == 0 || len(texts) != len(contents) {
					return c.showJSON(r.Contents)
				}
				_, err := fmt.Fprintln(c.out, strings.Join(texts, "\n"))
				return err
			})
		},
	})
	read.Flags().Int64Var(&readTimeout, "timeout-ms", 0, "cancel the read after N milliseconds (default 60000, at most 600000)")

	var promptTimeout int64
	prompt := withUID(&cobra.Command{
		Use:   "prompt SERVER NAME [KEY=VALUE...] [--timeout-ms N] [--json]",
		Short: "Get a prompt of an MCP server with its arguments (sys.mcp.prompt.get)",
		Long: "Get a prompt (prompts/get) with its arguments, KEY=VALUE words, and print its messages, one\n" +
			"\"ROLE: TEXT\" line each (a message that is not text as its JSON; --json: the whole result).\n" +
			"Its arguments are in /mcp/$USER/SERVER/prompts/NAME.\n" +
			"  gsv mcp prompt everything args-prompt city=Paris",
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.McpPromptGetArgs{Uid: uidArg(cmd), ServerID: args[0], Name: args[1]}
			for _, kv := range args[2:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("argument %q: want KEY=VALUE", kv)
				}
				if a.Arguments == nil {
					a.Arguments = map[string]string{}
				}
				a.Arguments[k] = v
			}
			if cmd.Flags().Changed("timeout-ms") {
				a.TimeoutMs = &promptTimeout
			}
			return show(c, abi.SysMcpPromptGet, a, func(r *abi.McpPromptGetResult) error {
				if r.Blob != nil {
					return c.showBlob(cmd.ErrOrStderr(), r.Blob)
				}
				var msgs []struct {
					Role    string          `json:"role"`
					Content json.RawMessage `json:"content"`
				}
				if err := json.Unmarshal(r.Messages, &msgs); err != nil {
					return c.showJSON(r.Messages)
				}
				for _, m := range msgs {
					var t struct{ Type, Text string }
					line := string(m.Content)
					if json.Unmarshal(m.Content, &t) == nil && t.Type == "text" {
						line = t.Text
					}
					if _, err := fmt.Fprintf(c.out, "%s: %s\n", m.Role, line); err != nil {
						return err
					}
				}
				return nil
			})
		},
	})
	prompt.Flags().Int64Var(&promptTimeout, "timeout-ms", 0, "cancel the request after N milliseconds (default 60000, at most 600000)")

	subscription := func(verb string, d abi.Call[abi.McpSubscribeArgs, *abi.McpSubscribeResult], short string) *cobra.Command {
		return withUID(&cobra.Command{
			Use:   verb + " SERVER URI",
			Short: short,
			Args:  cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				return show(c, d, &abi.McpSubscribeArgs{Uid: uidArg(cmd), ServerID: args[0], URI: args[1]}, func(r *abi.McpSubscribeResult) error {
					fmt.Fprintf(c.out, "%s %s: subscribed=%v\n", cell(args[0]), cell(args[1]), r.Subscribed)
					return nil
				})
			},
		})
	}
	subscribe := subscription("subscribe", abi.SysMcpResourceSubscribe,
		"Subscribe to a resource of an MCP server: each update is a signal, mcp.resource.updated (sys.mcp.resource.subscribe)")
	unsubscribe := subscription("unsubscribe", abi.SysMcpResourceUnsubscribe,
		"End a subscription to a resource of an MCP server (sys.mcp.resource.unsubscribe)")
	mcp.AddCommand(add, list, remove, refresh, call, tools, read, prompt, subscribe, unsubscribe)
	return mcp
}

// where is a server's URL or command, for its WHERE column.
func where(s *abi.McpServerSummary) string {
	if len(s.Command) > 0 && s.Device != "" {
		return s.Device + ": " + strings.Join(s.Command, " ")
	}
	if len(s.Command) > 0 {
		return strings.Join(s.Command, " ")
	}
	return s.URL
}

// showServer prints a server's summary after an add or a refresh: its
// name, state and tool count, then its tools; a server that did not come
// up is an error, with its cause.
func (c *cli) showServer(errw io.Writer, s *abi.McpServerSummary, name string) error {
	if s == nil {
		return fmt.Errorf("%s: removed meanwhile", name)
	}
	fmt.Fprintf(c.out, "%s %s: %d tools, %d resources, %d prompts\n", cell(s.Name), s.State, len(s.Tools), s.ResourceCount, s.PromptCount)
	for _, t := range s.Tools {
		fmt.Fprintf(c.out, "  %s\n", cell(t.Name))
	}
	if s.State == abi.McpFailed {
		msg := "it did not come up"
		if s.Error != nil {
			msg = *s.Error
		}
		return fmt.Errorf("MCP server %s: %s (gsv mcp refresh %s, or gsv mcp remove %s)", cell(s.Name), cell(msg), cell(s.Name), cell(s.Name))
	}
	if s.Error != nil {
		fmt.Fprintf(errw, "%s: %s\n", cell(s.Name), cell(*s.Error))
	}
	return nil
}

// showResult prints a call's result: its text content, else its
// structured content, else its content blocks, as JSON; a kept result's
// preview, with its path on stderr.
func (c *cli) showResult(errw io.Writer, r *abi.McpCallResult) error {
	if r.Blob != nil {
		return c.showBlob(errw, r.Blob)
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(r.Content, &blocks); err == nil {
		var texts []string
		for _, b := range blocks {
			if b.Type == "text" {
				texts = append(texts, b.Text)
			}
		}
		if len(texts) > 0 && len(texts) == len(blocks) {
			_, err := fmt.Fprintln(c.out, strings.Join(texts, "\n"))
			return err
		}
	}
	out := r.StructuredContent
	if len(out) == 0 {
		out = r.Content
	}
	return c.showJSON(out)
}

// showBlob prints a kept answer's preview, and its path on stderr.
func (c *cli) showBlob(errw io.Writer, b *abi.McpResultBlob) error {
	fmt.Fprintln(c.out, b.Preview)
	fmt.Fprintf(errw, "the whole result (%d bytes) is %s\n", b.SizeBytes, b.Path)
	return nil
}

// showJSON prints out as indented JSON (as it is, if it is not JSON).
func (c *cli) showJSON(out json.RawMessage) error {
	var pretty bytes.Buffer
	if json.Indent(&pretty, out, "", "  ") != nil {
		pretty.Write(out)
	}
	_, err := fmt.Fprintln(c.out, pretty.String())
	return err
}
