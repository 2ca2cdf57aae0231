"""The recipes for agent frameworks of docs/agent-builders.md ("From an agent framework"), run as tests.

Usage: recipes.py FRAMEWORK TRANSPORT JUSTONCE WORKDIR

FRAMEWORK is `pydantic-ai`, `openai-agents` or `langchain` (langchain-mcp-adapters;
LlamaIndex is recipes_llama_index.py, the scenarios are in harness.py),
TRANSPORT `stdio` (the framework starts `JUSTONCE serve` itself) or `http` (`JUSTONCE
serve --http`, a bearer token from `JUSTONCE token add`), WORKDIR an empty directory
for the databases. No LLM and no network: each framework runs an agent on its own
scripted model (pydantic-ai's `FunctionModel`, an Agents SDK `Model`, langchain-core's
`GenericFakeChatModel` in the agent loop LangGraph's `ToolNode` runs), which answers
with fixed tool calls and keeps what it was told. The `refund` tool posts to a
payments API here on 127.0.0.1 that deduplicates by `Idempotency-Key`, as Stripe does.

Every server refuses calls that name no conversation (`--unscoped refuse`), so each
recipe's line of glue is what lets its calls through. The scenarios:

- lost: `serve --fault lose-response:refund`, the refund lands and its response is
  lost; the model retries the same call (a new tool-call id), as it is told it may.
- opposite: two different refunds, one after the other.
- parallel: two identical refund calls in one model response.
- replan: a refund, then the same refund again under a new tool-call id.
- unglued: the framework without the glue, refused before anything runs.
- unknown (pydantic-ai, with $JUSTONCE_MCP_PYTHON): an unannotated upstream write tool
  whose answer is lost, which only a person can end; the model must read "stop".

It prints one JSON object: per scenario, what the model received after each of its
turns and what the payments API saw. The Rust test (tests/tests/mcp_frameworks.rs)
asserts on it.
"""

import asyncio
import contextlib
import json
import os
from pathlib import Path

from harness import LOST, PLAIN, SCENARIOS, Script, refund, refusal_raised, run

# ---------------------------------------------------------------------------------
# pydantic-ai: the conversation from the run's deps, on every call, through the helper
# of clients/python (justonce_client.pydantic_ai).

from dataclasses import dataclass

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset

from justonce_client import pydantic_ai as justonce_pydantic_ai


@dataclass
class Deps:
    conversation_id: str  # your run's or ticket's id: the same if the run is executed again


def pydantic_ai_stdio(command, args):
    return justonce_pydantic_ai.stdio([command, *args], conversation=lambda ctx: ctx.deps.conversation_id)


def pydantic_ai_http(url, token):
    return justonce_pydantic_ai.http(url, token, conversation=lambda ctx: ctx.deps.conversation_id)


async def pydantic_ai_run(toolset, model, conversation_id):
    agent = Agent(model, toolsets=[toolset], deps_type=Deps)
    return await agent.run("Refund the order.", deps=Deps(conversation_id=conversation_id))


def pydantic_ai_model(script):
    from pydantic_ai.messages import ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    def answer(messages, info):
        results = []
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart):
                results.append((part.tool_call_id, part.model_response_str(), part.outcome != "success"))
            elif isinstance(part, RetryPromptPart):
                results.append((part.tool_call_id, part.model_response(), True))
        calls = script.next(results)
        if calls is None:
            return ModelResponse(parts=[TextPart("done")])
        # A call is (id, arguments), of `refund`, or (id, arguments, tool).
        tool = lambda call: call[2] if len(call) > 2 else "refund"  # noqa: E731
        return ModelResponse(parts=[ToolCallPart(tool(call), call[1], tool_call_id=call[0]) for call in calls])

    return FunctionModel(answer)


async def pydantic_ai_unknown(justonce):
    """Issue 56's unknown that no probe can end: the tests' ledger upstream
    (tests/mcp/upstreams/ledger_server.py, on $JUSTONCE_MCP_PYTHON) behind the host, its
    unannotated write tool `append` losing its answer after the line landed (`serve
    --fault lose-response:mcp:ledger`). A stubborn model retries the very same call
    once; what it read both times, and what the upstream was sent."""
    import time

    name, fault = "ledger", ("--fault", "lose-response:mcp:ledger")
    workdir = justonce.workdir / name
    workdir.mkdir(exist_ok=True)
    ledger = workdir / "ledger"
    upstream = Path(__file__).resolve().parent.parent / "mcp" / "upstreams" / "ledger_server.py"
    command = [os.environ["JUSTONCE_MCP_PYTHON"], str(upstream), str(ledger)]
    (workdir / "justonce.toml").write_text(f"[upstreams.ledger]\ncommand = {json.dumps(command)}\n")
    if justonce.transport == "stdio":
        toolset = pydantic_ai_stdio(justonce.binary, justonce.args(name, *fault))
    else:
        toolset = pydantic_ai_http(*justonce.url(name, *fault))
    append = {"line": "paid invoice 4417"}
    script = Script([[("call_1", append, "append")], [("call_2", append, "append")]])
    async with toolset:
        deadline = time.monotonic() + 60
        while "append" not in [t.name for t in await toolset.client.list_tools()]:  # the upstream starts
            assert time.monotonic() < deadline, "the ledger upstream's tools never came"
            await asyncio.sleep(0.1)
        await pydantic_ai_run(toolset, pydantic_ai_model(script), "ticket-4417")
    calls = (ledger.parent / "ledger.calls").read_text().splitlines()
    lines = ledger.read_text().splitlines()
    return {"told": script.told, "upstream": {"calls": len(calls), "lines": lines}}


