"""What a tool error says of a rejected effect (the Python SDK's `effects`), on an
ordinary interpreter: a sentence, not escaped JSON; the answer stays in the details."""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from justonce.effects import Rejected  # noqa: E402


class RejectedTest(unittest.TestCase):
    def test_an_answer_with_a_message_reads_as_a_sentence(self):
        answer = {"error": "invalid_recipient", "message": "`x` is not an email address"}
        error = Rejected(answer).to_tool_error()
        self.assertEqual(error.code, "effect_rejected")
        self.assertEqual(
            error.message, "effect rejected: invalid_recipient: `x` is not an email address"
        )
        self.assertEqual(error.details, answer)

    def test_another_answer_is_its_json(self):
        self.assertEqual(
            Rejected({"reason": "declined"}).to_tool_error().message,
            'effect rejected: {"reason":"declined"}',
        )
        self.assertEqual(Rejected("card declined").to_tool_error().message, "effect rejected: card declined")


if __name__ == "__main__":
    unittest.main()
