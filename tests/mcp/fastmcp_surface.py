"""A FastMCP server (`mcp.server.fastmcp` of the MCP Python SDK 1.x, in the
frameworks venv: $JUSTONCE_FRAMEWORKS_PYTHON) behind justonce in tests/tests/gateway_surface.rs:
one prompt, and one tool that logs to its client while it runs.

Usage: fastmcp_surface.py [stdio | http PORT]
"""

import sys

from mcp.server.fastmcp import Context, FastMCP

mcp = FastMCP("surface")


@mcp.prompt()
def review(code: str, language: str = "python") -> str:
    """Asks for a review of a piece of code."""
    return f"Please review this {language} code:\n\n{code}"


@mcp.tool()
async def shout(text: str, ctx: Context) -> str:
    """Says `text` louder, logging as it goes."""
    await ctx.debug(f"about to shout {text}")
    await ctx.info(f"shouting {text}")
    await ctx.warning("this is loud")
    return text.upper() + "!"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        mcp.settings.port = int(sys.argv[2])
        mcp.run(transport="streamable-http")
    else:
        mcp.run()
