"""The portal where agents already work: an MCP server (`agents/mcp.py`, mounted at /mcp/
beside Django by `agents/asgi.py`) whose tools read with the token's user's permissions,
exactly as the REST API does."""
