"""pydantic-ai: an `MCPToolset` for a justonce host, in one line.

```python
toolset = pydantic_ai.stdio(["justonce", "serve"], conversation=lambda ctx: ctx.deps.ticket_id)
toolset = pydantic_ai.http(url, token, conversation=lambda ctx: ctx.deps.ticket_id)
```

Every call carries the conversation in `_meta` (over HTTP too, where the host reads it
as it reads the header). A refusal of the host is raised as `justonce_client.Refused`
(pydantic-ai would hand it to the model as a retry prompt, the fix only in an
exception's `__cause__`). A result that is an error (`outcome_unknown`, `in_progress`)
reaches the model as a retry prompt with its text, the host's note included (pydantic-ai
alone would give it the structured error only). On stdio, enter the toolset once
(`async with toolset:`) around your runs: one process, one `initialize`, one MCP
session for all of them.
"""

from __future__ import annotations

from typing import Any, Sequence

from fastmcp.client.transports import StdioTransport
from fastmcp.exceptions import McpError
from pydantic_ai import ModelRetry
from pydantic_ai.mcp import MCPToolset, _map_mcp_call_tool_result

from ._host import CONVERSATION_META, MAX_RETRIES, READ_TIMEOUT_S, Conversation, conversation_of, note_of, refusal_in


def stdio(command: Sequence[str], conversation: Conversation, **toolset: Any) -> MCPToolset:
    """A toolset that starts `command` (`justonce … serve …`) and calls its tools in
    `conversation` (a string, or a function of the run's `RunContext`)."""
    program, *args = command
    return _toolset(StdioTransport(program, list(args)), conversation, toolset)


def http(url: str, token: str | None, conversation: Conversation, **toolset: Any) -> MCPToolset:
    """A toolset for the host's Streamable HTTP endpoint `url` (`…/mcp`), with the
    bearer `token`, calling its tools in `conversation`."""
    if token is not None:
        toolset.setdefault("auth", token)
    return _toolset(url, conversation, toolset)


def _toolset(transport: Any, conversation: Conversation, options: dict[str, Any]) -> MCPToolset:
    made: list[MCPToolset] = []

    async def in_conversation(ctx: Any, call_tool: Any, name: str, args: dict[str, Any]) -> Any:
        meta = {CONVERSATION_META: conversation_of(conversation, ctx)}
        toolset = made[0]
        try:
            # The client's own call, for the whole result: pydantic-ai's would hand the
            # model an error's structured content alone, without the host's note.
            async with toolset._connected():
                result = await toolset.client.call_tool(name=name, arguments=args, meta=meta, raise_on_error=False)
        except McpError as e:
            refused = refusal_in(e)
            if refused is not None:
                raise refused from e
            raise ModelRetry(str(e)) from e
        if result.is_error:
            raise ModelRetry(note_of(result.content) or f"Tool {name!r} returned an error")
        return _map_mcp_call_tool_result(result)

    options.setdefault("max_retries", MAX_RETRIES)
    options.setdefault("read_timeout", READ_TIMEOUT_S)
    # pydantic-ai's own is 5 s: a host starting cold (its components compiled, its
    # journal opened, its upstreams started) may take longer to answer `initialize`.
    options.setdefault("init_timeout", READ_TIMEOUT_S)
    toolset = MCPToolset(transport, process_tool_call=in_conversation, **options)
    made.append(toolset)
    return toolset
