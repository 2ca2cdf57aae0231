"""Write justonce tools in Python.

A justonce tool is a WebAssembly component that an AI agent calls with JSON
arguments. It reaches the world only through `perform` (and the `http` helpers on top
of it), and the host guards every such call with an idempotency key, so an agent that
retries a call never causes a side effect twice.

A tool is a module with one typed function, the `@tool` decorator and one `export`:

    from dataclasses import dataclass, field
    from typing import Annotated
    from justonce import ToolError, export, perform, tool

    @dataclass
    class Args:
        order_id: Annotated[int, "The order the customer has not paid yet."]
        email: Annotated[str, "Where to send the reminder."]

    @tool
    def remind(args: Args) -> dict:
        \"\"\"Emails a customer a payment reminder for one order.\"\"\"
        if "@" not in args.email:
            raise ToolError("invalid_email", "The email address has no `@`.",
                            details={"email": args.email})
        sent = perform("mail", "send", {"to": args.email,
                                        "subject": f"Order {args.order_id} is unpaid"})
        return {"message_id": sent["message_id"]}

    WitWorld = export(remind)

The input schema is derived from the type hints (`additionalProperties: false`);
the docstring is the description. Build it with

    componentize-py -d wit -w tool componentize -p guest-sdk/python -p . app -o tool.wasm

The sequence of effects must follow from the arguments and from earlier responses:
the host replays a resumed call's journaled effects by position, and fails closed
with `Divergence` if the tool asks for something else.
"""

import json
from typing import Any, Callable, Optional

import sys

from . import _preload, _uncaught, http, log
from ._errors import ToolError
from .asking import Answer, Question, ask, ask_all
from .content import Audio, Image, Resource, ResourceLink, Rich, Text, add_parts
from .log import progress
from .reconcile import NOT_PERFORMED, PendingEffect, Performed, Unknown
from ._schema import Int64, Signature, UInt64, to_json
from .effects import (
    BadPayload,
    BadResponse,
    Denied,
    Divergence,
    EffectError,
    OutcomeUnknown,
    Rejected,
    perform,
)

__all__ = [
    "Answer",
    "Audio",
    "BadPayload",
    "BadResponse",
    "Denied",
    "Divergence",
    "EffectError",
    "Image",
    "Int64",
    "NOT_PERFORMED",
    "PendingEffect",
    "Performed",
    "OutcomeUnknown",
    "Question",
    "Rejected",
    "Resource",
    "ResourceLink",
    "Rich",
    "Text",
    "Tool",
    "ToolError",
    "UInt64",
    "Unknown",
    "ask",
    "ask_all",
    "export",
    "http",
    "log",
    "perform",
    "progress",
    "tool",
]


# The keyword at the root of the input schema that marks a read-only tool (the host
# reads it and removes it from the schema agents see).
READ_ONLY_KEYWORD = "x-justonce-read-only"
# The keyword there that carries the JSON Schema of the tool's result.
OUTPUT_SCHEMA_KEYWORD = "x-justonce-output-schema"


