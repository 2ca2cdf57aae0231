"""The schema derivation and argument binding of the Python SDK, on an ordinary
interpreter (no component needed): `python3 -m unittest discover guest-sdk/python/tests`."""

import dataclasses
import enum
import sys
import unittest
from pathlib import Path
import json
from typing import Annotated, Literal, Optional, Union

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from justonce._schema import Int64, Signature, UInt64, to_json  # noqa: E402


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Line:
    sku: Annotated[str, "The product."]
    qty: Annotated[int, {"minimum": 1}] = 1


@dataclasses.dataclass
class Order:
    """An order to place."""

    lines: list[Line]
    color: Color = Color.RED
    note: Optional[str] = None
    rush: bool = False


@dataclasses.dataclass
class Cancel:
    kind: Literal["cancel"]
    at: str = "now"


@dataclasses.dataclass
class Ship:
    kind: Literal["ship"]
    carrier: str
    express: bool = False


@dataclasses.dataclass
class Act:
    action: Union[Cancel, Ship]
    then: Optional[Union[Cancel, Ship]] = None
    label: Optional[str] = "none"
    order_id: int = 0


class SchemaTest(unittest.TestCase):
    def test_a_dataclass_is_a_closed_object_with_its_defaults(self):
        def place(order: Order) -> dict:
            return {}

        schema = Signature(place).schema()
        self.assertEqual(schema["$schema"], "https://json-schema.org/draft/2020-12/schema")
        self.assertEqual(schema["description"], "An order to place.")
        self.assertEqual(schema["required"], ["lines"])
        self.assertIs(schema["additionalProperties"], False)
        props = schema["properties"]
        self.assertEqual(props["color"], {"enum": ["red", "blue"], "default": "red"})
        self.assertEqual(props["note"], {"anyOf": [{"type": "string"}, {"type": "null"}]})
        self.assertEqual(props["rush"], {"type": "boolean", "default": False})
        line = props["lines"]["items"]
        self.assertEqual(line["properties"]["sku"]["description"], "The product.")
        self.assertEqual(line["properties"]["qty"], {"type": "integer", "minimum": 1, "default": 1})
        self.assertIs(line["additionalProperties"], False)

    def test_keyword_parameters_are_the_properties(self):
        def greet(name: str, times: int = 1, mode: Literal["a", "b"] = "a") -> str:
            return name

        schema = Signature(greet).schema()
        self.assertEqual(schema["required"], ["name"])
        self.assertEqual(schema["properties"]["mode"], {"enum": ["a", "b"], "default": "a"})

    def test_an_optional_says_it_may_be_null_or_left_out_and_both_are_none(self):
        def refund(
            order: int,
            note: Optional[str] = None,
            memo: Annotated[str, "Why."] = None,
            currency: str = "EUR",
        ) -> dict:
            return {}

        sig = Signature(refund)
        schema = sig.schema()
        self.assertEqual(schema["required"], ["order"])
        props = schema["properties"]
        self.assertEqual(props["note"], {"anyOf": [{"type": "string"}, {"type": "null"}]})
        # A `None` default makes a property optional whatever its hint says.
        self.assertEqual(
            props["memo"],
            {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "Why."},
        )
        # The opposite: a property with another default is not nullable.
        self.assertEqual(props["currency"], {"type": "string", "default": "EUR"})
        left_out = sig.bind({"order": 1})
        given_null = sig.bind({"order": 1, "note": None, "memo": None, "currency": None})
        self.assertEqual(left_out, given_null)
        self.assertEqual(left_out, {"order": 1, "note": None, "memo": None, "currency": "EUR"})

    def test_arguments_are_bound_to_the_types_with_defaults_and_null_as_absent(self):
        def place(order: Order) -> Order:
            return order

        sig = Signature(place)
        bound = sig.bind({"lines": [{"sku": "x", "qty": 2.0}], "note": None, "color": "blue"})
        order = sig.invoke(place, bound)
        self.assertEqual(order.lines, [Line("x", 2)])
        self.assertIsInstance(order.lines[0].qty, int)
        self.assertIs(order.color, Color.BLUE)
        self.assertIsNone(order.note)
        self.assertEqual(
            to_json(order),
            {"lines": [{"sku": "x", "qty": 2}], "color": "blue", "note": None, "rush": False},
        )

    def test_a_union_of_dataclasses_is_parsed_into_the_branch_its_literal_names(self):
        def act(args: Act) -> Act:
            return args

        sig = Signature(act)
        bound = sig.bind({"action": {"kind": "cancel"}, "then": {"kind": "ship", "carrier": "ups"}})
        args = sig.invoke(act, bound)
        # Defaults filled inside the branch, as the host fills them before the key.
        self.assertEqual(args.action, Cancel("cancel", "now"))
        self.assertEqual(args.then, Ship("ship", "ups", False))
        with self.assertRaises(ValueError):
            sig.bind({"action": {"kind": "hold"}})
        with self.assertRaises(ValueError):
            sig.bind({"action": {"kind": "cancel", "carrier": "ups"}})

    def test_null_for_an_optional_with_a_default_is_none_and_absent_is_the_default(self):
        def act(args: Act) -> Act:
            return args

        sig = Signature(act)
        given_null = sig.invoke(act, sig.bind({"action": {"kind": "cancel"}, "label": None}))
        left_out = sig.invoke(act, sig.bind({"action": {"kind": "cancel"}}))
        # As serde's `Option` with a default, and as the host keys them: two calls.
        self.assertIsNone(given_null.label)
        self.assertEqual(left_out.label, "none")

    def test_integers_past_2_53_arrive_exactly(self):
        def act(args: Act) -> Act:
            return args

        sig = Signature(act)
        for digits in ["9007199254740993", "18446744073709551615", "-9223372036854775808"]:
            parsed = json.loads('{"action":{"kind":"cancel"},"order_id":' + digits + "}")
            args = sig.invoke(act, sig.bind(parsed))
            self.assertEqual(args.order_id, int(digits))
            self.assertIn(digits, json.dumps(to_json(args)))

    def test_a_64_bit_id_takes_its_digits_as_a_string_too_and_a_plain_int_does_not(self):
        def refund(order_id: UInt64, delta: Int64, qty: int) -> dict:
            return {"order_id": order_id}

        schema = Signature(refund).schema()
        props = schema["properties"]
        self.assertEqual(props["order_id"]["type"], ["integer", "string"])
        self.assertEqual(props["order_id"]["format"], "uint64")
        self.assertEqual(props["delta"]["format"], "int64")
        self.assertEqual(props["qty"]["type"], "integer")
        # The host hands the tool the number the digits spell.
        sig = Signature(refund)
        bound = sig.bind({"order_id": 9007199254740993, "delta": -1, "qty": 1})
        self.assertEqual(sig.invoke(refund, bound)["order_id"], 9007199254740993)

    def test_untyped_parameters_are_refused(self):
        def bad(x) -> None:
            return None

        with self.assertRaises(TypeError):
            Signature(bad)

