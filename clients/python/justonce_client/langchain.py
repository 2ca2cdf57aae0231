"""langchain-mcp-adapters: a justonce host's tools as LangChain tools, in one line.

```python
async with langchain.stdio(["justonce", "serve"], conversation="ticket-4417") as tools:
    ...  # hand `tools` to your agent (LangGraph's ToolNode, create_agent, ...)
async with langchain.http(url, token, conversation="ticket-4417") as tools:
    ...
```

The adapter sends no `_meta` of its own; these tools make each call themselves, in one
MCP session kept open for the block (the adapter alone opens a session, and on stdio a
server process, per call), with the conversation in `_meta` on both transports.
`conversation` is your run's, task's or ticket's id, or a function of LangGraph's tool
runtime (`None` outside a graph) that returns one: the adapter has no run id of its own
that survives a re-executed run, so none is derived. The client waits 60 s, above the
host's own waits. A refusal of the host is raised out of the run as
`justonce_client.Refused` (not an `Exception`, so `ToolNode`'s `handle_tool_errors`, which
hands the model every `Exception`, lets it through). The model reads a result's text blocks, the host's note included (an
error result is a `ToolMessage` with `status="error"`).
"""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any, AsyncIterator, Sequence

from langchain_core.tools import BaseTool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from mcp.shared.exceptions import McpError

from ._host import CONVERSATION_META, READ_TIMEOUT_S, Conversation, conversation_of, http_headers, refusal_in

_TIMEOUT = timedelta(seconds=READ_TIMEOUT_S)


def stdio(command: Sequence[str], conversation: Conversation) -> contextlib.AbstractAsyncContextManager[list[BaseTool]]:
    """The tools of the host that `command` (`justonce … serve …`) starts, called in
    `conversation`, for the `async with` block."""
    program, *args = command
    connection = {
        "transport": "stdio",
        "command": program,
        "args": list(args),
        "session_kwargs": {"read_timeout_seconds": _TIMEOUT},
    }
    return _tools(connection, conversation)


def http(
    url: str, token: str | None, conversation: Conversation, headers: dict[str, str] | None = None
) -> contextlib.AbstractAsyncContextManager[list[BaseTool]]:
    """The tools of the host's Streamable HTTP endpoint `url` (`…/mcp`), with the bearer
    `token` (and any other `headers`), called in `conversation`, for the `async with`
    block."""
    headers = http_headers(token, headers)
    connection = {
        "transport": "streamable_http",
        "url": url,
        "headers": headers,
        "timeout": _TIMEOUT,
        "sse_read_timeout": _TIMEOUT,
        "session_kwargs": {"read_timeout_seconds": _TIMEOUT},
    }
    return _tools(connection, conversation)


@contextlib.asynccontextmanager
async def _tools(connection: dict[str, Any], conversation: Conversation) -> AsyncIterator[list[BaseTool]]:
    client = MultiServerMCPClient({"justonce": connection})
    async with client.session("justonce") as session:

        async def in_conversation(request: Any, handler: Any) -> Any:
            meta = {CONVERSATION_META: conversation_of(conversation, request.runtime)}
            try:
                return await session.call_tool(request.name, request.args, read_timeout_seconds=_TIMEOUT, meta=meta)
            except McpError as e:
                refused = refusal_in(e)
                if refused is not None:
                    raise refused from e
                raise

        yield await load_mcp_tools(session, tool_interceptors=[in_conversation], server_name="justonce")


__all__ = ["http", "stdio"]
