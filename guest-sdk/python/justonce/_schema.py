"""JSON Schema (draft 2020-12) derived from Python type hints, and the conversion of
checked JSON arguments back into the annotated types.

Pure Python with no import of the component bindings, so it runs (and is tested) on
an ordinary interpreter too.
"""

import dataclasses
import enum
import inspect
import types
import typing
from typing import Any, Callable

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

_NONE = type(None)


UInt64 = typing.Annotated[
    int,
    {
        "type": ["integer", "string"],
        "format": "uint64",
        "minimum": 0,
        "pattern": "^(0|[1-9][0-9]*)$",
    },
]
"""A 64-bit id that may also come as its decimal digits in a string, as APIs send big
ids (a client that parses JSON numbers as doubles rounds them); the host hands the
tool the `int` either way, so the two spellings are one call."""

Int64 = typing.Annotated[
    int,
    {"type": ["integer", "string"], "format": "int64", "pattern": "^(0|-?[1-9][0-9]*)$"},
]
"""As `UInt64`, signed."""


def _unwrap_annotated(hint: Any) -> tuple[Any, list[Any]]:
    """`Annotated[T, *extras]` → `(T, extras)`; any other hint → `(hint, [])`."""
    if typing.get_origin(hint) is typing.Annotated:
        base, *extras = typing.get_args(hint)
        return base, list(extras)
    return hint, []


def _is_optional(hint: Any) -> tuple[bool, Any]:
    """`Optional[T]` / `T | None` → `(True, T)`."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not _NONE]
        if len(args) < len(typing.get_args(hint)):
            inner = args[0] if len(args) == 1 else typing.Union[tuple(args)]
            return True, inner
    return False, hint


def schema_of(hint: Any) -> dict:
    """The JSON Schema of one type hint.

    `Annotated[T, "text"]` gives the schema a description; `Annotated[T, {...}]` merges
    keywords such as `{"minimum": 1}` or `{"maxItems": 50}` into it.
    """
    base, extras = _unwrap_annotated(hint)
    schema = _schema_of_base(base)
    for extra in extras:
        if isinstance(extra, str):
            schema["description"] = extra
        elif isinstance(extra, dict):
            schema.update(extra)
    return schema


def _schema_of_base(hint: Any) -> dict:
    if hint is Any:
        return {}
    if hint is _NONE or hint is None:
        return {"type": "null"}
    if hint is bool:
        return {"type": "boolean"}
    if hint is int:
        return {"type": "integer"}
    if hint is float:
        return {"type": "number"}
    if hint is str:
        return {"type": "string"}
    if inspect.isclass(hint) and issubclass(hint, enum.Enum):
        return {"enum": [member.value for member in hint]}
    if dataclasses.is_dataclass(hint):
        return object_schema(_dataclass_fields(hint), _own_doc(hint))
    optional, inner = _is_optional(hint)
    if optional:
        return {"anyOf": [schema_of(inner), {"type": "null"}]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [schema_of(a) for a in args]}
    if origin in (list, tuple, set, frozenset) or hint in (list, tuple):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return {
                "type": "array",
                "prefixItems": [schema_of(a) for a in args],
                "items": False,
            }
        items = schema_of(args[0]) if args else {}
        schema = {"type": "array", "items": items}
        if origin in (set, frozenset):
            schema["uniqueItems"] = True
        return schema
    if origin is dict or hint is dict:
        if args and args[0] is not str:
            raise TypeError(f"JSON object keys are strings, not {args[0]!r}")
        return {"type": "object", "additionalProperties": schema_of(args[1]) if args else {}}
    raise TypeError(f"no JSON Schema for the type {hint!r}")


class Field(typing.NamedTuple):
    """One property of an arguments object."""

    name: str
    hint: Any
    default: Any  # `inspect.Parameter.empty` when the property is required


def _dataclass_fields(cls: type) -> list[Field]:
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = inspect.Parameter.empty
        hint = hints[f.name]
        if "description" in f.metadata:
            hint = typing.Annotated[hint, f.metadata["description"]]
        fields.append(Field(f.name, hint, default))
    return fields


def _own_doc(cls: type) -> str | None:
    """A class's docstring, unless it is the signature `dataclass` writes."""
    doc = inspect.getdoc(cls)
    if not doc or doc.startswith(cls.__name__ + "("):
        return None
    return doc


def object_schema(fields: list[Field], description: str | None = None) -> dict:
    """A closed object: the fields are its properties, the ones without a default
    are required, and any other property is refused (`additionalProperties: false`)."""
    properties = {}
    required = []
    for f in fields:
        prop = schema_of(f.hint)
        if f.default is None and not _admits_null(f.hint):
            # `note: str = None` is optional as `Optional[str] = None` is: it may be
            # left out or null, and its schema says both.
            prop = _or_null(prop)
        if f.default is inspect.Parameter.empty:
            required.append(f.name)
        elif f.default is not None:
            prop["default"] = to_json(f.default)
        properties[f.name] = prop
    schema: dict = {"type": "object"}
    if description:
        schema["description"] = description
    schema["properties"] = properties
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _admits_null(hint: Any) -> bool:
    """Whether a value of `hint` may be `None` (`Optional[T]`, `Any`, `None`)."""
    base = _unwrap_annotated(hint)[0]
    return base is Any or base is _NONE or base is None or _is_optional(base)[0]


