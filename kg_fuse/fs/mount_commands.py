"""The client's commands: ``mount`` and ``status``, and unmounting (the ``unmount``
command, which may stop the server too, is :mod:`kg_fuse.unmount`)."""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import logging
import math
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from kg_fuse import owner_only, paths
from kg_fuse.console import (
    Command,
    absolute_paths,
    add_commands,
    check_client_pair,
    forwarded_options,
    leave_working_directory,
    option,
)
from kg_fuse.exits import CommandError, UsageError
from kg_fuse.fs.kernel import mounts
from kg_fuse.fs.kernel.mounts import MountEntry

if TYPE_CHECKING:
    from kg_fuse.client.credentials import Connection
    from kg_fuse.fs.queries.saved import StoreCorrupt

log = logging.getLogger(__name__)

READY_TIMEOUT = 30.0
#: The mount's timings and their floors in seconds (0: any positive number): a poll or
#: refetch more often than 0.1 s would hammer the server, and a deadline under 0.1 s
#: fails every request; the ingest delay may be as short as you like, not 0.
TIMINGS = (("--poll-interval", 0.1), ("--max-age", 0.1), ("--timeout", 0.1),
           ("--probe-timeout", 0.1), ("--ingest-delay", 0.0))
_MOUNT_OPTIONS: list[argparse.Action] = []  # the mount command's options, to forward


def _commands() -> list[Command]:
    """``mount`` and ``status``, as data (built when the parser is, so the paths their
    help names follow the environment)."""
    return [
        Command(
            "mount", help="mount saved queries at MOUNTPOINT",
            description="""Mount the saved-query filesystem at MOUNTPOINT, an empty directory.
            Without --foreground it returns once the mount is ready (or failed, with the
            reason). Saved queries persist per mountpoint and per server: another server
            mounted there shows its own. Needs a server: 'kg-fuse server
            start' for the embedded one, or --api-url.""",
            handler=cmd_mount, options=[
                option("mountpoint", type=Path, help="an existing, empty directory"),
                option("--api-url", help="the API address (default: $KG_API_URL, else the "
                       "embedded server's)"),
                option("--data-dir", type=Path, metavar="DIR",
                       help="mount the embedded server started with this --data-dir, with "
                            "the credentials it wrote there (default: the server on "
                            f"{paths.data_dir()}); each server's saved queries are its own"),
                option("--client-id", help="OAuth client id (use with --client-secret-file)"),
                option("--client-secret-file", type=Path,
                       help="file holding the OAuth client secret (use with --client-id)"),
                option("--admin", action="store_true",
                       help="use the embedded server's admin client instead of the ordinary "
                            "one"),
                option("--foreground", "-f", action="store_true",
                       help="stay attached until unmounted or Ctrl-C (systemd uses this)"),
                option("--nonempty", action="store_true",
                       help="mount over a directory that holds files (they stay hidden, "
                            "untouched, until unmount)"),
                option("--poll-interval", type=float, default=5.0,
                       help="seconds between checks of the server's epoch and default "
                            "threshold, at least 0.1; a change refreshes listings"),
                option("--max-age", type=float, default=60.0,
                       help="refetch a listing at least this often, in seconds (at least 0.1)"),
                option("--timeout", type=float, default=5.0,
                       help="deadline of each HTTP request, in seconds (at least 0.1)"),
                option("--probe-timeout", type=float, default=2.0,
                       help="deadline of the creation-time probe, in seconds (at least 0.1)"),
                option("--ingest-delay", type=float, default=2.0,
                       help="seconds between closing a file in ingest/ and its upload, "
                            "during which rm cancels and mv redirects it"),
                option("--allow-ontology-delete", action="store_true",
                       help="let rmdir ontology/NAME delete the ontology on the server"),
                option("--allow-document-delete", action="store_true",
                       help="let rm ontology/NAME/documents/FILE delete the document on "
                            "the server"),
                option("--start-empty", action="store_true",
                       help="after a refusal to mount because the saved-query store was "
                            "unreadable: start with no saved queries (the unreadable file "
                            "stays where the refusal said)"),
                option("--restore-store", type=Path, metavar="FILE",
                       help="after such a refusal: make FILE (the repaired store) the "
                            "saved-query store again, then mount"),
                option("--log-file", type=Path, help="log here (default: stderr in the "
                       "foreground; otherwise kg-fuse.log in the mountpoint's own directory "
                       f"under {paths.data_dir() / 'mounts'})"),
                option("--debug", action="store_true", help="log at DEBUG level"),
            ]),
        Command(
            "status", help="say whether MOUNTPOINT is mounted and alive",
            description="""Print whether MOUNTPOINT is mounted, not mounted, or dead (its process
            ended); exit 0 only when mounted. Only kg-fuse's mounts count: another filesystem
            there is refused (exit 1). For the server: 'kg-fuse server status'.""",
            handler=cmd_status,
            options=[option("mountpoint", type=Path, help="the directory to check")]),
    ]