class Tool:
    """A function made a tool by `@tool`: its name, description and input schema."""

    def __init__(
        self,
        func: Callable,
        name: Optional[str],
        description: Optional[str],
        read_only: bool = False,
        output_schema: Optional[dict] = None,
    ):
        self.func = func
        self.name = name or func.__name__
        doc = description if description is not None else (func.__doc__ or "")
        self.description = " ".join(doc.split())
        if not self.description:
            raise TypeError(f"tool `{self.name}` needs a description (a docstring)")
        self.signature = Signature(func)
        self.read_only = read_only
        self.input_schema = self.signature.schema()
        if read_only:
            # In the schema's root, so the ABI's `tool-info` stays as it is.
            self.input_schema[READ_ONLY_KEYWORD] = True
        if output_schema is not None:
            if output_schema.get("type") != "object":
                raise TypeError(f"tool `{self.name}`: output_schema must describe an object")
            self.input_schema[OUTPUT_SCHEMA_KEYWORD] = output_schema

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def handle(self, args_json: str) -> str:
        """One call: the arguments as JSON text in, the result as JSON text out.
        Raises `ToolError` for anything the agent should be told."""
        try:
            args = json.loads(args_json)
            if not isinstance(args, dict):
                raise ValueError("the arguments are not a JSON object")
            bound = self.signature.bind(args)
        except (ValueError, TypeError, KeyError) as e:
            raise ToolError(
                "invalid_arguments",
                f"The arguments do not match the input schema: {e}",
            ) from None
        try:
            result = self.signature.invoke(self.func, bound)
        except EffectError as e:
            raise e.to_tool_error() from None
        try:
            if isinstance(result, Rich):
                text = json.dumps(to_json(result.structured), separators=(",", ":"), ensure_ascii=False)
                add_parts(result.parts)
                return text
            return json.dumps(to_json(result), separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError) as e:
            raise ToolError(
                "invalid_output", f"The tool's output is not serializable: {e}"
            ) from None


def tool(
    func: Optional[Callable] = None,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    read_only: bool = False,
    output_schema: Optional[dict] = None,
) -> Any:
    """Makes a typed function a tool. Use it bare (`@tool`) or with a name or a
    description other than the function's name and docstring.

    `read_only=True` marks a tool that only reads (MCP's `readOnlyHint`): the host
    saves none of its outcomes, runs every call, and stops it with a
    `read_only_effect` trap if it asks for an effect (`http.get` is a read).

    `output_schema` (the JSON Schema of an object) declares the structured result,
    MCP's `outputSchema`. A tool returns plain JSON, or a `Rich` result of parts
    (`Text`, `Image`, `Audio`, `ResourceLink`, `Resource`) and a structured value.

    The function takes either one dataclass parameter or one keyword parameter per
    argument; their type hints are the input schema. `Annotated[T, "text"]` describes
    a property, `Annotated[T, {"minimum": 1}]` adds JSON Schema keywords, a default
    makes it optional.
    """

    def wrap(f: Callable) -> Tool:
        return Tool(f, name, description, read_only, output_schema)

    return wrap(func) if func is not None else wrap


def export(t: Tool, reconcile: Optional[Callable] = None) -> type:
    """The component's exports for `t`. Assign it to `WitWorld` at the top level of
    the module componentize-py builds: `WitWorld = export(my_tool)`.

    `reconcile`, a function of a `PendingEffect` returning `Performed(response)`,
    `NOT_PERFORMED` or `Unknown(why)`, is the tool's own probe of its effects (see
    `justonce.reconcile`); the component is then built with `-w reconciling-tool`.

    While the component is built, it imports the modules the tool imports inside its
    functions (see `_preload`): the component cannot import one later."""
    if sys.platform == "wasi":
        _preload.preload()
    from componentize_py_types import Err
    from wit_world.imports import types as wit

    class WitWorld:
        def describe(self) -> Any:
            return wit.ToolInfo(
                name=t.name,
                description=t.description,
                input_schema=json.dumps(t.input_schema, separators=(",", ":")),
            )

        def call(self, args: str) -> str:
            try:
                return t.handle(args)
            except ToolError as e:
                details = None
                if e.details is not None:
                    details = json.dumps(to_json(e.details), separators=(",", ":"))
                raise Err(wit.ToolError(code=e.code, message=e.message, details=details))
            except Exception as e:  # noqa: BLE001 - a bug in the tool: reported, then a trap
                described = _uncaught.report(e)
            # Outside the `except`, so the trap's traceback is this one line, not the
            # tool's again.
            raise _uncaught.UncaughtException(described)

    if reconcile is None:
        return WitWorld

    from . import reconcile as reconciling

    class ReconcilingWitWorld(WitWorld):
        def reconcile(self, effect: Any) -> Any:
            return reconciling.answer(reconcile, effect)

    return ReconcilingWitWorld
