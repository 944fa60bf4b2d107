"""How a ``kg-fuse`` command line is read and how it ends: the argument parser (errors in
one line with a hint, help that keeps paths whole) and the one place that turns a
command's failures into one line on stderr and an exit code from :mod:`kg_fuse.exits`
(``KG_FUSE_DEBUG=1`` shows the traceback of an unexpected error). Used by ``kg-fuse``
(:mod:`kg_fuse.cli`), which only registers each folder's commands.

Each folder declares its commands as data (:class:`Command`, :func:`option`) and adds them
with :func:`add_commands`, so a command's name, help, options and handler stand in one row.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from kg_fuse import exits, version
from kg_fuse.exits import CommandError, UsageError

#: The server extra's packages (the model's weights are not one: a missing model says
#: how to install it, see kg_fuse.server.embedding.models)
SERVER_MODULES = ("fastapi", "uvicorn", "numpy", "onnxruntime", "tokenizers", "onnx",
                  "safetensors", "multipart")


class HelpFormatter(argparse.HelpFormatter):
    """Paragraphs wrapped (a paragraph with line breaks kept as written); option help
    broken at spaces only; every option's help ends with its default, if it has one
    (unless it says "(default: ...)" itself)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n\n".join(
            paragraph if "\n" in paragraph else textwrap.fill(
                paragraph, width, initial_indent=indent, subsequent_indent=indent)
            for paragraph in text.split("\n\n"))

    def _split_lines(self, text: str, width: int) -> list[str]:
        """Lines broken at spaces only, so a path or option shown stays whole (pastable)."""
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False,
                             break_long_words=False)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (action.option_strings and "(default" not in text and text != argparse.SUPPRESS
                and default not in (None, False, [], argparse.SUPPRESS)):
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line with a hint, exit code 2."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {message} (hint: {self.prog} --help)", file=sys.stderr)
        raise SystemExit(exits.USAGE)


class VersionAction(argparse.Action):
    """``--version``, reading the version only when asked for it."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 help: str = "show the version and exit") -> None:  # noqa: A002 - argparse's name
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser, namespace, values, option_string=None) -> NoReturn:  # type: ignore[no-untyped-def]
        print(f"kg-fuse {version()}")
        raise SystemExit(0)


@dataclass(frozen=True)
class Option:
    """One ``add_argument`` call: its flags (or positional name) and keywords."""

    flags: tuple[str, ...]
    settings: dict[str, Any]


def option(*flags: str, **settings: Any) -> Option:
    return Option(flags, settings)


@dataclass(frozen=True)
class Command:
    """A subcommand: what ``--help`` says, its options, and the function that runs it
    (``handler``), or its own sub-commands (``actions``, named ``ACTION``). The
    description is prose, written as it reads: its line breaks and indents are folded."""

    name: str
    help: str
    description: str
    options: Sequence[Option] = ()
    handler: Callable[[argparse.Namespace], int] | None = None
    actions: Sequence[Command] = field(default_factory=tuple)


def add_commands(subparsers: argparse._SubParsersAction, commands: Sequence[Command],
                 prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Add each command (and its actions) to ``subparsers``; returns the parsers made, by
    their command line (``"server start"``)."""
    made: dict[str, argparse.ArgumentParser] = {}
    for command in commands:
        parser = subparsers.add_parser(command.name, help=command.help,
                                       description=" ".join(command.description.split()))
        for opt in command.options:
            parser.add_argument(*opt.flags, **opt.settings)
        if command.handler is not None:
            parser.set_defaults(func=command.handler)
        made[prefix + command.name] = parser
        if command.actions:
            actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION",
                                            title="actions")
            made |= add_commands(actions, command.actions, prefix=f"{command.name} ")
    return made


def forwarded_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """A parser's options (not ``--help``), for a command that passes them on."""
    return [a for a in parser._actions if a.option_strings and a.dest != "help"]


def absolute_paths(args: argparse.Namespace) -> None:
    """Make every path argument of ``args`` absolute (symlinks and ``..`` resolved), in
    place, so a daemon can leave its caller's working directory and still find them."""
    for name, value in vars(args).items():
        if isinstance(value, Path):
            setattr(args, name, value.resolve())
        elif isinstance(value, list) and value and all(isinstance(v, Path) for v in value):
            setattr(args, name, [v.resolve() for v in value])


def leave_working_directory() -> None:
    """Run in ``/``: a daemon whose working directory is inside a mount keeps that mount
    busy, and the caller's ``kg-fuse unmount`` fails. Call after :func:`absolute_paths`."""
    os.chdir("/")


def check_client_pair(client_id: str | None, secret_file: object) -> None:
    """Refuse ``--client-id`` without ``--client-secret-file``, and the reverse: one
    alone used to be ignored, and other credentials taken without a word."""
    if bool(client_id) != bool(secret_file):
        given, missing = (("--client-id", "--client-secret-file") if client_id
                          else ("--client-secret-file", "--client-id"))
        raise UsageError(f"{given} needs {missing}: a client is its id and its secret",
                         hint=f"add {missing}, or drop {given} to use the credentials "
                              "kg-fuse finds by itself")


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextlib.contextmanager
def interrupted_by_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP (``kill``, a closed terminal) end the block as Ctrl-C does, so
    a command's clean-up runs (a half-made copy removed, a server it was starting
    stopped) instead of the process vanishing with its work half done."""
    previous = {number: signal.signal(number, _interrupt)
                for number in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _server_missing(exc: ModuleNotFoundError) -> bool:
    return (exc.name or "").split(".")[0] in SERVER_MODULES


def run(build_parser: Callable[[], argparse.ArgumentParser],
        argv: list[str] | None = None) -> int:
    """Parse ``argv`` with the parser ``build_parser`` makes, run the command it names,
    and turn whatever it raises into one line on stderr and the exit code."""
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args) or 0)
    except CommandError as exc:
        print(f"kg-fuse: {exc.line()}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("kg-fuse: interrupted", file=sys.stderr)
        return exits.INTERRUPTED
    except ModuleNotFoundError as exc:
        if not _server_missing(exc):
            return _unexpected(exc)
        print(f"kg-fuse: the embedded server is not installed (missing {exc.name}) "
              f"(hint: {exits.install_hint('server')})", file=sys.stderr)
        return exits.NOT_INSTALLED
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        print(f"kg-fuse: {exc.strerror or exc}{where}", file=sys.stderr)
        return exits.FAILED
    except Exception as exc:  # noqa: BLE001 - the last line of defence: no tracebacks
        return _unexpected(exc)


def _unexpected(exc: BaseException) -> int:
    if os.environ.get("KG_FUSE_DEBUG"):
        raise exc
    text = " ".join(str(exc).split()) or "no details"
    print(f"kg-fuse: unexpected error: {type(exc).__name__}: {text} "
          "(hint: rerun with KG_FUSE_DEBUG=1 for the traceback)", file=sys.stderr)
    return exits.FAILED
