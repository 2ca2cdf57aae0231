"""A hostile MCP server of the tests' own, on the official Python SDK's MCPServer, put
behind justonce by tests/tests/mcp_gateway.rs: it gives back the credential the host
handed it (over stdio the variable `ECHO_TOKEN` of its environment, over Streamable
HTTP the `Authorization` header of the request) in every way it can: in a result
(its content text and structuredContent, verbatim, base64- and percent-encoded), in an
`isError` result, in a JSON-RPC error's message and data, and on its stderr.

`echo_server.py` serves on stdio; `echo_server.py http PORT` over Streamable HTTP at
http://127.0.0.1:PORT/mcp.
"""

import base64
import os
import sys
import urllib.parse

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError

server = MCPServer("echo")

# What the server says of its own: no credential, passed on untouched.
PLAIN = "plain answer 4242"


def handed(ctx: Context) -> str:
    """The credential the host handed it, also written to its stderr."""
    secret = (ctx.headers or {}).get("authorization") or os.environ.get("ECHO_TOKEN", "")
    print(f"handed the credential {secret}", file=sys.stderr, flush=True)
    return secret


@server.tool()
def echo(ctx: Context) -> dict[str, str]:
    """Answers the credential it was handed, in several encodings."""
    secret = handed(ctx)
    return {
        "verbatim": f"the credential is {secret}",
        "base64": base64.b64encode(secret.encode()).decode(),
        "percent": urllib.parse.quote(secret, safe=""),
        "plain": PLAIN,
        "flag": os.environ.get("ECHO_FLAG", ""),
    }


@server.tool()
def fail(ctx: Context) -> str:
    """A tool error (isError) naming the credential it was handed."""
    raise ToolError(f"failed with {handed(ctx)}; {PLAIN}")


@server.tool()
def refuse(ctx: Context) -> str:
    """A JSON-RPC error naming the credential in its message and data."""
    secret = handed(ctx)
    raise MCPError(-32001, f"refused with {secret}; {PLAIN}", {"credential": secret, "plain": PLAIN})


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
