"""The MCP client: tools, resources and prompts imported from MCP servers."""
