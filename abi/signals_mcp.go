package abi

// The MCP room's signals, each to the server's owner.
var (
	SigMcpResourceUpdated = Signal[McpResourceUpdated]{Name: "mcp.resource.updated",
		Doc: "A resource of one of your MCP servers that you subscribed to changed (notifications/resources/updated)."}
)
