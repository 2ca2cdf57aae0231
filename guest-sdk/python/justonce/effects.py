"""The one guarded path from a tool to the world.

Every `perform` is one side effect. The host keys it by the invocation and the
call's position in it, journals it before the provider runs, and replays the first
outcome to any retry, so a tool written as straight-line code is safe to retry. Keep
the sequence of effects a function of the arguments (and of earlier responses): a
resumed call that asks for a different effect where the journal already holds one
fails with `Divergence`.
"""

import json
from typing import Any

from ._errors import ToolError


class EffectError(Exception):
    """Why an effect did not produce a usable response.

    Left uncaught, it reaches the agent as a `ToolError` with a stable `code` (see
    `to_tool_error`), as `?` does in the Rust SDK.
    """

    code = "effect_error"
    prefix = "effect failed"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.prefix}: {self.message}"

    def to_tool_error(self) -> ToolError:
        """The tool error the agent is told when the tool lets this escape."""
        return ToolError(self.code, str(self))


def readable(answer: Any) -> str:
    """A downstream's answer as a person reads it, in a message: the text of a string;
    for an object with a `message`, that message after its `error` or `code`
    (`invalid_recipient: ...`); else its JSON. The whole answer stays in the error's
    details."""
    if isinstance(answer, str):
        return answer
    if isinstance(answer, dict) and isinstance(answer.get("message"), str):
        for field in ("error", "code"):
            code = answer.get(field)
            if isinstance(code, str) or (isinstance(code, int) and not isinstance(code, bool)):
                return f"{code}: {answer['message']}"
        return answer["message"]
    return json.dumps(answer, separators=(",", ":"), ensure_ascii=False)


class Rejected(EffectError):
    """The downstream refused definitively (a declined card, say). `answer` holds
    its answer as JSON data. Retrying is pointless; the refusal is saved and replayed."""

    code = "effect_rejected"
    prefix = "effect rejected"

    def __init__(self, answer: Any):
        super().__init__(readable(answer))
        self.answer = answer

    def to_tool_error(self) -> ToolError:
        return ToolError(self.code, str(self), details=self.answer)


class OutcomeUnknown(EffectError):
    """The host retried with the same key and still does not know whether the effect
    happened. The call stays open; retrying the same tool call later is safe."""

    code = "outcome_unknown"
    prefix = "effect outcome unknown"

    def to_tool_error(self) -> ToolError:
        return ToolError(
            self.code,
            f"{self}. Retrying the same call is safe: it will not repeat the effect.",
        )


class Denied(EffectError):
    """The host refused the effect before performing it: an unknown provider or
    operation, a host allowlist, or a limit of the sandbox."""

    code = "effect_denied"
    prefix = "effect denied"


class Divergence(EffectError):
    """A resumed call asked for a different effect where the journal already holds
    one. Nothing was performed."""

    code = "divergence"
    prefix = "effect diverged from the journal"


class BadResponse(EffectError):
    """The effect happened, but its response was not the JSON expected."""

    code = "bad_effect_response"
    prefix = "unexpected effect response"


class BadPayload(EffectError):
    """The payload could not be serialized to JSON, so nothing was sent."""

    code = "bad_effect_payload"
    prefix = "effect payload is not serializable"


def perform(provider: str, operation: str, payload: Any) -> Any:
    """Performs one side effect through `provider` and returns its response, parsed.

    `payload` is anything `json.dumps` takes (dataclasses too). Raises an
    `EffectError` subclass when the effect gives no usable response.
    """
    from ._schema import to_json

    try:
        text = json.dumps(to_json(payload), separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise BadPayload(str(e)) from None
    response = perform_text(provider, operation, text)
    try:
        return json.loads(response)
    except ValueError as e:
        raise BadResponse(str(e)) from None


def perform_text(provider: str, operation: str, payload: str) -> str:
    """Performs one side effect with a JSON text payload; returns the JSON text."""
    from componentize_py_types import Err
    from wit_world.imports import effects as wit

    try:
        return wit.perform(provider, operation, payload)
    except Err as err:
        raise _from_wit(err.value) from None


def _from_wit(error: Any) -> EffectError:
    from wit_world.imports import effects as wit

    if isinstance(error, wit.EffectError_Rejected):
        try:
            answer = json.loads(error.value)
        except ValueError:
            # The host sends JSON; keep a non-JSON answer rather than lose it.
            answer = error.value
        return Rejected(answer)
    if isinstance(error, wit.EffectError_OutcomeUnknown):
        return OutcomeUnknown(error.value)
    if isinstance(error, wit.EffectError_Denied):
        return Denied(error.value)
    if isinstance(error, wit.EffectError_Divergence):
        return Divergence(error.value)
    return EffectError(repr(error))
