"""Which modules a tool's source names for import (the Python SDK's `_preload`), and
that `preload` imports them, on an ordinary interpreter."""

import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from justonce import _preload  # noqa: E402


class ImportedNamesTest(unittest.TestCase):
    def test_imports_anywhere_and_import_module_literals_are_named(self):
        source = textwrap.dedent(
            """
            import json
            def f(name):
                import csv, xml.dom
                from decimal import Decimal
                import importlib
                importlib.import_module("fractions")
                __import__("statistics")
                importlib.import_module(name)  # not a literal: not known at build
                from typing import *
            """
        )
        self.assertEqual(
            _preload.imported_names(source),
            [
                "json",
                "csv",
                "xml.dom",
                "decimal",
                "decimal.Decimal",
                "importlib",
                "typing",
                "fractions",
                "statistics",
            ],
        )

    def test_relative_imports_are_resolved_in_the_package(self):
        source = "def f():\n    from . import helpers\n    from ..util import clean\n"
        self.assertEqual(
            _preload.imported_names(source, "tool.sub"),
            ["tool.sub", "tool.sub.helpers", "tool.util", "tool.util.clean"],
        )
        self.assertEqual(_preload.imported_names("from . import x\n", None), [])


class PreloadTest(unittest.TestCase):
    def test_a_module_imported_inside_a_function_is_imported_and_read_in_turn(self):
        with tempfile.TemporaryDirectory() as d:
            Path(d, "pre_app.py").write_text(
                "def call():\n    import pre_helper\n    return pre_helper.VALUE\n"
            )
            Path(d, "pre_helper.py").write_text(
                "VALUE = 1\ndef later():\n    import pre_leaf\n"
            )
            Path(d, "pre_leaf.py").write_text("LEAF = True\n")
            Path(d, "pre_never.py").write_text("raise RuntimeError('not imported')\n")
            sys.path.insert(0, d)
            try:
                import pre_app  # noqa: F401

                self.assertNotIn("pre_helper", sys.modules)
                read = _preload.preload()
                self.assertIn("pre_helper", sys.modules)
                self.assertIn("pre_leaf", sys.modules)
                self.assertNotIn("pre_never", sys.modules)
                self.assertIn(str(Path(d, "pre_leaf.py")), read)
                # The standard library is not read: only the tool's own modules are.
                self.assertFalse(any(p.endswith("/json/__init__.py") for p in read), read)
            finally:
                sys.path.remove(d)
                for name in ("pre_app", "pre_helper", "pre_leaf"):
                    sys.modules.pop(name, None)

    def test_a_module_that_cannot_be_imported_is_left_to_fail_where_it_is_imported(self):
        with tempfile.TemporaryDirectory() as d:
            Path(d, "pre_missing.py").write_text(
                "def call():\n    import no_such_module_anywhere\n"
            )
            sys.path.insert(0, d)
            try:
                import pre_missing  # noqa: F401

                _preload.preload()
                self.assertNotIn("no_such_module_anywhere", sys.modules)
            finally:
                sys.path.remove(d)
                sys.modules.pop("pre_missing", None)

    def test_what_the_standard_library_imports_lazily_comes_with_its_module(self):
        import socket  # noqa: F401

        _preload.preload()
        self.assertIn("encodings.idna", sys.modules)


if __name__ == "__main__":
    unittest.main()
