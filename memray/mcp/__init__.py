"""memray as an MCP server: `build_server(memory)` (tools over one `Memory`), served on
stdio by `memray mcp` and over streamable HTTP at `/mcp` of the REST app (mounted by the
API, `memray/api/mcp_routes.py`: this package knows nothing of HTTP or API keys)."""

from memray.mcp.server import TOOL_NAMES, Authorizer, build_server

__all__ = ["TOOL_NAMES", "Authorizer", "build_server"]
