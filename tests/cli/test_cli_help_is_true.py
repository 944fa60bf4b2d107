"""What ``--help`` says is what happens: the defaults shown are the ones taken (and work
when passed), ``server start`` takes ``serve``'s options, and a mount whose credentials
the server rejects fails at mount time, saying so, with its log where the help says."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kg_fuse import exits
from kg_fuse.cli import build_parser
from kg_fuse.server.corpus.stdlib import SMALL_TEST_MODULES
from tests.cli.test_cli_errors import _parsers, run
from tests.helpers.mount import fuse_available
from tests.helpers.server import free_port
from tests.helpers.store import OFFLINE_ENV, copy_store


def subparser(*names: str) -> argparse.ArgumentParser:
    found = dict(_parsers(build_parser()))
    return found[" ".join(("kg-fuse", *names))]


def option_help(parser: argparse.ArgumentParser, flag: str) -> str:
    """One option's help as ``--help`` prints it, on one line."""
    action = next(a for a in parser._actions if flag in a.option_strings)
    return " ".join(parser._get_formatter()._expand_help(action).split())


def help_of(env: dict[str, str], cwd: Path, *command: str) -> str:
    """The options part of ``kg-fuse COMMAND --help`` as that user sees it, on one line."""
    shown = run([*command, "--help"], env, cwd)
    assert shown.returncode == 0, shown.stderr
    return " ".join(shown.stdout.split("options:", 1)[1].split())


@pytest.mark.parametrize(("name", "parser"), _parsers(build_parser()),
                         ids=[n for n, _ in _parsers(build_parser())])
def test_every_option_with_a_default_shows_it_in_its_own_help(
        name: str, parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if (not action.option_strings or action.help == argparse.SUPPRESS
                or action.default in (None, False, [], argparse.SUPPRESS)):
            continue
        text = option_help(parser, action.option_strings[0])
        assert re.search(rf"\(default:? {re.escape(str(action.default))}[);]", text), \
            f"{name} {action.option_strings}: {text}"


def test_the_data_dir_shown_as_default_is_the_one_used(
        home: tuple[dict[str, str], Path], small_store: Path) -> None:
    env, cwd = home
    env = {**env, **OFFLINE_ENV}
    copy_store(small_store, Path(env["XDG_DATA_HOME"]) / "kg-fuse/server/kg.sqlite3")
    plain = run(["calibrate", "--show"], env, cwd)
    assert plain.returncode == 0, plain.stderr
    for command in (("calibrate",), ("server", "status"), ("server", "stop"),
                    ("server", "start"), ("serve",), ("index",)):
        found = re.search(r"--data-dir DIR [^(]*\(default: ([^)]*)\)",
                          help_of(env, cwd, *command))
        assert found, f"{command}: --data-dir shows no default"
        shown = found.group(1)
        assert shown == str(Path(env["XDG_DATA_HOME"]) / "kg-fuse"), (command, shown)
    passed = run(["calibrate", "--show", "--data-dir", shown], env, cwd)
    assert passed.returncode == 0, passed.stderr
    assert passed.stdout == plain.stdout


def test_server_start_takes_every_option_of_serve() -> None:
    def options(parser: argparse.ArgumentParser) -> set[str]:
        return {flag for action in parser._actions for flag in action.option_strings}

    missing = options(subparser("serve")) - options(subparser("server", "start"))
    assert missing == set()


@pytest.mark.timeout(300)
def test_server_start_with_a_log_file_logs_there(
        home: tuple[dict[str, str], Path], small_store: Path) -> None:
    env, cwd = home
    env = {**env, **OFFLINE_ENV}
    copy_store(small_store, Path(env["XDG_DATA_HOME"]) / "kg-fuse/server/kg.sqlite3")
    log_file = cwd / "logs" / "my-server.log"
    started = run(["server", "start", "--port", str(free_port()), "--log-file",
                   "logs/my-server.log", "--modules", ",".join(SMALL_TEST_MODULES)], env, cwd)
    try:
        assert started.returncode == 0, started.stderr
        assert f"log {log_file}" in started.stdout, started.stdout
        assert "serving" in log_file.read_text()
        status = run(["server", "status"], env, cwd)
        assert f"log {log_file}" in status.stdout, status.stdout
        default_log = Path(env["XDG_DATA_HOME"]) / "kg-fuse/server/server.log"
        assert not default_log.exists()
    finally:
        stopped = run(["server", "stop"], env, cwd)
    assert stopped.returncode == 0 and "stopped the server" in stopped.stdout, stopped


@pytest.mark.mount
@pytest.mark.timeout(120)
@pytest.mark.skipif(not fuse_available(), reason="needs /dev/fuse")
@pytest.mark.parametrize("wrong", ["secret", "client id"])
def test_a_mount_with_rejected_credentials_fails_at_mount_time_with_the_reason(
        home: tuple[dict[str, str], Path], kg_server: Any, wrong: str) -> None:
    env, cwd = home
    secret = cwd / "secret"
    user = kg_server.user
    secret.write_text("not the secret" if wrong == "secret" else user["client_secret"])
    client_id = user["client_id"] if wrong == "secret" else "kgfuse-user-nobody"
    mountpoint = cwd / "empty"
    try:
        result = run(["mount", "empty", "--api-url", kg_server.api_url, "--client-id",
                      client_id, "--client-secret-file", str(secret)], env, cwd)
        assert not os.path.ismount(mountpoint)
    finally:
        if os.path.ismount(mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], check=False)
    assert result.returncode == exits.FAILED, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "rejected the credentials" in lines[0] and client_id in lines[0], lines[0]
    assert "--client-secret-file" in lines[0]  # the hint says what to check
    # the log it points to is where mount --help says a background mount logs
    pointed = re.search(r"see (\S+kg-fuse\.log)", lines[0])
    assert pointed, lines[0]
    log_file = Path(pointed.group(1))
    assert "rejected the credentials" in log_file.read_text()
    named = re.search(r"--log-file LOG_FILE [^(]*\(default: [^)]* under (\S+)\)",
                      help_of(env, cwd, "mount"))
    assert named and named.group(1) == str(Path(env["XDG_DATA_HOME"]) / "kg-fuse/mounts")
    assert log_file.is_relative_to(named.group(1))


@pytest.mark.parametrize("command", [("serve",), ("server", "start"), ("index",)])
def test_model_help_names_the_store_s_model_as_the_default(command: tuple[str, ...]) -> None:
    """Without --model a server or index uses the model that embedded the store (a store
    of the int8 model serves with it: tests/cli/test_printed_commands_run.py); the help
    used to say "(default: all-MiniLM-L6-v2)" whatever the store."""
    text = option_help(subparser(*command), "--model")
    assert "default: all-MiniLM-L6-v2)" not in text, text
    assert "default: the model that embedded the store" in text, text