def register(subparsers: argparse._SubParsersAction, unmount: Command) -> None:
    """``mount``, ``unmount`` and ``status``, in that order; ``unmount`` is declared above
    the filesystem (:mod:`kg_fuse.unmount`), since it may stop the server too."""
    mount, status = _commands()
    parsers = add_commands(subparsers, [mount, unmount, status])
    _MOUNT_OPTIONS[:] = forwarded_options(parsers["mount"])


def _setup_logging(log_file: Path | None, debug: bool) -> None:
    handler: logging.Handler
    if log_file is not None:
        owner_only.create_dir(log_file.parent)
        os.close(owner_only.open_private(log_file))  # every search text: owner only
        handler = logging.FileHandler(log_file)
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)


def cmd_mount(args: argparse.Namespace) -> int:
    absolute_paths(args)  # the mount runs in /
    mountpoint = args.mountpoint
    _check_timings(args)
    _check_client_options(args)
    _check_mountpoint(mountpoint, args.nonempty,
                      _forwarded(args, exclude={"start_empty", "restore_store"}))
    connection = _connection(args)
    if not args.foreground:
        _settle_store(args, mountpoint, connection.api_url)
        return _mount_in_background(args, mountpoint)
    return _mount_in_foreground(args, mountpoint, connection)


def _check_timings(args: argparse.Namespace) -> None:
    """Every timing a finite number of seconds above its floor, before anything is
    mounted: a mount given ``--poll-interval -1`` used to report "mounted" and die, and
    ``--poll-interval 0`` asked the server a thousand times a second."""
    for flag, floor in TIMINGS:
        value = getattr(args, flag.removeprefix("--").replace("-", "_"))
        if math.isfinite(value) and (value >= floor if floor > 0 else value > 0):
            continue
        least = f"at least {floor:g}" if floor > 0 else "more than 0"
        default = next(a.default for a in _MOUNT_OPTIONS if flag in a.option_strings)
        raise UsageError(f"{flag} {value:g}: it must be a number of seconds, {least}",
                         hint=f"{flag} {default:g} is the default")


def _check_client_options(args: argparse.Namespace) -> None:
    """``--client-id`` and ``--client-secret-file`` go together: one alone used to be
    ignored, and the mount took other credentials without a word."""
    check_client_pair(args.client_id, args.client_secret_file)


def _check_mountpoint(mountpoint: Path, nonempty: bool, options: list[str]) -> None:
    """A directory, not mounted on yet, and empty unless ``--nonempty``; ``options``
    (the mount's, as given) go into the command a hint prints."""
    where = shlex.quote(str(mountpoint))
    if not mountpoint.exists():
        raise UsageError(f"{mountpoint} does not exist", hint=f"mkdir -p {where}")
    if not mountpoint.is_dir():
        beside = f"{mountpoint}-mount"
        raise UsageError(f"{mountpoint} is not a directory: kg-fuse mounts on an empty "
                         "directory", hint=f"mount on a directory instead, e.g. mkdir "
                                           f"{shlex.quote(beside)} && "
                                           f"{paths.command_line('mount', *options, beside)}")
    if os.path.ismount(mountpoint):
        raise UsageError(f"{mountpoint} is already a mountpoint",
                         hint=f"kg-fuse status {where}; kg-fuse unmount {where}")
    if not nonempty and any(os.scandir(mountpoint)):
        raise UsageError(f"{mountpoint} is not empty: mounting would hide its files",
                         hint="use an empty directory, or add --nonempty")


