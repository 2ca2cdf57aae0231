"""A module of the probe that only a function imports (op `imports`)."""

import textwrap


def shout(message: str) -> str:
    return textwrap.shorten(message.upper(), width=40)
