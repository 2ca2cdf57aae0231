"""A hostile MCP server of the tests' own, on the official Python SDK's MCPServer, put
behind justonce by tests/tests/mcp_gateway_late.rs, over stdio or Streamable HTTP:
it answers late and floods progress.

Its tools answer only once a gate file exists (the test creates it when it wants the
answer to come, after the host gave the request up past `timeout_ms`), so "late" is
decided by the test, not by a clock. Each tool's run is logged to `LEDGER.calls` as
it starts (`{"tool", "key", "line"}`, the key from `_meta`); the side effect is a
line appended to the ledger (argv[1]) when the gate opens.

- `pay(line)`: not safe to resend (no annotations): unkeyed behind the host.
- `put(line)`: `idempotentHint`: keyed behind the host.
- `flood(n)`: `n` progress reports as fast as it can, then its answer; it writes
  `LEDGER.flooded` when it has sent them all.
"""

import json
import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

LEDGER = sys.argv[1]
GATE = LEDGER + ".gate"

server = MCPServer("late")


def logged(tool: str, line: str, ctx: Context) -> None:
    meta = ctx.request_context.meta
    if meta is not None and not isinstance(meta, dict):
        meta = meta.model_dump(by_alias=True)
    key = (meta or {}).get("dev.justonce/idempotency-key")
    with open(LEDGER + ".calls", "a") as f:
        f.write(json.dumps({"tool": tool, "key": key, "line": line}) + "\n")


async def gated(line: str) -> str:
    while not os.path.exists(GATE):
        await anyio.sleep(0.01)
    with open(LEDGER, "a") as f:
        f.write(line + "\n")
    return f"done {line!r}"


@server.tool()
async def pay(line: str, ctx: Context) -> str:
    """Appends a line to the ledger once the gate opens (unkeyed)."""
    logged("pay", line, ctx)
    return await gated(line)


@server.tool(annotations=ToolAnnotations(idempotentHint=True))
async def put(line: str, ctx: Context) -> str:
    """Appends a line to the ledger once the gate opens (idempotent)."""
    logged("put", line, ctx)
    return await gated(line)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def flood(n: int, ctx: Context) -> str:
    """Reports progress `n` times as fast as it can, then answers."""
    for step in range(1, n + 1):
        await ctx.report_progress(step, n)
    open(LEDGER + ".flooded", "w").close()
    return f"flooded {n}"


if __name__ == "__main__":
    # `late_server.py LEDGER` on stdio; `late_server.py LEDGER http PORT` over
    # Streamable HTTP at http://127.0.0.1:PORT/mcp (each answer an SSE stream).
    if sys.argv[2:3] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[3]))
    else:
        server.run("stdio")
