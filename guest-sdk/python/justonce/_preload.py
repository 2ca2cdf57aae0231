"""The modules a tool imports where it uses them, imported while it is built.

componentize-py builds a component by importing the app once and saving the
interpreter as it is then: the component has no file system, so a module that was not
imported by then cannot be imported while the tool runs. `import csv` inside a
function, or `importlib.import_module("decimal")`, would raise `ModuleNotFoundError`
at run time while the same import at the top of the module works.

`export` (run at the top of the app's module, while it is built) therefore reads the
source of the tool's own modules (every loaded module outside the standard library
and `site-packages`), and imports each module named there: in an `import` or `from …
import` statement anywhere, or as a string literal given to `importlib.import_module`
or `__import__`. A module imported so is read in turn. One that cannot be imported at
build time is left out: it raises `ModuleNotFoundError` where it is imported, as it
would in CPython.
"""

import ast
import importlib
import os
import sys
import sysconfig
from typing import Iterable, List, Optional

# Modules the standard library imports only once something is used (from C or from
# inside a function), for each module that needs them: `socket`'s host names are
# encoded with the `idna` codec, `strptime` imports `_strptime`.
LAZY = {
    "socket": ("encodings.idna",),
    "datetime": ("_strptime",),
    "time": ("_strptime",),
}

# The calls whose first argument, a string literal, names a module to import.
_IMPORT_CALLS = {"import_module", "__import__"}


def _absolute(module: Optional[str], level: int, package: Optional[str]) -> Optional[str]:
    """The absolute name of `from {'.' * level}{module} import …` in `package`."""
    if not level:
        return module
    if not package:
        return None
    parts = package.split(".")
    if level - 1 > len(parts) - 1:
        return None
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{module}" if module else base


def imported_names(source: str, package: Optional[str] = None) -> List[str]:
    """Every module `source` names for import, in order, once each: `import a.b`,
    `from a import b` (`a`, and `a.b` in case it is a submodule), relative imports
    resolved in `package`, and `importlib.import_module("a")` / `__import__("a")`
    with a string literal."""
    names: List[str] = []

    def add(name: Optional[str]) -> None:
        if name and name not in names:
            names.append(name)

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package)
            add(base)
            if base:
                for alias in node.names:
                    if alias.name != "*":
                        add(f"{base}.{alias.name}")
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            first = node.args[0]
            if (
                called in _IMPORT_CALLS
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
            ):
                add(first.value)
    return names


def _library_dirs() -> List[str]:
    """The standard library's and `site-packages`' directories: not the tool's own."""
    # `os` may be frozen into the interpreter with a path of its build; `ast` is read
    # from the library itself.
    dirs = {os.path.dirname(m.__file__) for m in (ast, os) if getattr(m, "__file__", None)}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            dirs.add(sysconfig.get_path(key))
        except (KeyError, ValueError):
            pass
    return [d for d in dirs if d]


def _is_own(path: str, library: Iterable[str]) -> bool:
    if not path.endswith(".py"):
        return False
    parts = path.replace("\\", "/").split("/")
    if "site-packages" in parts or "dist-packages" in parts:
        return False
    return not any(path.startswith(d.rstrip("/") + "/") for d in library)


def _try_import(name: str) -> None:
    if name in sys.modules:
        return
    try:
        importlib.import_module(name)
    except Exception:  # noqa: BLE001 - left out: it raises where the tool imports it
        pass
    except SystemExit:
        pass


def preload(library: Optional[List[str]] = None) -> List[str]:
    """Imports every module the tool's own modules name (see the module's doc), and
    what the standard library imports lazily for the modules then loaded; returns the
    source files read."""
    library = _library_dirs() if library is None else library
    read: List[str] = []
    while True:
        pending = []
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if isinstance(path, str) and path not in read and _is_own(path, library):
                pending.append((module, path))
        if not pending:
            break
        for module, path in pending:
            read.append(path)
            try:
                with open(path, encoding="utf-8") as f:
                    source = f.read()
                package = getattr(module, "__package__", None)
                names = imported_names(source, package)
            except (OSError, SyntaxError, ValueError):
                continue
            for name in names:
                _try_import(name)
    for loaded, needs in LAZY.items():
        if loaded in sys.modules:
            for name in needs:
                _try_import(name)
    return read
