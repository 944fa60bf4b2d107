"""Command-line failures and the exit codes they map to, in one place.

Commands raise :class:`CommandError` (or :class:`UsageError`); ``kg-fuse``'s ``main``
turns them into one line on stderr, ``kg-fuse: MESSAGE (hint: HINT)``, and the exit code.
"""

from __future__ import annotations

import shlex
import sys

OK = 0
FAILED = 1  # the command ran and did not succeed: not mounted, no server, mount failed
USAGE = 2  # the command line or its input is wrong: unknown option, not a directory
NOT_INSTALLED = 3  # the command needs the server extra (install_hint("server"))
INTERRUPTED = 130  # Ctrl-C

EXIT_CODES_HELP = (
    "exit codes: 0 success; 1 the command failed (not mounted, no server, mount failed); "
    "2 bad command line or input; 3 the embedded server is not installed; 130 interrupted"
)


class CommandError(Exception):
    """A failure a user can act on: one line, an optional hint, an exit code."""

    code = FAILED

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def line(self) -> str:
        return self.message if self.hint is None else f"{self.message} (hint: {self.hint})"


class UsageError(CommandError):
    code = USAGE


class Interrupted(CommandError):
    """Ctrl-C or kill, with what the command undid on the way out."""

    code = INTERRUPTED


def install_hint(extra: str) -> str:
    """How to add an extra, with the interpreter this kg-fuse runs in. From a checkout:
    the registry's ``kg-fuse`` is another program (the platform's own client)."""
    return f"in a kg-fuse checkout: {shlex.quote(sys.executable)} -m pip install '.[{extra}]'"
