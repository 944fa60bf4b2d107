"""The command line as a user meets it: help that explains, one-line errors, no traceback."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

import pytest

from kg_fuse import exits
from kg_fuse.cli import build_parser


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kg_fuse.cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


BAD_INVOCATIONS = [
    ([], exits.USAGE, "required"),
    (["frobnicate"], exits.USAGE, "invalid choice"),
    (["--bogus"], exits.USAGE, "required"),
    (["status", "empty", "--bogus"], exits.USAGE, "unrecognized"),
    (["mount"], exits.USAGE, "mountpoint"),
    (["mount", "nowhere"], exits.USAGE, "does not exist"),
    (["mount", "file.txt"], exits.USAGE, "not a directory"),
    (["mount", "full"], exits.USAGE, "--nonempty"),
    (["mount", "--timeout", "soon", "empty"], exits.USAGE, "invalid float"),
    (["mount", "empty", "--client-secret-file", "missing-secret"], exits.USAGE, "secret"),
    (["mount", "empty", "--client-id", "me", "--client-secret-file", "missing-secret"],
     exits.USAGE, "cannot read the client secret"),
    (["mount", "empty"], exits.FAILED, "no client credentials"),  # no server ever started
    (["mount", "--data-dir", "empty", "empty"], exits.FAILED, "no server has run on"),
    (["eval"], exits.FAILED, "no client credentials"),
    (["eval", "--limit", "0"], exits.USAGE, "--limit 0"),
    (["eval", "--set", "no-such-set"], exits.USAGE, "no-such-set"),
    (["eval", "--client-id", "me"], exits.USAGE, "--client-id needs --client-secret-file"),
    (["unmount"], exits.USAGE, "mountpoint"),
    (["unmount", "empty"], exits.FAILED, "not mounted"),
    (["serve", "--port", "99999"], exits.USAGE, "not a TCP port"),
    (["serve", "--port", "eighty"], exits.USAGE, "not a TCP port"),
    (["serve", "--host", "0.0.0.0"], exits.USAGE, "--allow-remote"),
    (["serve", "--corpus", "everything"], exits.USAGE, "invalid choice"),
    (["index", "--ingest", "nowhere"], exits.USAGE, "not a directory"),
    (["index", "--corpus", "stdlib", "--modules", "zlib"], exits.USAGE, "zlib"),
    (["calibrate"], exits.FAILED, "kg-fuse index"),
    (["calibrate", "--show"], exits.FAILED, "kg-fuse index"),
    (["server"], exits.USAGE, "required"),
    (["server", "restart"], exits.USAGE, "invalid choice"),
    (["server", "start", "--wait", "x"], exits.USAGE, "invalid float"),
    (["systemd", "install", "--no-server"], exits.USAGE, "--mount"),
    (["systemd", "install", "--mount", "file.txt"], exits.USAGE, "not a directory"),
]


@pytest.mark.parametrize(("args", "code", "says"), BAD_INVOCATIONS,
                         ids=[" ".join(a) or "(nothing)" for a, _, _ in BAD_INVOCATIONS])
def test_bad_invocation_is_one_line_with_an_exit_code(
        home: tuple[dict[str, str], Path], args: list[str], code: int | None,
        says: str) -> None:
    env, cwd = home
    result = run(args, env, cwd)
    assert "Traceback" not in result.stderr + result.stdout
    assert result.returncode != 0
    if code is not None:
        assert result.returncode == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("kg-fuse"), lines
    assert says in lines[0], lines
    if code == exits.USAGE or args[:1] == ["eval"]:  # eval's too: the README's form
        assert "hint:" in lines[0]


def test_mounting_a_file_hints_a_directory(home: tuple[dict[str, str], Path]) -> None:
    """The hint for a file used to be ``mkdir -p FILE``, which fails: the file is there.
    The hint's command runs when pasted, and mounts."""
    env, cwd = home
    result = run(["mount", "file.txt"], env, cwd)
    assert result.returncode == exits.USAGE
    hint = result.stderr.split("(hint: ", 1)[1].rstrip().removesuffix(")")
    assert "mkdir -p" not in hint and str(cwd / "file.txt") + " " not in hint + " ", hint
    command = hint.split("e.g. ", 1)[1]
    made = subprocess.run(command.split(" && ")[0], shell=True, cwd=cwd, check=False)
    assert made.returncode == 0 and (cwd / "file.txt-mount").is_dir()