class ReadOnlyTest(unittest.TestCase):
    def test_a_read_only_tool_says_so_in_its_schema_root_and_others_do_not(self):
        from justonce import READ_ONLY_KEYWORD, tool

        @tool(read_only=True)
        def balance(account: str) -> int:
            """Looks up a balance."""
            return 0

        @tool
        def refund(account: str) -> int:
            """Refunds."""
            return 0

        self.assertIs(balance.input_schema[READ_ONLY_KEYWORD], True)
        self.assertNotIn(READ_ONLY_KEYWORD, refund.input_schema)


class RichTest(unittest.TestCase):
    def test_an_output_schema_travels_in_the_input_schema_root_and_must_be_an_objects(self):
        from justonce import tool
        from justonce import OUTPUT_SCHEMA_KEYWORD

        total = {"type": "object", "properties": {"cents": {"type": "integer"}}}

        @tool(output_schema=total)
        def add(a: int) -> dict:
            """Adds."""
            return {"cents": a}

        self.assertEqual(add.input_schema[OUTPUT_SCHEMA_KEYWORD], total)
        with self.assertRaisesRegex(TypeError, "output_schema"):

            @tool(output_schema={"type": "string"})
            def name(a: int) -> str:
                """Names."""
                return str(a)

    def test_a_resource_holds_text_or_bytes_not_both(self):
        from justonce import Resource

        Resource("test://r", "text/plain", text="hi")
        with self.assertRaises(TypeError):
            Resource("test://r", text="hi", blob=b"x")


if __name__ == "__main__":
    unittest.main()
