"""Drives `justonce serve` with the official MCP Python SDK (PyPI `mcp`).

Usage: client.py MODE JUSTONCE DB CONVERSATION

MODE is the SDK's connect mode: `auto` (probe `server/discover`, the stateless
2026-07-28 protocol) or `legacy` (the `initialize` handshake). The script lists the
tools, calls `send_receipt` twice with the same arguments and once with different
ones, and prints one JSON object describing what the client saw; the Rust test
(tests/tests/mcp_python.rs) asserts on it and on the mailbox in DB.
"""

import asyncio
import json
import sys

from mcp import Client, StdioServerParameters


def seen(result):
    """What the agent is told by one tools/call, as plain JSON."""
    return {
        "is_error": result.is_error,
        "text": [block.text for block in result.content if block.type == "text"],
        "structured": result.structured_content,
        "meta": result.meta or {},
    }


async def main(mode, justonce, db, conversation):
    server = StdioServerParameters(command=justonce, args=["--db", db, "serve"])
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
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    asyncio.run(main(*sys.argv[1:]))
