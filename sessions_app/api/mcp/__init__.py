"""ctxweb's MCP server (docs/SEARCH.md, "The agent asks"): the tools an agent calls mid-session, at
``/mcp/`` over streamable HTTP, authenticated with a ctxweb API key."""
