package abi

import "os"

// The mcp room's syscalls (sys.mcp.*): each user's MCP servers and calls
// of their tools. Every one acts on the caller's own servers; root may
// name another uid.
var (
	SysMcpAdd = Call[McpAddArgs, *McpServerResult]{Name: "sys.mcp.add", Grant: Users,
		Doc: "Adds an MCP server for the caller (a URL, or a stdio command run in the caller's sandbox), connects it and discovers its tools."}
	SysMcpList = Call[McpListArgs, *McpListResult]{Name: "sys.mcp.list", Grant: Users,
		Doc: "The caller's MCP servers with their state and the tools, resources and prompts last discovered (never asks a server)."}
	SysMcpRemove = Call[McpServerArgs, *McpRemoveResult]{Name: "sys.mcp.remove", Grant: Users,
		Doc: "Removes one of the caller's MCP servers and stops it; removed:false if the caller has no such server."}
	SysMcpRefresh = Call[McpServerArgs, *McpServerResult]{Name: "sys.mcp.refresh", Grant: Users,
		Doc: "Reconnects one of the caller's MCP servers and discovers its tools again; server:null if the caller has no such server."}
	SysMcpCall = Call[McpCallArgs, *McpCallResult]{Name: "sys.mcp.call", Grant: Users,
		Doc: "Calls a tool of one of the caller's MCP servers with JSON arguments (timeout 60 s by default)."}
	SysMcpTools = Call[McpToolsArgs, *McpToolsResult]{Name: "sys.mcp.tools", Grant: Users,
		Doc: "Searches the tools of the caller's MCP servers by name and description (never asks a server)."}
	SysMcpResourceRead = Call[McpResourceReadArgs, *McpResourceReadResult]{Name: "sys.mcp.resource.read", Grant: Users,
		Doc: "Reads a resource of one of the caller's MCP servers by its URI (resources/read; timeout 60 s by default)."}
	SysMcpResourceSubscribe = Call[McpSubscribeArgs, *McpSubscribeResult]{Name: "sys.mcp.resource.subscribe", Grant: Users,
		Doc: "Subscribes to a resource of one of the caller's MCP servers (resources/subscribe): each update is a signal, mcp.resource.updated."}
	SysMcpResourceUnsubscribe = Call[McpSubscribeArgs, *McpSubscribeResult]{Name: "sys.mcp.resource.unsubscribe", Grant: Users,
		Doc: "Ends a subscription to a resource of one of the caller's MCP servers (resources/unsubscribe)."}
	SysMcpPromptGet = Call[McpPromptGetArgs, *McpPromptGetResult]{Name: "sys.mcp.prompt.get", Grant: Users,
		Doc: "Gets a prompt of one of the caller's MCP servers with its arguments (prompts/get; timeout 60 s by default)."}
	SysMcpGet = Call[McpGetArgs, *McpServerDetail]{Name: "sys.mcp.get", Grant: Users, Flags: Internal,
		Doc: "One MCP server of a user, with its resources and prompts, for its owner or root (/mcp)."}
	SysMcpResultList = Call[McpResultArgs, []string]{Name: "sys.mcp.result.list", Grant: Users, Flags: Internal,
		Doc: "The digests of the large results kept for a user's MCP server, for its owner or root (/mcp/.../results)."}
	SysMcpResultOpen = Call[McpResultArgs, *os.File]{Name: "sys.mcp.result.open", Grant: Users, Flags: Internal,
		Doc: "Opens a large result kept for a user's MCP server, for its owner or root (/mcp/.../results)."}
)

// The OAuth syscalls (sys.oauth.*), which the mcp room keeps: sign-ins
// of a user's and the accounts they leave. No call answers a token.
var (
	SysOauthStart = Call[OAuthStartArgs, *OAuthStartResult]{Name: "sys.oauth.start", Grant: Users,
		Doc: "Starts an OAuth authorization-code + PKCE sign-in for the caller and answers the URL to open (its redirect URI is the daemon's /oauth/callback)."}
	SysOauthList = Call[OAuthListArgs, *OAuthListResult]{Name: "sys.oauth.list", Grant: Users,
		Doc: "The caller's OAuth accounts (never their tokens), and with includePending the sign-ins not finished yet."}
	SysOauthForget = Call[OAuthForgetArgs, *OAuthForgetResult]{Name: "sys.oauth.forget", Grant: Users,
		Doc: "Deletes one of the caller's OAuth accounts and its tokens; forgotten:false if the caller has no such account."}
	SysOauthCallback = Call[OAuthCallbackArgs, *OAuthCallbackResult]{Name: "sys.oauth.callback", Flags: Internal | KernelOnly,
		Doc: "Finishes the sign-in whose state the authorization server redirected to /oauth/callback: exchanges the code and keeps the account."}
)
