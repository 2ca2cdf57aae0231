"""The recipe for LlamaIndex (`llama-index-tools-mcp`) of docs/agent-builders.md ("From an
agent framework"), run as a test: the scenarios of recipes.py (see harness.py), in a venv
of its own (tests/frameworks/llamaindex/requirements.txt: it needs mcp 2, langchain-mcp-
adapters mcp 1).

Usage: recipes_llama_index.py llama-index TRANSPORT JUSTONCE WORKDIR

The agent is LlamaIndex's `FunctionAgent` on its `MockFunctionCallingLLM`, whose
response generator answers with fixed tool calls and keeps what it was told.
"""

import contextlib

from harness import PLAIN, SCENARIOS, Script, refund, refusal_raised, run

# ---------------------------------------------------------------------------------
# LlamaIndex: the conversation in `_meta` on every call, in one MCP session for the
# block, through the helper of clients/python (justonce_client.llama_index).

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.tools.mcp import BasicMCPClient, McpToolSpec

from justonce_client import llama_index as justonce_llama_index


def llama_index_stdio(command, args, conversation_id):
    return justonce_llama_index.stdio([command, *args], conversation=conversation_id)


def llama_index_http(url, token, conversation_id):
    return justonce_llama_index.http(url, token, conversation=conversation_id)


async def llama_index_run(tools, llm):  # within `async with llama_index_…(…) as tools:`
    agent = FunctionAgent(tools=tools, llm=llm)
    return await agent.run("Refund the order.")


def llama_index_model(script):
    from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
    from llama_index.core.llms.mock import MockFunctionCallingLLM

    answered = set()

    def answer(messages, **kwargs):
        results = []
        for message in messages:
            call_id = message.additional_kwargs.get("tool_call_id")
            if message.role == "tool" and call_id not in answered:
                answered.add(call_id)
                # LlamaIndex marks a failed tool call in its ToolOutput, not in the message.
                results.append((call_id, message.content, None))
        calls = script.next(results)
        if calls is None:
            return ChatMessage(role="assistant", content="done")
        blocks = [ToolCallBlock(tool_call_id=i, tool_name="refund", tool_kwargs=args) for i, args in calls]
        return ChatMessage(role="assistant", blocks=blocks)

    return MockFunctionCallingLLM(response_generator=answer)


async def llama_index_scenarios(justonce):
    told = {}
    for name, (server, conversation, turns, _) in SCENARIOS.items():
        script = Script(turns)
        async with contextlib.AsyncExitStack() as stack:
            if conversation is None:  # the package alone, without the helper
                if justonce.transport == "stdio":
                    client = BasicMCPClient(justonce.binary, args=justonce.args(*server))
                else:
                    url, token = justonce.url(*server)
                    client = BasicMCPClient(url, headers={"Authorization": f"Bearer {token}"})
                tools = await McpToolSpec(client).to_tool_list_async()
            elif justonce.transport == "stdio":
                tools = await stack.enter_async_context(
                    llama_index_stdio(justonce.binary, justonce.args(*server), conversation)
                )
            else:
                tools = await stack.enter_async_context(llama_index_http(*justonce.url(*server), conversation))
            await llama_index_run(tools, llama_index_model(script))
        told[name] = script.told
    if justonce.transport == "http":  # a refusal of the host reaches the developer
        url, token = justonce.url(*PLAIN)
        tools = justonce_llama_index.http(
            url, token, conversation="ticket-9101", headers={"Justonce-Conversation": "ticket-elsewhere"}
        )
        async with tools as tools:
            model = llama_index_model(Script([[("call_1", refund(9101))]]))
            told["helper_refusal"] = await refusal_raised(llama_index_run(tools, model))
    return told


# ---------------------------------------------------------------------------------

if __name__ == "__main__":
    run({"llama-index": llama_index_scenarios}, __doc__)
