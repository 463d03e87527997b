"""Where tools come from beside Python functions: MCP servers, retrieval, model providers."""
