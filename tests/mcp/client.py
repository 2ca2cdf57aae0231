"""Drives `justonce serve` with the official MCP Python SDK (PyPI `mcp`).

Usage: client.py MODE stdio JUSTONCE DB CONVERSATION
       client.py MODE http URL TOKEN CONVERSATION

MODE is the SDK's connect mode: `auto` (probe `server/discover`, the stateless
2026-07-28 protocol) or `legacy` (the `initialize` handshake). Over stdio the script
starts `JUSTONCE --db DB serve` itself; over HTTP it connects to a running
`justonce serve --http` at URL with the SDK's Streamable HTTP client and the bearer
TOKEN. It lists the tools, calls `send_receipt` twice with the same arguments and
once with different ones, and prints one JSON object describing what the client
saw; the Rust test (tests/tests/mcp_python.rs) asserts on it and on the mailbox.
"""

import asyncio
import contextlib
import json
import sys

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


def seen(result):
    """What the agent is told by one tools/call, as plain JSON."""
    return {
        "is_error": result.is_error,
        # Text items, and the text of embedded text resources (a replay's note).
        "text": [
            block.text if block.type == "text" else block.resource.text
            for block in result.content
            if block.type == "text"
            or (block.type == "resource" and hasattr(block.resource, "text"))
        ],
        "structured": result.structured_content,
        "meta": result.meta or {},
    }


def connection(transport, target, secret, stack):
    """What `Client` connects to: a process it starts, or an HTTP endpoint."""
    if transport == "stdio":
        return StdioServerParameters(command=target, args=["--db", secret, "serve"])
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {secret}"},
        timeout=httpx2.Timeout(30.0, read=300.0),
    )
    stack.push_async_callback(http.aclose)
    return streamable_http_client(target, http_client=http)


async def main(mode, transport, target, secret, conversation):
    async with contextlib.AsyncExitStack() as stack:
        await run(mode, connection(transport, target, secret, stack), conversation)


async def run(mode, server, conversation):
    meta = {"dev.justonce/conversation": conversation}
    first = {"orders": [{"order_id": 4417, "email": "ada@example.com", "amount_cents": 1299}]}
    other = {"orders": [{"order_id": 4418, "email": "ada@example.com", "amount_cents": 500}]}
    async with Client(server, mode=mode) as client:
        tools = await client.list_tools()
        calls = [
            await client.call_tool("send_receipt", first, meta=meta),
            await client.call_tool("send_receipt", first, meta=meta),
            await client.call_tool("send_receipt", other, meta=meta),
        ]
        report = {
            "protocol_version": client.protocol_version,
            "server_name": client.server_info.name if client.server_info else None,
            "tools": [
                {
                    "name": tool.name,
                    "idempotent_hint": tool.annotations.idempotent_hint if tool.annotations else None,
                }
                for tool in tools.tools
            ],
            "calls": [seen(call) for call in calls],
        }
    print(json.dumps(report))


if __name__ == "__main__":
    if len(sys.argv) != 6 or sys.argv[2] not in ("stdio", "http"):
        sys.exit(__doc__)
    asyncio.run(main(*sys.argv[1:]))