def test_status_of_a_missing_path_is_a_one_line_report(home: tuple[dict[str, str], Path]
                                                       ) -> None:
    env, cwd = home
    result = run(["status", "nowhere"], env, cwd)
    assert result.returncode == exits.FAILED
    assert "Traceback" not in result.stdout + result.stderr
    assert len((result.stdout + result.stderr).strip().splitlines()) == 1
    assert "not mounted" in result.stdout


def test_server_commands_without_a_server(home: tuple[dict[str, str], Path]) -> None:
    env, cwd = home
    status = run(["server", "status"], env, cwd)
    assert status.returncode == 1 and "no server is running" in status.stdout
    stop = run(["server", "stop"], env, cwd)  # idempotent: nothing to stop is not an error
    assert stop.returncode == 0 and "no server is running" in stop.stdout


def test_version(home: tuple[dict[str, str], Path]) -> None:
    result = run(["--version"], *home)
    assert result.returncode == 0
    assert result.stdout.startswith("kg-fuse 0.")


def _parsers(parser: argparse.ArgumentParser, name: str = "kg-fuse"
             ) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(name, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, subparser in action.choices.items():
                found += _parsers(subparser, f"{name} {sub}")
    return found


@pytest.mark.parametrize(("name", "parser"), _parsers(build_parser()),
                         ids=[n for n, _ in _parsers(build_parser())])
def test_every_command_and_option_explains_itself(name: str,
                                                  parser: argparse.ArgumentParser) -> None:
    assert parser.description and len(parser.description) > 30, name
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                assert choice.help, f"{name} {choice.dest}: no help"
            continue
        assert action.help, f"{name} {action.option_strings or action.dest}: no help"
    text = parser.format_help()
    for action in parser._actions:
        if action.option_strings and action.default not in (None, False, [],
                                                            argparse.SUPPRESS):
            shown = " ".join(text.split())
            assert f"default: {action.default}" in shown or \
                f"default {action.default}" in shown, \
                f"{name} {action.option_strings}: default not shown"


def test_help_runs_for_every_command(home: tuple[dict[str, str], Path]) -> None:
    env, cwd = home
    for name, _ in _parsers(build_parser()):
        result = run([*name.split()[1:], "--help"], env, cwd)
        assert result.returncode == 0, name
        assert "usage: " + name in result.stdout, name


def imported_after(code: str, packages: set[str]) -> list[str]:
    """Which of ``packages`` a fresh interpreter has imported once ``code`` ran."""
    probe = (f"{code}\nimport sys\n"
             f"print(sorted(set({sorted(packages)!r}) & {{m.split('.')[0] for m in sys.modules}}))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=120, check=True)
    return ast.literal_eval(result.stdout.strip().splitlines()[-1])


def test_the_filesystem_does_not_import_the_server_stack() -> None:
    """``pip install kg-fuse`` (no server extra) must be enough to mount and to get help."""
    code = ("import kg_fuse.cli, kg_fuse.fs.mount, kg_fuse.fs.handlers.operations\n"
            "import kg_fuse.systemd\n"
            "kg_fuse.cli.build_parser().format_help()")
    heavy = {"fastapi", "uvicorn", "numpy", "torch", "onnxruntime", "sentence_transformers"}
    assert imported_after(code, heavy) == []


def test_help_and_version_start_without_the_client_stack() -> None:
    """``kg-fuse --help`` and argument errors answer at once: building the
    parser imports neither the HTTP client, trio, pyfuse3 nor the package metadata (together
    they took 0.45 s of every command's start)."""
    code = (
        "import contextlib, io\n"
        "import kg_fuse.cli\n"
        "parser = kg_fuse.cli.build_parser()\n"
        "for argv in (['--help'], ['eval', '--help'], ['mount', '--help'], ['status']):\n"
        "    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "        parser.parse_args(argv)"
    )
    assert imported_after(code, {"httpx", "trio", "pyfuse3", "email"}) == []


def test_server_command_without_the_server_extra(home: tuple[dict[str, str], Path]) -> None:
    """Simulate a filesystem-only install: the server's packages cannot be imported."""
    env, cwd = home
    blocker = cwd / "blocker"
    blocker.mkdir()
    for module in ("fastapi", "uvicorn", "numpy", "onnxruntime", "tokenizers", "torch"):
        (blocker / f"{module}.py").write_text(
            f"raise ModuleNotFoundError('No module named {module}', name='{module}')\n")
    env = {**env, "PYTHONPATH": str(blocker)}
    result = run(["index"], env, cwd)
    assert result.returncode == exits.NOT_INSTALLED, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert f"{sys.executable} -m pip install '.[server]'" in last  # this interpreter's pip
