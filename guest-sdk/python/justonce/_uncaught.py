"""What the agent is told of an exception other than `ToolError` that escapes a tool.

Such an exception is a bug in the tool, as a panic is in Rust: the call ends as a
`panic` trap whose message says what was raised (`ValueError: bad amount`) and where,
and the whole traceback goes to the host's log at `error`. componentize-py says only
that "Python function threw an unexpected exception" when it traps, so the report
goes to stderr first, between the lines the host looks for
(host/src/runtime/panic_message.rs); the host reads the last 4 KiB of stderr.
"""

import os
import sys
import traceback
from typing import Optional

UNCAUGHT_START = "justonce: uncaught exception:"
UNCAUGHT_END = "justonce: end of report"
# The report's size, within what the host reads.
REPORT_CHARS = 2000


# Said of an exception raised inside `socket`: a tool has no sockets.
NO_SOCKETS = (
    "a tool has no sockets: reach the network through the host's `http` provider "
    "(`justonce.http`: http.get(url), http.post(service=…, path=…, json=…)), which "
    "keys and journals each request"
)


def _library_dirs() -> tuple:
    """The standard library's directory, as its modules' files name it (`os` may be
    frozen into the interpreter with a path of the build's; `traceback` is read from
    the library itself)."""
    return tuple({os.path.dirname(m.__file__) + os.sep for m in (traceback, os) if getattr(m, "__file__", None)})


def _where(frames: list) -> Optional[traceback.FrameSummary]:
    """The innermost frame of the tool's own code (not the standard library's, not
    Python's frozen import machinery), or the innermost one if there is none."""
    skipped = ("<",) + _library_dirs()
    for frame in reversed(frames):
        if not frame.filename.startswith(skipped):
            return frame
    return frames[-1] if frames else None


def _in_socket(frames: list) -> bool:
    return any(os.path.basename(frame.filename) == "socket.py" for frame in frames)


def describe(e: BaseException) -> str:
    """`ValueError: bad amount`, then where the tool raised it (its innermost frame
    outside the standard library), and what to use instead of a socket."""
    head = "".join(traceback.format_exception_only(type(e), e)).strip()
    frames = traceback.extract_tb(e.__traceback__)
    frame = _where(frames)
    if frame is not None:
        head += f"\n  at {frame.filename}:{frame.lineno} in {frame.name}"
    if _in_socket(frames):
        head += f"\n  {NO_SOCKETS}"
    if len(head) > REPORT_CHARS:
        head = head[:REPORT_CHARS] + "…"
    return head


def report(e: BaseException) -> str:
    """Logs `e`'s traceback at `error` and prints its report to stderr; returns it."""
    described = describe(e)
    try:
        from . import log

        trace = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        log.error(f"the tool raised an uncaught exception:\n{trace}")
    except Exception:  # noqa: BLE001 - the log is for the author; the report is what the agent needs
        pass
    print(f"\n{UNCAUGHT_START}\n{described}\n{UNCAUGHT_END}", file=sys.stderr, flush=True)
    return described


class UncaughtException(Exception):
    """Raised out of `call` after the report, short so that componentize-py's own
    traceback of it does not push the report out of what the host reads."""
