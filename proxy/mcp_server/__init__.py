"""toolgraph as an MCP server at ``/mcp``: the catalog behind ``search_tools`` and
``call_tool`` (:mod:`proxy.mcp_server.endpoint`)."""