async def pydantic_ai_scenarios(justonce):
    told = {}
    toolsets = {}
    stack = contextlib.AsyncExitStack()
    for name, (server, conversation, turns, _) in SCENARIOS.items():
        if conversation is None:  # the same toolset without the line of glue
            if justonce.transport == "stdio":
                toolset = MCPToolset(StdioTransport(justonce.binary, justonce.args(*server)), max_retries=3)
            else:
                toolset = MCPToolset(justonce.url(*server)[0], auth=justonce.url(*server)[1], max_retries=3)
        elif server not in toolsets:
            if justonce.transport == "stdio":
                toolset = toolsets[server] = pydantic_ai_stdio(justonce.binary, justonce.args(*server))
                # Connected once for every run (`async with toolset:`): entered per run,
                # a stdio toolset sends `initialize` again to the process it keeps
                # alive, which starts the connection over.
                await stack.enter_async_context(toolset)
            else:
                toolset = toolsets[server] = pydantic_ai_http(*justonce.url(*server))
        else:
            toolset = toolsets[server]
        script = Script(turns)
        await pydantic_ai_run(toolset, pydantic_ai_model(script), conversation)
        told[name] = script.told
    await stack.aclose()
    if "JUSTONCE_MCP_PYTHON" in os.environ:  # the ledger upstream's Python
        told["unknown"] = await pydantic_ai_unknown(justonce)
    if justonce.transport == "http":  # a refusal of the host reaches the developer
        url, token = justonce.url(*PLAIN)
        toolset = justonce_pydantic_ai.http(
            url, token, conversation="ticket-9101", headers={"Justonce-Conversation": "ticket-elsewhere"}
        )
        told["helper_refusal"] = await refusal_raised(
            pydantic_ai_run(toolset, pydantic_ai_model(Script([[("call_1", refund(9101))]])), "ticket-9101")
        )
    return told


# ---------------------------------------------------------------------------------
# The OpenAI Agents SDK: the conversation from the run's context, on every call,
# through the helper of clients/python (justonce_client.openai_agents).

from dataclasses import dataclass

import agents
from agents.mcp import MCPServerStdio, MCPServerStreamableHttp

from justonce_client import openai_agents as justonce_openai_agents


@dataclass
class Context:
    conversation_id: str  # your run's or ticket's id: the same if the run is executed again


def openai_agents_stdio(command, args):
    return justonce_openai_agents.stdio([command, *args], conversation=lambda ctx: ctx.context.conversation_id)


def openai_agents_http(url, token, conversation_id):
    return justonce_openai_agents.http(url, token, conversation=conversation_id)


async def openai_agents_run(server, model, conversation_id):  # within `async with server:`
    agent = agents.Agent(name="support", model=model, mcp_servers=[server])
    return await agents.Runner.run(agent, "Refund the order.", context=Context(conversation_id=conversation_id))


def openai_agents_model(script):
    from agents import ModelResponse, Usage
    from agents.models.interface import Model
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    class Scripted(Model):
        def __init__(self):
            self.answered = set()

        async def get_response(self, system_instructions, input, *args, **kwargs):
            results = []
            for item in input if isinstance(input, list) else []:
                item = item if isinstance(item, dict) else item.model_dump()
                if item.get("type") == "function_call_output" and item["call_id"] not in self.answered:
                    self.answered.add(item["call_id"])
                    output = item["output"]
                    if not isinstance(output, str):
                        output = "\n".join(part.get("text", "") for part in output)
                    results.append((item["call_id"], output, None))
            calls = script.next(results)
            if calls is None:
                text = ResponseOutputText(type="output_text", text="done", annotations=[])
                output = [
                    ResponseOutputMessage(
                        type="message", id="msg", role="assistant", status="completed", content=[text]
                    )
                ]
            else:
                output = [
                    ResponseFunctionToolCall(
                        type="function_call", id=f"fc_{i}", call_id=i, name="refund", arguments=json.dumps(args)
                    )
                    for i, args in calls
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args, **kwargs):
            raise NotImplementedError

    return Scripted()


