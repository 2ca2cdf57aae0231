"""Asking the person behind the agent (MCP elicitation).

`ask` puts a question to the person using the agent ("Refund 25.00 EUR to card
...4242?") and returns their answer. Asking is guarded like an effect: the host
journals the questions and the answers at the call's position, so a retry or a
resumed call gets the same answers without asking again, and the sequence of
effects and questions must follow from the arguments as for `perform`.

When the client answers later (a stateless MCP client, a task), the call stops at
the question and is run again with the answers: the tool never sees a "later".
A client that cannot be asked at all ends the call with an error the agent reads
(nothing after the question happens).
"""

import json
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from .effects import BadPayload, BadResponse


@dataclass
class Question:
    """One question: its `name` (lowercase letters, digits and `_`, unique within
    one `ask_all`), the `message` the person reads, and the JSON Schema of the
    answer's content (`schema`, a flat object of strings, numbers, booleans and
    enums, MCP's `requestedSchema`)."""

    name: str
    message: str
    schema: dict


@dataclass
class Answer:
    """The person's answer (an MCP `ElicitResult`): `action` is `"accept"`,
    `"decline"` or `"cancel"`, and an accepted answer has its `content`, the
    object the schema describes."""

    action: str
    content: Optional[dict] = None

    @property
    def accepted(self) -> bool:
        """Whether the person accepted (and filled in the form)."""
        return self.action == "accept"

    def get(self, field: str, default: Any = None) -> Any:
        """A field of an accepted answer's content, or `default`."""
        if not self.accepted or not isinstance(self.content, dict):
            return default
        return self.content.get(field, default)


def ask(message: str, schema: dict, name: str = "answer") -> Answer:
    """Asks the person one question and returns their answer.

        answer = ask(f"Refund {amount} to card {card}?",
                     {"type": "object",
                      "properties": {"confirm": {"type": "boolean"}},
                      "required": ["confirm"]})
        if answer.accepted and answer.get("confirm"):
            ...

    Raises an `EffectError` (`Denied`: a malformed question) when there is no
    answer to give the tool.
    """
    return ask_all([Question(name, message, schema)])[0]


def ask_all(questions: Sequence[Question]) -> list:
    """Asks several questions at once (one form each) and returns their answers in
    order, a list of `Answer`."""
    return [_answer(text) for text in _ask_texts(questions)]


def _ask_texts(questions: Sequence[Question]) -> list:
    from componentize_py_types import Err
    from wit_world.imports import input as wit

    from .effects import _from_wit

    try:
        asked = [
            wit.Question(
                name=q.name,
                message=q.message,
                schema=json.dumps(q.schema, separators=(",", ":"), ensure_ascii=False),
            )
            for q in questions
        ]
    except (TypeError, ValueError) as e:
        raise BadPayload(str(e)) from None
    try:
        return wit.ask(asked)
    except Err as err:
        raise _from_wit(err.value) from None


def _answer(text: str) -> Answer:
    """One answer's JSON text (an `ElicitResult`) as an `Answer`."""
    try:
        result = json.loads(text)
    except ValueError as e:
        raise BadResponse(str(e)) from None
    if not isinstance(result, dict) or not isinstance(result.get("action"), str):
        raise BadResponse(f"not an ElicitResult: {text}")
    content = result.get("content")
    return Answer(result["action"], content if isinstance(content, dict) else None)


__all__ = ["Answer", "Question", "ask", "ask_all"]
