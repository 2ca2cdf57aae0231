"""oracle_py: returns its arguments as the SDK parsed them (tests/tests/lang/oracle.rs).

Every shape the Python SDK derives a schema for: nested dataclasses, `Optional`,
defaults (`None`, a value, a factory), a union of dataclasses told apart by a
`Literal` field (a discriminated union), `Literal` choices, `list` and `dict`, big
`int`s, `float`, `str`.
"""

from dataclasses import dataclass, field
from typing import Literal, Optional, Union

from justonce import export, tool


@dataclass
class Address:
    street: str
    unit: Optional[str] = None
    zip: Optional[int] = None


@dataclass
class Cancel:
    kind: Literal["cancel"]
    at: str = "now"


@dataclass
class Ship:
    kind: Literal["ship"]
    carrier: str
    express: bool = False


@dataclass
class Args:
    id: int
    delta: int
    ratio: float
    name: str
    address: Address
    action: Union[Cancel, Ship]
    currency: str = "EUR"
    note: Optional[str] = None
    label: Optional[str] = "none"
    level: Literal["low", "high"] = "low"
    shipping: Optional[Address] = None
    next: Optional[Union[Cancel, Ship]] = None
    lines: list[Address] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


@tool(name="oracle_py")
def oracle(args: Args) -> Args:
    """Returns its arguments as it parsed them."""
    return args


WitWorld = export(oracle)
