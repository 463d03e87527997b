"""The MCP server side: a Toolset served over stdio and streamable HTTP."""
