"""Errors that ctxscope reports to a person as one line."""

from __future__ import annotations


class UserError(Exception):
    """An expected problem with the user's input or configuration.

    The CLI prints ``str(error)`` as one line (no traceback) and exits 1.
    The message says what is wrong, where (``file:line``) and what to do.
    """


class InputError(UserError):
    """Malformed input at a place in a file."""

    def __init__(self, path: str, message: str, line: int | None = None) -> None:
        self.path = path
        self.line = line
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")