async def openai_agents_scenarios(justonce):
    agents.set_tracing_disabled(True)
    told = {}
    async with contextlib.AsyncExitStack() as stack:
        shared = {}
        for name, (server, conversation, turns, _) in SCENARIOS.items():
            if justonce.transport == "stdio":
                if conversation is None:
                    mcp = MCPServerStdio({"command": justonce.binary, "args": justonce.args(*server)})
                    await stack.enter_async_context(mcp)
                elif server not in shared:
                    mcp = shared[server] = openai_agents_stdio(justonce.binary, justonce.args(*server))
                    await stack.enter_async_context(mcp)
                else:
                    mcp = shared[server]
            else:
                url, token = justonce.url(*server)
                if conversation is None:
                    mcp = MCPServerStreamableHttp({"url": url, "headers": {"Authorization": f"Bearer {token}"}})
                else:
                    mcp = openai_agents_http(url, token, conversation)
                await stack.enter_async_context(mcp)
            script = Script(turns)
            await openai_agents_run(mcp, openai_agents_model(script), conversation)
            told[name] = script.told
        if justonce.transport == "http":  # a refusal of the host reaches the developer
            url, token = justonce.url(*PLAIN)
            mcp = justonce_openai_agents.http(
                url,
                token,
                conversation="ticket-9101",
                tool_meta_resolver=lambda meta: {"dev.justonce/conversation": "ticket-elsewhere"},
            )
            await stack.enter_async_context(mcp)
            model = openai_agents_model(Script([[("call_1", refund(9101))]]))
            told["helper_refusal"] = await refusal_raised(openai_agents_run(mcp, model, "ticket-9101"))
    return told


# ---------------------------------------------------------------------------------
# langchain-mcp-adapters: the conversation in `_meta` on every call, in one MCP session
# for the block, through the helper of clients/python (justonce_client.langchain).

from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools

from justonce_client import langchain as justonce_langchain


def langchain_stdio(command, args, conversation_id):
    return justonce_langchain.stdio([command, *args], conversation=conversation_id)


def langchain_http(url, token, conversation_id):
    return justonce_langchain.http(url, token, conversation=conversation_id)


async def langchain_run(tools, script):  # within `async with langchain_…(…) as tools:`
    """The agent loop LangGraph's ToolNode runs: the model's tool calls at once, an
    exception as an error message to the model (`handle_tool_errors=True`)."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    def answers():
        results = []
        while (calls := script.next(results)) is not None:
            message = AIMessage(
                content="", tool_calls=[{"name": "refund", "args": args, "id": i} for i, args in calls]
            )
            results = yield message
        yield AIMessage(content="done")

    feed = answers()
    first = next(feed)
    model = GenericFakeChatModel(messages=iter([]))
    by_name = {tool.name: tool for tool in tools}

    async def call(tool_call):
        try:
            return await by_name[tool_call["name"]].ainvoke({**tool_call, "type": "tool_call"})
        except Exception as e:  # as ToolNode's handle_tool_errors=True does
            content = f"Error: {e!r}\n Please fix your mistakes."
            return ToolMessage(content=content, tool_call_id=tool_call["id"], status="error")

    messages = [HumanMessage("Refund the order.")]
    message = first
    while message.tool_calls:
        messages.append(message)
        replies = await asyncio.gather(*(call(tool_call) for tool_call in message.tool_calls))
        messages.extend(replies)
        results = []
        for reply in replies:
            content = reply.content
            if not isinstance(content, str):
                content = "\n".join(block.get("text", "") for block in content if isinstance(block, dict))
            results.append((reply.tool_call_id, content, reply.status == "error"))
        model.messages = iter([feed.send(results)])
        message = await model.ainvoke(messages)
    return messages


async def langchain_scenarios(justonce):
    told = {}
    for name, (server, conversation, turns, _) in SCENARIOS.items():
        script = Script(turns)
        if conversation is None:  # the adapter alone, without the helper
            if justonce.transport == "stdio":
                connection = {"transport": "stdio", "command": justonce.binary, "args": justonce.args(*server)}
            else:
                url, token = justonce.url(*server)
                connection = {
                    "transport": "streamable_http",
                    "url": url,
                    "headers": {"Authorization": f"Bearer {token}"},
                }
            client = MultiServerMCPClient({"justonce": connection})
            async with client.session("justonce") as session:
                await langchain_run(await load_mcp_tools(session), script)
        else:
            if justonce.transport == "stdio":
                tools = langchain_stdio(justonce.binary, justonce.args(*server), conversation)
            else:
                tools = langchain_http(*justonce.url(*server), conversation)
            async with tools as tools:
                await langchain_run(tools, script)
        told[name] = script.told
    if justonce.transport == "http":  # a refusal of the host reaches the developer
        url, token = justonce.url(*PLAIN)
        tools = justonce_langchain.http(
            url, token, conversation="ticket-9101", headers={"Justonce-Conversation": "ticket-elsewhere"}
        )
        async with tools as tools:
            script = Script([[("call_1", refund(9101))]])
            told["helper_refusal"] = await refusal_raised(langchain_run(tools, script))
    return told


# ---------------------------------------------------------------------------------

FRAMEWORKS = {
    "pydantic-ai": pydantic_ai_scenarios,
    "openai-agents": openai_agents_scenarios,
    "langchain": langchain_scenarios,
}

if __name__ == "__main__":
    run(FRAMEWORKS, __doc__)