def _connection(args: argparse.Namespace) -> Connection:
    """The server and credentials the options name (see ``client.credentials``)."""
    from kg_fuse.client.credentials import resolve_connection  # httpx, trio: only to mount
    from kg_fuse.client.errors import KgError

    try:
        secret_file = str(args.client_secret_file) if args.client_secret_file else None
        return resolve_connection(args.api_url, args.client_id, secret_file,
                                  role="admin" if args.admin else "user",
                                  data_dir=str(args.data_dir) if args.data_dir else None)
    except OSError as exc:  # the secret file given cannot be read: the input is wrong
        raise UsageError(f"cannot read the client secret: {exc.strerror}: {exc.filename}",
                         hint="--client-secret-file names a file holding the secret"
                         ) from None
    except KgError as exc:  # no server to mount, yet: the command failed (exit 1)
        raise CommandError(str(exc), hint=f"kg-fuse server start"
                                          f"{paths.data_dir_args(args.data_dir)}, or pass "
                                          "--api-url") from None


def _mount_in_foreground(args: argparse.Namespace, mountpoint: Path,
                         connection: Connection) -> int:
    """Serve the mount here until it is unmounted; a refusal is logged (and said on the
    terminal too when the log goes to a file)."""
    from kg_fuse.fs.mount import CredentialsRejected, MountOptions, run_mount
    from kg_fuse.fs.queries.saved import StoreCorrupt

    leave_working_directory()  # a mount started inside another would keep it busy

    fixed = owner_only.private_dirs(paths.mount_private_dirs(mountpoint))
    fixed += owner_only.private_files([args.log_file] if args.log_file else [])
    _setup_logging(args.log_file, args.debug)
    owner_only.log_fixed(fixed)
    try:
        _settle_store(args, mountpoint, connection.api_url)
    except CommandError as exc:
        return _refuse_in_foreground(args, exc)
    _record_server(mountpoint, connection.api_url, args.data_dir)
    options = MountOptions(
        mountpoint=mountpoint, connection=connection, poll_interval=args.poll_interval,
        max_age=args.max_age,
        request_timeout=args.timeout, probe_timeout=args.probe_timeout,
        ingest_delay=args.ingest_delay, allow_ontology_delete=args.allow_ontology_delete,
        allow_document_delete=args.allow_document_delete,
    )
    try:
        run_mount(options)
    except StoreCorrupt as exc:
        return _refuse_in_foreground(args, _store_refusal(exc, args))
    except CredentialsRejected as exc:
        return _refuse_in_foreground(args, CommandError(
            f"cannot mount {mountpoint}: {exc}",
            hint="check --client-id and --client-secret-file (or KG_CLIENT_ID and "
                 "KG_CLIENT_SECRET)"))
    except RuntimeError as exc:  # pyfuse3.init failing
        return _refuse_in_foreground(args, CommandError(f"cannot mount {mountpoint}: {exc}"))
    return 0


