"""What the agent is told of an exception other than `ToolError` (the Python SDK's
`_uncaught`), on an ordinary interpreter: its type, its text and where it was raised,
between the lines the host looks for on stderr."""

import contextlib
import io
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from justonce import _uncaught  # noqa: E402


def _raised(make):
    try:
        make()
    except Exception as e:  # noqa: BLE001 - the test wants whatever was raised
        return e
    raise AssertionError("nothing was raised")


def _bad_amount():
    raise ValueError("bad amount")


class DescribeTest(unittest.TestCase):
    def test_the_type_and_text_come_first_then_where(self):
        described = _uncaught.describe(_raised(_bad_amount))
        first, where = described.split("\n")
        self.assertEqual(first, "ValueError: bad amount")
        self.assertRegex(where, r"^  at .*test_uncaught\.py:\d+ in _bad_amount$")

    def test_a_module_exception_keeps_its_module(self):
        import json

        described = _uncaught.describe(_raised(lambda: json.loads("{")))
        self.assertTrue(described.startswith("json.decoder.JSONDecodeError: "), described)

    def test_where_is_the_tools_own_line_not_the_import_machinery(self):
        import importlib

        described = _uncaught.describe(
            _raised(lambda: importlib.import_module("no_such_module_anywhere"))
        )
        first, where = described.split("\n")
        self.assertEqual(first, "ModuleNotFoundError: No module named 'no_such_module_anywhere'")
        self.assertRegex(where, r"^  at .*test_uncaught\.py:\d+ in <lambda>$")

    def test_a_socket_failure_names_the_http_provider(self):
        import socket

        def connect():
            # An address no name lookup answers, so nothing is sent anywhere.
            socket.create_connection(("name.invalid", 9), timeout=0.01)

        described = _uncaught.describe(_raised(connect))
        self.assertIn("`http` provider", described.splitlines()[-1])
        self.assertNotIn("`http` provider", _uncaught.describe(_raised(_bad_amount)))

    def test_a_long_text_is_cut(self):
        described = _uncaught.describe(_raised(lambda: _fail("x" * 10_000)))
        self.assertLessEqual(len(described), _uncaught.REPORT_CHARS + 1)

    def test_the_report_goes_to_stderr_between_the_hosts_lines(self):
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            described = _uncaught.report(_raised(_bad_amount))
        written = stderr.getvalue()
        start = written.index(_uncaught.UNCAUGHT_START) + len(_uncaught.UNCAUGHT_START)
        end = written.index(_uncaught.UNCAUGHT_END)
        self.assertEqual(written[start:end].strip(), described)


def _fail(text):
    raise RuntimeError(text)


if __name__ == "__main__":
    unittest.main()
