"""open_ticket, in Python: opens a support ticket in the helpdesk over HTTP and
emails the customer a confirmation. Two effects, each sent once however often the
agent retries."""

from dataclasses import dataclass
from enum import Enum
from typing import Annotated

from justonce import ToolError, export, http, log, perform, tool


class Priority(Enum):
    LOW = "low"
    NORMAL = "normal"
    URGENT = "urgent"


@dataclass
class Args:
    email: Annotated[str, "The customer's email address; the confirmation goes there."]
    subject: Annotated[str, "One line that says what the problem is.", {"minLength": 3}]
    details: Annotated[str, "What the customer reported, in their words."] = ""
    priority: Annotated[Priority, "How soon the support team should look."] = Priority.NORMAL


@tool(name="open_ticket_py")
def open_ticket(args: Args) -> dict:
    """Opens a support ticket in the helpdesk for a customer and emails them its
    number. Retrying the same call opens no second ticket and sends no second email."""
    if "@" not in args.email:
        raise ToolError("invalid_email", "The email address has no `@`.", {"email": args.email})
    response = http.post(
        service="helpdesk",
        path="/v1/tickets",
        json={
            "requester": args.email,
            "subject": args.subject,
            "details": args.details,
            "priority": args.priority.value,
        },
    )
    if not response.ok:
        raise ToolError(
            "helpdesk_refused",
            f"The helpdesk answered {response.status}.",
            {"status": response.status, "body": response.body},
        )
    ticket = str(response.json()["id"])
    log.info(f"opened ticket {ticket} for {args.email}")
    sent = perform(
        "mail",
        "send",
        {
            "to": args.email,
            "subject": f"[#{ticket}] {args.subject}",
            "body": f"We opened ticket #{ticket} for you and will answer soon.",
        },
    )
    return {"ticket": ticket, "message_id": sent["message_id"]}


WitWorld = export(open_ticket)
