"""MCP servers as tools: the ACP client's `mcpServers` of a session become first-class tools.

`config` reads the ACP entries (no MCP import), `manager` runs a session's servers in the
background, `client` keeps one connection per server through the official `mcp` SDK (imported
only when a session has servers, off the event loop), `tool` adapts each MCP tool to
`agent.tools.base.Tool`.
"""
