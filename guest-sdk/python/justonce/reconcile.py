"""A tool's own probe: whether one of its effects happened after the host lost the
effect's answer (an unkeyed effect whose outcome is unknown).

    def reconcile_notify(effect: PendingEffect):
        found = perform("smtp", "find", {"key": effect.key})   # a read
        if found is None:
            return NOT_PERFORMED
        return Performed({"message_id": found["id"]})

    WitWorld = export(notify, reconcile=reconcile_notify)

Built with `componentize-py -d wit -w reconciling-tool componentize ...`. It runs with
reads only: an effect or a question to the user stops it with a trap.
"""

import json
from dataclasses import dataclass
from typing import Any, Callable

from ._schema import to_json
from .effects import EffectError


@dataclass(frozen=True)
class PendingEffect:
    """One of the tool's own effects whose outcome is unknown."""

    provider: str
    operation: str
    payload: Any
    """The payload the tool passed, parsed."""
    key: str
    """The idempotency key the provider got with the effect."""


@dataclass(frozen=True)
class Performed:
    """It happened: `response` is saved as the effect's answer, which the retried
    call gets from `perform`."""

    response: Any


@dataclass(frozen=True)
class Unknown:
    """It cannot tell (`why`, for the operator): the effect stays unknown."""

    why: str


class _NotPerformed:
    """It did not happen: the host sends it again under the same key."""

    def __repr__(self) -> str:
        return "NOT_PERFORMED"


NOT_PERFORMED = _NotPerformed()


def answer(reconcile: Callable[[PendingEffect], Any], effect: Any) -> Any:
    """The WIT `reconciled` of `reconcile` asked about the WIT `pending-effect`."""
    from wit_world.imports import types as wit

    try:
        payload = json.loads(effect.payload)
    except ValueError as e:
        return wit.Reconciled_Unknown(f"the payload is not JSON: {e}")
    pending = PendingEffect(effect.provider, effect.operation, payload, effect.key)
    try:
        found = reconcile(pending)
    except EffectError as e:
        return wit.Reconciled_Unknown(str(e))
    if isinstance(found, Performed):
        text = json.dumps(to_json(found.response), separators=(",", ":"), ensure_ascii=False)
        return wit.Reconciled_Performed(text)
    if found is NOT_PERFORMED:
        return wit.Reconciled_NotPerformed()
    if isinstance(found, Unknown):
        return wit.Reconciled_Unknown(found.why)
    raise TypeError(
        f"reconcile returned {found!r}: return Performed(response), NOT_PERFORMED or Unknown(why)"
    )