def _record_server(mountpoint: Path, api_url: str, data_dir: Path | None) -> None:
    """Say which server this mount uses, for ``kg-fuse unmount --stop-server``."""
    record = {"api_url": api_url, "data_dir": str(data_dir) if data_dir else None}
    path = paths.mount_server_path(mountpoint)
    with open(owner_only.open_private(path, append=False), "w", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def recorded_server(mountpoint: Path) -> tuple[str, Path | None] | None:
    """The API address the mount at ``mountpoint`` uses and the ``--data-dir`` it was
    mounted with (None: the default), or None when the mount recorded neither (a mount
    made by an earlier kg-fuse)."""
    try:
        record = json.loads(paths.mount_server_path(mountpoint).read_text(encoding="utf-8"))
        data_dir = record["data_dir"]
        return str(record["api_url"]), Path(data_dir) if data_dir else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _refuse_in_foreground(args: argparse.Namespace, error: CommandError) -> int:
    """Log why the mount cannot start; a log file also gets it said on the terminal."""
    log.error("%s", error.line())
    if args.log_file is not None:
        hint = f"{error.hint}; see {args.log_file}" if error.hint else f"see {args.log_file}"
        raise CommandError(error.message, hint=hint) from None
    return error.code


def _store_refusal(exc: StoreCorrupt, args: argparse.Namespace) -> CommandError:
    """An unreadable saved-query store: the mount refuses, every time, until the user
    picks one of the two commands the hint names (each with the server the mount names)."""
    server = [*paths.data_dir_argv(args.data_dir),
              *(["--api-url", args.api_url] if args.api_url else [])]
    restore = paths.command_line("mount", *server, "--restore-store", exc.kept_at,
                                 args.mountpoint)
    empty = paths.command_line("mount", *server, "--start-empty", args.mountpoint)
    return CommandError(str(exc), hint=f"repair that file, then: {restore}; or start with "
                                       f"no saved queries: {empty}")


def _settle_store(args: argparse.Namespace, mountpoint: Path, api_url: str) -> None:
    """Check the saved-query store of the server this mountpoint's address last was,
    after applying the user's choice about an unreadable one (--start-empty,
    --restore-store: a file set aside from a server's folder goes back there). Never
    replaces a store in use."""
    from kg_fuse.fs.queries.saved import QueryStore, StoreCorrupt, StoreInUse
    from kg_fuse.fs.queries.servers import ServerStores

    for folder in paths.mount_private_dirs(mountpoint):  # the store's folders: private
        owner_only.create_dir(folder)  # from the first (an existing one the mount fixes)
    stores = ServerStores(paths.mount_state_dir(mountpoint), api_url)
    store = stores.settled()
    if args.restore_store is not None:
        store = stores.home_of(args.restore_store) or store or QueryStore(stores.directory)
    if store is None:  # no store yet: nothing to check, nothing set aside
        if args.start_empty:
            raise UsageError("there is no saved-query store of this mountpoint's server "
                             "to start afresh from; nothing was changed",
                             hint=paths.command_line(
                                 "mount", *paths.data_dir_argv(args.data_dir), mountpoint))
        return
    try:
        if args.restore_store is not None:
            state = store.restore(args.restore_store)
            print(f"kg-fuse: restored {len(state.queries)} saved queries from "
                  f"{args.restore_store}", flush=True)
        elif args.start_empty:
            kept = store.start_empty()
            print(f"kg-fuse: starting with no saved queries; the unreadable store stays "
                  f"at {kept}", flush=True)
        else:
            store.load()
    except StoreCorrupt as exc:
        raise _store_refusal(exc, args) from None
    except StoreInUse as exc:
        raise UsageError(f"{exc}; nothing was changed",
                         hint=paths.command_line(
                             "mount", *paths.data_dir_argv(args.data_dir), mountpoint)
                         ) from None
    except ValueError as exc:  # the file to restore still does not parse
        raise UsageError(f"{exc}; nothing was changed",
                         hint="repair it and run the same command again") from None


def _mount_in_background(args: argparse.Namespace, mountpoint: Path) -> int:
    """Start a foreground mount as a detached child; return once it is ready."""
    log_file = args.log_file or paths.mount_log_path(mountpoint)
    for folder in [*paths.mount_private_dirs(mountpoint), log_file.parent]:
        owner_only.create_dir(folder)  # an existing one the mount fixes, and says so
    argv = [sys.executable, "-m", "kg_fuse.cli", "mount", str(mountpoint), "--foreground",
            "--log-file", str(log_file),
            *_forwarded(args, exclude={"foreground", "log_file", "start_empty", "restore_store"})]
    start = log_file.stat().st_size if log_file.exists() else 0
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True, cwd="/")
    deadline = time.monotonic() + READY_TIMEOUT
    # a wait on events: the mount table changing, or the child exiting
    with open(mounts.MOUNTINFO, "rb") as table, _pidfd(child.pid) as pidfd:
        while time.monotonic() < deadline:
            if os.path.ismount(mountpoint):
                print(f"kg-fuse: mounted {mountpoint} (pid {child.pid}, log {log_file})")
                return 0
            if child.poll() is not None:
                break
            mounts.wait_for_mount_change(table, deadline - time.monotonic(), pidfd)
        else:
            child.terminate()
    with open(log_file, encoding="utf-8", errors="replace") as f:
        f.seek(start)
        reason = " | ".join(line.strip() for line in f.read().strip().splitlines()[-2:])
    raise CommandError(f"mounting {mountpoint} failed: {reason or 'no reason logged'}",
                       hint=f"see {log_file}")


