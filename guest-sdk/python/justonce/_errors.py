from typing import Any


class ToolError(Exception):
    """A failure the tool reports to the agent: raise it from the tool.

    It is an outcome like a success: the host saves it and replays it to any retry of
    the same call. Raise it for anything the agent should read and act on; any other
    exception is a bug, and ends the call as a trap.
    """

    def __init__(self, code: str, message: str, details: Any = None):
        super().__init__(f"{code}: {message}")
        #: A short machine-readable code in `snake_case`, such as `payment_declined`.
        self.code = code
        #: A sentence for the agent that says what went wrong.
        self.message = message
        #: Optional structured details (JSON data), sent to the agent.
        self.details = details
