"""The agent service: the HTTP API (strataflow api) and the MCP server (strataflow mcp) over the library."""
