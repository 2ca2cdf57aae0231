"""What the agent is told of an exception other than `ToolError` that escapes a tool.

Such an exception is a bug in the tool, as a panic is in Rust: the call ends as a
`panic` trap whose message says what was raised (`ValueError: bad amount`) and where,
and the whole traceback goes to the host's log at `error`. componentize-py says only
that "Python function threw an unexpected exception" when it traps, so the report
goes to stderr first, between the lines the host looks for
(host/src/runtime/panic_message.rs); the host reads the last 4 KiB of stderr.
"""

import sys
import traceback

UNCAUGHT_START = "justonce: uncaught exception:"
UNCAUGHT_END = "justonce: end of report"
# The report's size, within what the host reads.
REPORT_CHARS = 2000


def describe(e: BaseException) -> str:
    """`ValueError: bad amount`, then where it was raised (the innermost frame)."""
    head = "".join(traceback.format_exception_only(type(e), e)).strip()
    frames = traceback.extract_tb(e.__traceback__)
    if frames:
        frame = frames[-1]
        head += f"\n  at {frame.filename}:{frame.lineno} in {frame.name}"
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
