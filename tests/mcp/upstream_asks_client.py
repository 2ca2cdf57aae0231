"""A client of server-everything's tools that ask their client (elicitation, sampling,
roots), with the official MCP Python SDK (PyPI `mcp`) over stdio in the session era,
to run side by side against the server itself and against justonce in front of it
(tests/tests/gateway_questions.rs).

Usage: upstream_asks_client.py SCENARIO PREFIX COMMAND [ARG...]

COMMAND starts the server on stdio; PREFIX is what its tools' names start with there
("" direct, "ev_" through the gateway). SCENARIO:
- `all`: a client that declares elicitation, sampling and roots calls the three tools;
- `none`: one that declares none calls them;
- `retry`: one that declares elicitation calls trigger-elicitation-request twice (the
  agent's retry);
- `stateless`: as `retry`, in the stateless revision 2026-07-28 (the question comes
  in an `input_required` result, the SDK calls again with the answer);
- `stateless-all`: as `all`, in the stateless revision (each of the upstream's
  requests comes in an `input_required` result);
- `stateless-none`: as `none`, in the stateless revision.
Prints one JSON object: the tools listed, what each call told the agent, and how often
each of the client's callbacks was called.
"""

import asyncio
import json
import sys

from mcp import Client, StdioServerParameters, types

CONVERSATION = {"dev.justonce/conversation": "conv-questions"}
# Its keys in the order the journal keeps them (sorted): the upstream prints them
# as it gets them, and an answer through the gateway is the one on record.
ANSWER = {"check": True, "integer": 7, "name": "Ada Lovelace"}


def seen(result):
    """What the agent is told by one tools/call, as plain JSON."""
    return {
        "is_error": result.is_error,
        "text": [block.text for block in result.content if block.type == "text"],
        "meta": result.meta or {},
    }


async def main(scenario, prefix, command, args):
    server = StdioServerParameters(command=command, args=args)
    called = {"elicitation": [], "sampling": [], "roots": 0}

    async def elicit(context, params):
        called["elicitation"].append(params.message)
        return types.ElicitResult(action="accept", content=ANSWER)

    async def sample(context, params):
        called["sampling"].append(params.messages[0].content.text)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="sampled: 42"),
            model="test-model",
            stop_reason="endTurn",
        )

    async def roots(context):
        called["roots"] += 1
        return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/project", name="project")])

    options = {}
    if scenario in ("all", "retry", "stateless", "stateless-all"):
        options["elicitation_callback"] = elicit
    if scenario in ("all", "stateless-all"):
        options["sampling_callback"] = sample
        options["list_roots_callback"] = roots
    calls = {
        "elicit": ("trigger-elicitation-request", {}),
        "sample": ("trigger-sampling-request", {"prompt": "the answer?", "maxTokens": 5}),
        "roots": ("get-roots-list", {}),
    }
    told = {}
    mode = "2026-07-28" if scenario.startswith("stateless") else "legacy"
    async with Client(server, mode=mode, **options) as client:
        # The gateway answers `initialize` before its upstream is ready: its tools
        # come once it is (polled, with a deadline).
        for _ in range(600):
            listed = [tool.name for tool in (await client.list_tools()).tools]
            if prefix + "echo" in listed:
                break
            await asyncio.sleep(0.1)
        if scenario in ("retry", "stateless"):
            told["first"] = seen(await client.call_tool(prefix + calls["elicit"][0], {}, meta=CONVERSATION))
            told["retry"] = seen(await client.call_tool(prefix + calls["elicit"][0], {}, meta=CONVERSATION))
        else:
            for name, (tool, arguments) in calls.items():
                told[name] = seen(await client.call_tool(prefix + tool, arguments, meta=CONVERSATION))
    print(json.dumps({"listed": listed, "told": told, "called": called}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))
