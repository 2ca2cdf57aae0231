"""Diagnostics for the host's log.

Logging is not an effect: it is not journaled, and a replayed call logs nothing.
"""


# Imported with the SDK, so a component can write a line even where nothing else
# imported the bindings while it was built (see `progress` below): the report of an
# uncaught exception among them. Outside a component (unit tests) there are none.
try:
    from wit_world.imports import log as _log_wit
except ImportError:
    _log_wit = None


def _write(level: str, message: str) -> None:
    wit = _log_wit
    if wit is None:
        from wit_world.imports import log as wit

    wit.write(getattr(wit.Level, level), str(message))


def trace(message: str) -> None:
    """Writes a very detailed tracing line."""
    _write("TRACE", message)


def debug(message: str) -> None:
    """Writes a line useful when debugging the tool."""
    _write("DEBUG", message)


def info(message: str) -> None:
    """Writes a line about normal progress."""
    _write("INFO", message)


def warn(message: str) -> None:
    """Writes a line about something unexpected that the tool recovered from."""
    _write("WARN", message)


def error(message: str) -> None:
    """Writes a line about a failure."""
    _write("ERROR", message)


# A component built by componentize-py can import at run time only the modules it
# imported while it was built (its snapshot; the sandbox gives it no files to read
# them from), so the bindings of `progress`, which nothing else imports, are imported
# here, with the SDK. Outside a component (unit tests) there are none.
try:
    from wit_world.imports import progress as _progress_wit
except ImportError:
    _progress_wit = None


def progress(done: float, total: "float | None" = None, message: "str | None" = None) -> None:
    """Reports that `done` of `total` (if known) is done, and what is happening, to a
    client that asked to hear (MCP's `notifications/progress`). Each report's `done`
    should be larger than the last; the host drops one that is not. Not an effect:
    not journaled, and a replayed call reports nothing."""
    wit = _progress_wit
    if wit is None:
        from wit_world.imports import progress as wit

    wit.report(float(done), None if total is None else float(total), message)
