"""What every helper shares: the host's names, its waits, and its refusals."""

from __future__ import annotations

from typing import Any, Callable, Union

#: The `_meta` key of a call's conversation.
CONVERSATION_META = "dev.justonce/conversation"
#: The HTTP header of a connection's conversation.
CONVERSATION_HEADER = "Justonce-Conversation"
#: The client's read timeout, in seconds: above the host's longest wait for a first
#: call (its deadline, 10 s, plus its effects' retries), so the client reads the host's
#: own `outcome_unknown` or `in_progress` instead of timing out first.
READ_TIMEOUT_S = 60
#: How many times a framework lets the model retry a tool: `outcome_unknown` and
#: `in_progress` ask for the same call again.
MAX_RETRIES = 3

#: A conversation id, or a function of the framework's run context that returns one.
Conversation = Union[str, Callable[[Any], str]]


class Refused(BaseException):
    """The host refused the call before anything ran (JSON-RPC `-32602`): a call that
    names no conversation, a session-less one, two places naming different
    conversations. Raised to the developer, not handed to the model: the message is the
    host's, with the fix. A `BaseException`, as `KeyboardInterrupt` is: every framework
    hands the model any `Exception` a tool raises (LlamaIndex always, LangGraph's
    `ToolNode` by default), and a refusal is a fault of the setup, which no model can
    fix. Catch it by name (`except justonce_client.Refused`)."""

    def __init__(self, message: str, kind: str | None = None):
        super().__init__(message)
        #: The refusal's `data.kind` (`unscoped`, `no_session`, …), when the host said.
        self.kind = kind


def http_headers(token: str | None, headers: dict[str, str] | None = None) -> dict[str, str]:
    """The headers of a connection to the host: `headers`, and the bearer `token`."""
    headers = dict(headers or {})
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def conversation_of(conversation: Conversation, context: Any) -> str:
    """The conversation id for one call, from the helper's `conversation` argument."""
    value = conversation(context) if callable(conversation) else conversation
    if not isinstance(value, str) or not value:
        raise ValueError(f"justonce: the conversation must be a non-empty string, got {value!r}")
    return value


def _chain(error: BaseException):
    seen = set()
    stack = [error]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        stack.extend(getattr(e, "exceptions", ()) or ())
        stack.append(e.__cause__)
        stack.append(e.__context__)


def refusal_in(error: BaseException) -> Refused | None:
    """The host's refusal that `error` (or an exception it was raised from) carries, if
    any: a JSON-RPC `-32602` whose message says nothing ran."""
    for e in _chain(error):
        if isinstance(e, Refused):
            return e
        data = getattr(e, "error", None)  # the MCP SDK's McpError keeps its ErrorData here
        code = getattr(data, "code", getattr(e, "code", None))
        message = getattr(data, "message", None) or str(e)
        if code == -32602 and "nothing ran" in message:
            details = getattr(data, "data", None) or getattr(e, "data", None)
            kind = details.get("kind") if isinstance(details, dict) else None
            return Refused(message, kind)
    return None


def note_of(content: Any) -> str:
    """The text of a result's content items, the host's note included (a replay's note is
    an embedded text resource), joined by newlines."""
    texts = []
    for item in content or ():
        text = getattr(item, "text", None)
        resource = getattr(item, "resource", None)
        if text is None and resource is not None:
            text = getattr(resource, "text", None)
        if text:
            texts.append(text)
    return "\n".join(texts)
