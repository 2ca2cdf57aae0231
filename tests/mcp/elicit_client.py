"""A client that answers a tool's questions, with the official MCP Python SDK (PyPI
`mcp`), over stdio and the `initialize` handshake (the session era, where the server
asks with `elicitation/create` while the call runs).

Usage: elicit_client.py PORT TOOL ANSWER FIRST OTHER LATE

The SDK's stdio client starts a bridge process whose stdin and stdout are a TCP
connection to 127.0.0.1:PORT, where the Rust test serves the stdio protocol
(`Server::serve` on the stream) from a host with an in-process `payments` provider.

ANSWER is the content the person accepts with (JSON); FIRST, OTHER and LATE are the
tool's arguments (JSON) for three calls. A client that can be asked calls FIRST
twice (the agent's retry) and OTHER once; then a client that declares no
elicitation calls LATE; then one that can be asked calls LATE again, each client on
a connection of its own. Prints one JSON object: each client's questions
(the `elicitation/create` params it got) and what each call told the agent; the Rust
test (tests/tests/mcp_elicit_python.rs) asserts on it and on the refunds made.
"""

import asyncio
import json
import sys

from mcp import Client, StdioServerParameters, types

CONVERSATION = {"dev.justonce/conversation": "conv-elicit"}

# The server's stdio: stdin to the socket, the socket to stdout, until either ends.
BRIDGE = r"""
import socket, sys, threading
conn = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
def up():
    for line in sys.stdin.buffer:
        conn.sendall(line)
    conn.shutdown(socket.SHUT_WR)
threading.Thread(target=up, daemon=True).start()
while data := conn.recv(1 << 16):
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
"""


def seen(result):
    """What the agent is told by one tools/call, as plain JSON."""
    return {
        "is_error": result.is_error,
        "text": [block.text for block in result.content if block.type == "text"],
        "structured": result.structured_content,
        "meta": result.meta or {},
    }


async def calls(server, answer, arguments, asks):
    """Connects a client (one that can be asked if `asks`), makes the calls, and
    returns the questions it got and what each call told it."""
    questions = []

    async def elicit(context, params):
        questions.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        return types.ElicitResult(action="accept", content=answer)

    options = {"elicitation_callback": elicit} if asks else {}
    async with Client(server, mode="legacy", **options) as client:
        told = [
            seen(await client.call_tool(tool, args, meta=CONVERSATION))
            for tool, args in arguments
        ]
    return {"questions": questions, "calls": told}


async def main(port, tool, answer, first, other, late):
    server = StdioServerParameters(command=sys.executable, args=["-c", BRIDGE, port])
    answer, first, other, late = (json.loads(a) for a in (answer, first, other, late))
    report = {
        "asked": await calls(server, answer, [(tool, first), (tool, first), (tool, other)], True),
        "cannot_ask": await calls(server, answer, [(tool, late)], False),
        "asked_later": await calls(server, answer, [(tool, late)], True),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    asyncio.run(main(*sys.argv[1:]))
