"""A person who answers the host's question about a lost answer, with the official MCP
Python SDK (PyPI `mcp`), over stdio and the `initialize` handshake (the session era:
the server asks with `elicitation/create` while the call runs).

Usage: ask_person_client.py SERVER STEPS

SERVER is the command that serves MCP over stdio (a JSON list: `justonce --db DB
serve …`). STEPS is a JSON list of calls, each made by a client of its own (a new
connection, a new server process on the same journal): `{"tool": …, "arguments":
{…}, "answer": A}`, where A is the `ElicitResult` the person answers with
(`{"action": "accept", "content": {"performed": true}}`, `{"action": "decline"}`, …),
or null for a client that declares no elicitation. Prints one JSON list: for each
step, the questions it was asked (the `elicitation/create` params) and what the call
told the agent. The Rust test (tests/tests/mcp_ask_person.rs) asserts on it.
"""

import asyncio
import json
import sys

from mcp import Client, StdioServerParameters, types

from elicit_client import seen  # what the agent is told, as plain JSON

CONVERSATION = {"dev.justonce/conversation": "conv-ask-person"}


async def step(server, tool, arguments, answer):
    questions = []

    async def elicit(context, params):
        questions.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        return types.ElicitResult(**answer)

    options = {"elicitation_callback": elicit} if answer is not None else {}
    async with Client(server, mode="legacy", **options) as client:
        # `initialize` waits for no upstream: its tools come once it is ready.
        for _ in range(200):
            listed = await client.list_tools()
            if any(t.name == tool for t in listed.tools):
                break
            await asyncio.sleep(0.05)
        told = seen(await client.call_tool(tool, arguments, meta=CONVERSATION))
    return {"questions": questions, "call": told}


async def main(command, steps):
    command = json.loads(command)
    server = StdioServerParameters(command=command[0], args=command[1:])
    report = []
    for s in json.loads(steps):
        report.append(await step(server, s["tool"], s["arguments"], s["answer"]))
    print(json.dumps(report))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    asyncio.run(main(*sys.argv[1:]))
