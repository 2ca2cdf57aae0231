"""`ask` of the Python SDK on an ordinary interpreter, the host's `input` import
replaced by a scripted one: what goes to the host and what the tool gets back."""

import json
import sys
import types
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


class Err(Exception):
    """componentize-py's error wrapper."""

    def __init__(self, value):
        super().__init__(value)
        self.value = value


class _Case:
    def __init__(self, value):
        self.value = value


class EffectError_Denied(_Case):
    pass


class EffectError_Rejected(_Case):
    pass


class EffectError_OutcomeUnknown(_Case):
    pass


class EffectError_Divergence(_Case):
    pass


class WitQuestion:
    def __init__(self, name, message, schema):
        self.name, self.message, self.schema = name, message, schema


class Host:
    """The scripted host: answers each question with `answers[name]`, counts what
    it was asked, or refuses with `refusal`."""

    def __init__(self):
        self.asked = []
        self.answers = {}
        self.refusal = None

    def ask(self, questions):
        self.asked.append(questions)
        if self.refusal is not None:
            raise Err(self.refusal)
        return [json.dumps(self.answers[q.name]) for q in questions]


HOST = Host()


def _install_stubs():
    py_types = types.ModuleType("componentize_py_types")
    py_types.Err = Err
    world = types.ModuleType("wit_world")
    imports = types.ModuleType("wit_world.imports")
    effects = types.ModuleType("wit_world.imports.effects")
    for case in (
        EffectError_Denied,
        EffectError_Rejected,
        EffectError_OutcomeUnknown,
        EffectError_Divergence,
    ):
        setattr(effects, case.__name__, case)
    asking = types.ModuleType("wit_world.imports.input")
    asking.Question = WitQuestion
    asking.ask = lambda questions: HOST.ask(questions)
    imports.effects, imports.input = effects, asking
    world.imports = imports
    sys.modules.update(
        {
            "componentize_py_types": py_types,
            "wit_world": world,
            "wit_world.imports": imports,
            "wit_world.imports.effects": effects,
            "wit_world.imports.input": asking,
        }
    )


_install_stubs()

from justonce import Answer, Denied, Question, ask, ask_all  # noqa: E402

CONFIRM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}


class AskTest(unittest.TestCase):
    def setUp(self):
        HOST.asked.clear()
        HOST.answers.clear()
        HOST.refusal = None

    def test_one_question_goes_to_the_host_and_its_answer_comes_back(self):
        HOST.answers["answer"] = {"action": "accept", "content": {"confirm": True}}
        answer = ask("Refund 25.00 EUR?", CONFIRM)
        self.assertEqual(answer, Answer("accept", {"confirm": True}))
        self.assertTrue(answer.accepted)
        self.assertIs(answer.get("confirm"), True)
        (asked,) = HOST.asked
        self.assertEqual([(q.name, q.message) for q in asked], [("answer", "Refund 25.00 EUR?")])
        self.assertEqual(json.loads(asked[0].schema), CONFIRM)

    def test_several_questions_are_one_ask_and_their_answers_come_in_order(self):
        HOST.answers.update(
            {
                "card": {"action": "accept", "content": {"last4": "4242"}},
                "confirm": {"action": "decline"},
            }
        )
        card, confirm = ask_all(
            [
                Question("card", "Which card?", {"type": "object"}),
                Question("confirm", "Sure?", CONFIRM),
            ]
        )
        self.assertEqual(len(HOST.asked), 1, "one ask for both")
        self.assertEqual(card.get("last4"), "4242")
        self.assertFalse(confirm.accepted)
        self.assertIsNone(confirm.get("confirm"))
        self.assertEqual(confirm.get("confirm", False), False)

    def test_a_refusal_is_an_effect_error_the_agent_is_told(self):
        HOST.refusal = EffectError_Denied("question names must be unique")
        with self.assertRaises(Denied) as refused:
            ask("Sure?", CONFIRM)
        self.assertEqual(refused.exception.to_tool_error().code, "effect_denied")


if __name__ == "__main__":
    unittest.main()
