"""An MCP server of the tests' own, on the official Python SDK's MCPServer (what was
FastMCP before mcp 2), put behind justonce by tests/tests/mcp_gateway.rs.

Its side effect is a line appended to the ledger file (argv[1]). It can lose its first
answer: with `lose_first=True`, `append` writes the line, then the process exits
before it answers (the effect landed, the response is lost); with `lose_before=True` it
exits before it writes (the request is lost, nothing happened). `recorded(key)` says
what `append` answered the call made under a key, for a probe to ask. It deduplicates by the
key justonce hands it in `_meta["dev.justonce/idempotency-key"]` when `by_key=True`:
a key it has seen gets the first answer again and appends nothing.
"""

import json
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

LEDGER = sys.argv[1]
KEYS = LEDGER + ".keys.json"
LOST = LEDGER + ".lost"

server = MCPServer("ledger")


def seen_keys():
    try:
        with open(KEYS) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


@server.tool(annotations=ToolAnnotations(idempotentHint=False, readOnlyHint=False))
def append(
    line: str,
    ctx: Context,
    lose_first: bool = False,
    by_key: bool = False,
    lose_before: bool = False,
) -> str:
    """Appends a line to the ledger."""
    meta = ctx.request_context.meta
    if meta is not None and not isinstance(meta, dict):
        meta = meta.model_dump(by_alias=True)
    key = (meta or {}).get("dev.justonce/idempotency-key")
    header = (ctx.headers or {}).get("idempotency-key")
    with open(LEDGER + ".calls", "a") as f:
        f.write(json.dumps({"line": line, "key": key, "header": header}) + "\n")
    if lose_before and not os.path.exists(LOST):
        open(LOST, "w").close()
        # Nothing is written; the request is lost with the process.
        os._exit(3)
    keys = seen_keys()
    if by_key and key in keys:
        return keys[key]
    with open(LEDGER, "a") as f:
        f.write(line + "\n")
    answer = f"appended {line!r}"
    keys[key] = answer
    with open(KEYS, "w") as f:
        json.dump(keys, f)
    if lose_first and not os.path.exists(LOST):
        open(LOST, "w").close()
        # The line is written; the answer never leaves.
        os._exit(3)
    return answer


@server.tool()
def refuse(reason: str) -> str:
    """Fails with a tool error (isError) naming the reason, once per call it gets."""
    with open(LEDGER + ".calls", "a") as f:
        f.write(json.dumps({"refused": reason}) + "\n")
    raise ToolError(f"refused: {reason}")


@server.tool()
async def count(to: int, ctx: Context) -> int:
    """Counts to `to`, reporting progress at each step."""
    for step in range(1, to + 1):
        await ctx.report_progress(step, to, f"step {step}")
    return to


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Adds a tool called `name` (it answers its own name) and tells the client
    that the tools changed."""

    def added() -> str:
        return name

    server.add_tool(added, name=name, description=f"added by grow({name!r})")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def recorded(key: str) -> str | None:
    """The answer `append` gave the call made under `key`, if it appended its line
    (what a probe asks)."""
    return seen_keys().get(key)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def lines() -> list[str]:
    """The ledger's lines."""
    try:
        with open(LEDGER) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def without_stream(app):
    """`app`, answering 405 to every GET: a server that offers no stream for its own
    messages (the transport allows it), heard only in its answers."""

    async def answer(scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "GET":
            await send({"type": "http.response.start", "status": 405, "headers": [(b"allow", b"POST, DELETE")]})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    return answer


if __name__ == "__main__":
    # `ledger_server.py LEDGER` on stdio; `ledger_server.py LEDGER http PORT` over
    # Streamable HTTP at http://127.0.0.1:PORT/mcp; `ledger_server.py LEDGER
    # http-without-stream PORT` the same, without a GET stream.
    if sys.argv[2:3] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[3]))
    elif sys.argv[2:3] == ["http-without-stream"]:
        import uvicorn

        app = without_stream(server.streamable_http_app())
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[3]), log_level="warning")
    else:
        server.run("stdio")