def _or_null(schema: dict) -> dict:
    """`schema` or `null`, as `Optional[T]` is, its description kept where agents read it."""
    inner = dict(schema)
    description = inner.pop("description", None)
    wrapped: dict = {"anyOf": [inner, {"type": "null"}]}
    if description is not None:
        wrapped["description"] = description
    return wrapped


class Signature:
    """How a tool function takes its arguments: one dataclass parameter, or one
    keyword parameter per property."""

    def __init__(self, func: Callable):
        hints = typing.get_type_hints(func, include_extras=True)
        params = list(inspect.signature(func).parameters.values())
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"{func.__name__}: *args and **kwargs have no JSON Schema")
            if p.name not in hints:
                raise TypeError(f"{func.__name__}: parameter `{p.name}` needs a type hint")
        single = len(params) == 1 and dataclasses.is_dataclass(
            _unwrap_annotated(hints[params[0].name])[0]
        )
        if single:
            self.dataclass = _unwrap_annotated(hints[params[0].name])[0]
            self.fields = _dataclass_fields(self.dataclass)
        else:
            self.dataclass = None
            self.fields = [Field(p.name, hints[p.name], p.default) for p in params]

    def schema(self) -> dict:
        doc = _own_doc(self.dataclass) if self.dataclass else None
        schema = {"$schema": SCHEMA_DIALECT}
        schema.update(object_schema(self.fields, doc))
        return schema

    def bind(self, args: dict) -> dict:
        """The checked JSON arguments as the parameters' types, defaults filled in."""
        return _fields_from_json(self.fields, args)

    def invoke(self, func: Callable, values: dict) -> Any:
        """Calls `func` with arguments from `bind`."""
        if self.dataclass is not None:
            return func(self.dataclass(**values))
        return func(**values)


def _fields_from_json(fields: list[Field], obj: dict) -> dict:
    if not isinstance(obj, dict):
        raise ValueError(f"expected an object, got {obj!r}")
    values = {}
    for f in fields:
        if f.name in obj and obj[f.name] is not None:
            values[f.name] = from_json(f.hint, obj[f.name])
        elif f.name in obj and _is_optional(_unwrap_annotated(f.hint)[0])[0]:
            # `null` for an `Optional` is `None`, even where leaving it out gives a
            # default other than `None`: as serde's `Option`, and as the host keys it.
            values[f.name] = None
        elif f.default is not inspect.Parameter.empty:
            values[f.name] = f.default
        elif f.name in obj:
            values[f.name] = None
        else:
            raise ValueError(f"missing the required property `{f.name}`")
    unknown = sorted(set(obj) - {f.name for f in fields})
    if unknown:
        raise ValueError(f"unknown properties: {', '.join(unknown)}")
    return values


def from_json(hint: Any, value: Any) -> Any:
    """`value`, parsed from JSON and checked against `schema_of(hint)`, as `hint`."""
    hint, _ = _unwrap_annotated(hint)
    if value is None:
        return None
    if hint is int and isinstance(value, float) and value.is_integer():
        # `4417.0` and `4417` are one number to the host's key and schema.
        return int(value)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if inspect.isclass(hint) and issubclass(hint, enum.Enum):
        return hint(value)
    if dataclasses.is_dataclass(hint):
        return hint(**_fields_from_json(_dataclass_fields(hint), value))
    optional, inner = _is_optional(hint)
    if optional:
        return from_json(inner, value)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        if value not in args:
            raise ValueError(f"{value!r} is none of {list(args)!r}")
        return value
    if origin in (typing.Union, types.UnionType):
        # The first branch that takes the value (a `Literal` field tells dataclasses
        # apart), parsed with its defaults, as the host normalizes it.
        for branch in args:
            try:
                return from_json(branch, value)
            except (ValueError, TypeError, KeyError):
                continue
        raise ValueError(f"no type of {hint!r} takes {value!r}")
    if origin in (list, set, frozenset) and args:
        return origin(from_json(args[0], v) for v in value)
    if origin is tuple and args:
        if args[-1] is Ellipsis:
            return tuple(from_json(args[0], v) for v in value)
        return tuple(from_json(a, v) for a, v in zip(args, value))
    if origin is dict and args:
        return {k: from_json(args[1], v) for k, v in value.items()}
    return value


def to_json(value: Any) -> Any:
    """`value` as plain JSON data: dataclasses become objects, enums their values,
    tuples and sets arrays."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_json(v) for v in value]
    return value