@contextlib.contextmanager
def _pidfd(pid: int) -> Iterator[int]:
    """A descriptor that becomes readable when the process exits."""
    pidfd = os.pidfd_open(pid)
    try:
        yield pidfd
    finally:
        os.close(pidfd)


def _forwarded(args: argparse.Namespace, exclude: set[str]) -> list[str]:
    """The mount options of ``args`` as a command line, so the child mounts the same."""
    argv: list[str] = []
    for action in _MOUNT_OPTIONS:
        value = getattr(args, action.dest)
        if action.dest in exclude or value is None or value is False:
            continue
        flag = action.option_strings[0]
        argv += [flag] if value is True else [flag, str(value)]
    return argv


def _mount_state(mountpoint: Path, refusal: str) -> tuple[str, MountEntry | None]:
    """'mounted', 'dead' (transport endpoint not connected) or 'not mounted[ (why)]', and
    the kg-fuse mount there. Only kg-fuse's mounts count: whatever else is mounted at
    ``mountpoint`` (told by the mount table's type, not by its path) is refused, with
    ``refusal`` as the hint."""
    entry = mounts.mounted_at(mountpoint)
    if entry is not None and not entry.is_kg_fuse:
        raise CommandError(f"{mountpoint} is not a kg-fuse mount: a {entry.fstype} "
                           f"filesystem from {entry.source!r} is mounted there",
                           hint=refusal)
    try:
        os.statvfs(mountpoint)  # always reaches the filesystem process (no kernel cache)
    except OSError as exc:
        if exc.errno == errno.ENOTCONN and entry is not None:  # its process died
            return "dead", entry
        if entry is None:
            return f"not mounted ({(exc.strerror or str(exc)).lower()})", None
    return ("mounted", entry) if entry is not None else ("not mounted", None)


def unmount(mountpoint: Path) -> int:
    """Unmount the kg-fuse mount at ``mountpoint`` (also one whose process died): 0, or
    1 when nothing of kg-fuse's is mounted there (said on stderr)."""
    state, entry = _mount_state(mountpoint, "nothing was unmounted: kg-fuse unmounts only "
                                            "what kg-fuse mounted")
    if entry is None:
        print(f"kg-fuse: {mountpoint} is {state}", file=sys.stderr)
        return 1
    flags = ["-u", "-z"] if state == "dead" else ["-u"]
    result = subprocess.run(["fusermount3", *flags, entry.mountpoint], check=False,
                            capture_output=True, text=True)
    if result.returncode != 0:
        said = " ".join(result.stderr.split()).removeprefix("fusermount3: ")
        if "busy" in said.lower():
            raise CommandError(f"{mountpoint} is busy: a shell or program is using it",
                               hint="cd out of it; see who with: "
                                    f"{shlex.join(['fuser', '-vm', str(mountpoint)])}")
        raise CommandError(f"unmounting {mountpoint} failed: {said or result.returncode}")
    return result.returncode


def cmd_status(args: argparse.Namespace) -> int:
    mountpoint = args.mountpoint.absolute()
    state, _ = _mount_state(mountpoint, "kg-fuse status reports only kg-fuse's mounts")
    if state == "dead":
        print(f"{mountpoint}: dead mount (its process ended); run: "
              f"{paths.command_line('unmount', mountpoint)}")
        return 1
    print(f"{mountpoint}: {state}")
    if state == "mounted" and (owner := _queries_owner(mountpoint)) is not None:
        print(f"saved queries: those of {owner}")
    return 0 if state == "mounted" else 1


def _queries_owner(mountpoint: Path) -> str | None:
    """Whose saved queries the mount at ``mountpoint`` shows: the server its address
    last was (None: not known yet, or a mount made by an earlier kg-fuse)."""
    from kg_fuse.fs.queries.servers import ServerStores

    recorded = recorded_server(mountpoint)
    if recorded is None:
        return None
    last = ServerStores(paths.mount_state_dir(mountpoint), recorded[0]).last_seen()
    return last.label if last is not None else None
