"""probe_py: the same tool as probe_js, for the tests and the bench."""

import os
import socket
import time
from typing import Annotated, Literal, Optional

from justonce import Image, ResourceLink, Rich, Text, ToolError, ask, export, perform, progress, tool

Op = Literal[
    "echo", "count", "mail", "receipt", "ask", "file", "socket", "env", "sleep", "throw", "type_error", "tool_error",
    "imports", "connect",
]

# What `count` calls left in this instance: a fresh instance per call sees only its own.
_seen: list = []


@tool(name="probe_py")
def probe(
    op: Annotated[Op, "What to do."],
    message: Annotated[str, "Echoed, or the mail's subject."] = "",
    email: Optional[str] = None,
) -> dict:
    """Echoes a message, mails it (`receipt`: and answers in parts; `ask`: once the
    person confirms), or tries what the sandbox denies."""
    if op == "echo":
        return {"echo": message}
    if op == "count":
        # 12 MiB written: more than a pooled slot keeps resident between calls.
        _seen.append((message, bytearray(b"\x01") * (12 << 20)))
        return {"seen": [m for m, _ in _seen]}
    if op == "sleep":
        time.sleep(3600)
        return {"slept": True}
    # Failures: what the agent is told of each.
    if op == "throw":
        raise ValueError(f"bad amount: {message}")
    if op == "type_error":
        return {"length": len(email)}
    if op == "imports":
        # Imported where they are used, not at the top: none of them is imported by
        # anything else while the component is built.
        import csv
        import importlib

        decimal = importlib.import_module("decimal")
        from probe_helpers import shout

        return {"quote_all": csv.QUOTE_ALL, "sum": str(decimal.Decimal("1.10") + 2), "shout": shout(message)}
    if op == "connect":
        socket.create_connection(("example.com", 80), timeout=5)
        return {"connected": True}
    if op == "tool_error":
        raise ToolError("card_declined", f"declined: {message}", details={"retry": False})
    if op == "mail":
        sent = perform("mail", "send", {"to": email, "subject": message, "body": message})
        return {"message_id": sent["message_id"]}
    if op == "ask":
        answer = ask(
            f"Send {message!r} to {email}?",
            {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]},
            name="confirm",
        )
        if not (answer.accepted and answer.get("confirm")):
            return {"answer": answer.action, "message_id": None}
        sent = perform("mail", "send", {"to": email, "subject": message, "body": message})
        return {"answer": answer.action, "message_id": sent["message_id"]}
    if op == "receipt":
        sent = perform("mail", "send", {"to": email, "subject": message, "body": message})
        # Heard only by a client that asked; a Python tool that reports must not trap.
        progress(1, 2, "mailed")
        message_id = sent["message_id"]
        return Rich(
            [
                Text(f"Sent {message_id}"),
                Image(b"\x89PNG\x00\x01\x02\xff", "image/png"),
                ResourceLink(f"mail://{message_id}", "receipt", mime_type="message/rfc822"),
            ],
            structured={"message_id": message_id},
        )
    try:
        if op == "file":
            with open("/etc/passwd") as f:
                return {"opened": True, "contents": f.read(64)}
        if op == "socket":
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.connect(("127.0.0.1", 9))
                return {"opened": True}
        return {"opened": bool(os.environ), "environ": dict(os.environ)}
    except Exception as e:  # noqa: BLE001 - the probe reports whatever the sandbox raised
        return {"opened": False, "error": f"{type(e).__name__}: {e}"}


WitWorld = export(probe)
