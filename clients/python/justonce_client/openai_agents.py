"""The OpenAI Agents SDK: an MCP server object for a justonce host, in one line.

```python
server = openai_agents.stdio(["justonce", "serve"], conversation=lambda ctx: ctx.context.ticket_id)
server = openai_agents.http(url, token, conversation="ticket-4417")  # one per conversation
```

On stdio every call carries the conversation in `_meta` (`conversation` is a string or
a function of the run's `RunContextWrapper`); over HTTP it is the connection's
`Justonce-Conversation` header, so a server object serves one conversation. A refusal of
the host is raised out of the run as `justonce_client.Refused` (the SDK would tell the
model "An error occurred while running the tool" and nobody the fix); other failures
keep the SDK's default. The model reads a result's text, the host's note included.
"""

from __future__ import annotations

from typing import Any, Sequence

from agents.mcp import MCPServerStdio, MCPServerStreamableHttp
from agents.tool import default_tool_error_function

from ._host import CONVERSATION_HEADER, CONVERSATION_META, READ_TIMEOUT_S, Conversation, conversation_of, refusal_in


def _failure(ctx: Any, error: Exception) -> str:
    refused = refusal_in(error)
    if refused is not None:
        raise refused from error
    return default_tool_error_function(ctx, error)


def stdio(command: Sequence[str], conversation: Conversation, **server: Any) -> MCPServerStdio:
    """A server that starts `command` (`justonce … serve …`) and calls its tools in
    `conversation`."""
    program, *args = command
    server.setdefault("client_session_timeout_seconds", READ_TIMEOUT_S)
    server.setdefault("failure_error_function", _failure)
    return MCPServerStdio(
        {"command": program, "args": list(args)},
        tool_meta_resolver=lambda meta: {CONVERSATION_META: conversation_of(conversation, meta.run_context)},
        **server,
    )


def http(url: str, token: str | None, conversation: str, **server: Any) -> MCPServerStreamableHttp:
    """A server for the host's Streamable HTTP endpoint `url` with the bearer `token`,
    for the one conversation `conversation`."""
    headers = {CONVERSATION_HEADER: conversation_of(conversation, None)}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    server.setdefault("client_session_timeout_seconds", READ_TIMEOUT_S)
    server.setdefault("failure_error_function", _failure)
    return MCPServerStreamableHttp(
        {"url": url, "headers": headers, "timeout": READ_TIMEOUT_S, "sse_read_timeout": READ_TIMEOUT_S},
        **server,
    )
