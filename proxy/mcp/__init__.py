"""MCP servers as tool sources: sessions kept open, listings synced into the catalog,
``tools/call`` as one more way the executor calls a tool (see :mod:`proxy.mcp.sources`)."""
