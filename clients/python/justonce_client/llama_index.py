"""LlamaIndex (`llama-index-tools-mcp`): a justonce host's tools as LlamaIndex tools, in
one line.

```python
async with llama_index.stdio(["justonce", "serve"], conversation="ticket-4417") as tools:
    agent = FunctionAgent(tools=tools, llm=llm)
async with llama_index.http(url, token, conversation="ticket-4417") as tools:
    ...
```

`BasicMCPClient` alone opens a session (on stdio a server process) per call and sends
no `_meta`; these tools call the host in one MCP session kept open for the block, with
the conversation in `_meta` on both transports. `conversation` is your run's, task's or
ticket's id: a workflow's own run id is new each run, so none is derived. The client
waits 60 s, above the host's own waits (the package's default is 30 s). A refusal of the
host is raised out of the agent's run as `justonce_client.Refused` (LlamaIndex hands
every `Exception` a tool raises to the model; `Refused` is not one). The model reads a
result's text, the host's note included; an error result reaches it as a failed tool
call with that text.
"""

from __future__ import annotations

import contextlib
from typing import Any, AsyncIterator, Sequence

from llama_index.core.tools import FunctionTool
from llama_index.tools.mcp import BasicMCPClient, McpToolSpec
from mcp.shared.exceptions import MCPError

from ._host import CONVERSATION_META, READ_TIMEOUT_S, conversation_of, http_headers, note_of, refusal_in


class ToolFailed(Exception):
    """An error result of the host (`outcome_unknown`, `in_progress`, a tool's error):
    its text, the host's note included, is what LlamaIndex hands the model."""


def stdio(command: Sequence[str], conversation: str) -> contextlib.AbstractAsyncContextManager[list[FunctionTool]]:
    """The tools of the host that `command` (`justonce … serve …`) starts, called in
    `conversation`, for the `async with` block."""
    program, *args = command
    return _tools(_Client(program, args=list(args), timeout=READ_TIMEOUT_S), conversation)


def http(
    url: str, token: str | None, conversation: str, headers: dict[str, str] | None = None
) -> contextlib.AbstractAsyncContextManager[list[FunctionTool]]:
    """The tools of the host's Streamable HTTP endpoint `url` (`…/mcp`), with the bearer
    `token` (and any other `headers`), called in `conversation`, for the `async with`
    block."""
    headers = http_headers(token, headers)
    return _tools(_Client(url, headers=headers, timeout=READ_TIMEOUT_S, sse_read_timeout=READ_TIMEOUT_S), conversation)


class _Client(BasicMCPClient):
    """A `BasicMCPClient` whose calls go through one open session, in one conversation."""

    session: Any = None
    conversation: str = ""

    async def call_tool(self, tool_name: str, arguments: dict | None = None, progress_callback: Any = None) -> str:
        meta = {CONVERSATION_META: conversation_of(self.conversation, None)}
        try:
            result = await self.session.call_tool(
                tool_name, arguments, read_timeout_seconds=float(READ_TIMEOUT_S), meta=meta
            )
        except MCPError as e:
            refused = refusal_in(e)
            if refused is not None:
                raise refused from e
            raise
        text = note_of(result.content)
        if result.is_error:
            raise ToolFailed(text or f"Tool {tool_name!r} returned an error")
        return text


@contextlib.asynccontextmanager
async def _tools(client: _Client, conversation: str) -> AsyncIterator[list[FunctionTool]]:
    client.conversation = conversation
    async with client._run_session() as session:
        client.session = session
        # Listing tools opens a session of its own (the package's); calls use this one.
        yield await McpToolSpec(client).to_tool_list_async()


__all__ = ["ToolFailed", "http", "stdio"]
