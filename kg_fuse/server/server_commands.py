"""The server's subcommands: ``serve``, ``index`` and ``calibrate``.

Registered into the top-level ``kg-fuse`` parser by :func:`register`. Here: the commands
as data, what each does and what it prints; the store they work on is made ready by
:mod:`.open_store`. Nothing heavy is imported at module level (no fastapi, numpy, torch):
the FUSE client imports this module to build its parser and must work without the server
extra installed.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from kg_fuse import console, owner_only, paths
from kg_fuse.exits import CommandError, UsageError
from kg_fuse.memory import few_malloc_arenas
from kg_fuse.server import lifecycle, open_store
from kg_fuse.server.store_commands import calibrate_command, index_command, setup_logging

log = logging.getLogger(__name__)

SHUTDOWN_GRACE = 5.0  # seconds requests in flight get at a stop; an ingest job stops sooner


def _modules(value: str) -> list[str]:
    return [m.strip() for m in value.split(",") if m.strip()]


def _port(value: str) -> int:
    if not value.isdigit() or not 0 <= int(value) <= 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port (0..65535): {value!r}")
    return int(value)


class PortGiven(argparse.Action):
    """``--port``, remembering that it was given (``args.port_given``): ``server start``
    refuses a port other than the running server's only when one was asked for."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        setattr(namespace, self.dest, values)
        namespace.port_given = True


def _store_options() -> list[console.Option]:
    return [console.option("--data-dir", type=Path, default=None, metavar="DIR",
                           help="kg-fuse's data directory: the store, its pid file and log "
                                "are in DIR/server/, and so is its credentials file unless "
                                f"DIR is the default (default: {paths.data_dir()})")]


def _model_option() -> console.Option:
    return console.option("--model", default=None, metavar="NAME",
                          help="the embedding model (kg-fuse model list; default: the "
                               "model that embedded the store, all-MiniLM-L6-v2 for a new "
                               "store); another model than the store's is refused, except "
                               "by index, which re-embeds the store with it")


def _corpus_options() -> list[console.Option]:
    return [
        *_store_options(),
        _model_option(),
        console.option("--corpus", choices=("stdlib", "none"), default="stdlib",
                       help="build the Python standard-library corpus, or none"),
        console.option("--modules", type=_modules, default=None, metavar="M1,M2,...",
                       help="restrict the stdlib corpus to these dotted module names "
                            "(default: all documented modules; a store built already "
                            "keeps the modules it was built with)"),
        console.option("--ingest", type=Path, action="append", default=[], metavar="DIR",
                       help="add a folder of Markdown/text files (repeatable)"),
        console.option("--ontology", default=None,
                       help="ontology for --ingest folders (default: the folder name)"),
    ]


def serve_options(log_default: str) -> list[console.Option]:
    """``serve``'s options: ``server start`` and ``systemd install`` take the same and
    pass them on."""
    return [
        *_corpus_options(),
        console.option("--host", default=paths.DEFAULT_HOST,
                       help="address to listen on (loopback unless --allow-remote)"),
        console.option("--port", type=_port, default=paths.DEFAULT_PORT, action=PortGiven,
                       help="TCP port to listen on (0: any free port)"),
        console.option("--allow-remote", action="store_true",
                       help="allow a non-loopback --host (the API then leaves this machine)"),
        console.option("--log-file", type=Path, default=None,
                       help="append the log (and progress) to this file "
                            f"(default: {log_default})"),
        console.option("--token-ttl", type=int, default=None, help=argparse.SUPPRESS),
    ]


_SERVE_OPTIONS: list[argparse.Action] = []  # serve's options, as server start passes them


def _server_actions() -> list[console.Command]:
    """``server start``, ``stop``, ``status`` and ``credentials``."""
    return [
        console.Command(
            "start", help="start the server in the background",
            description="Start 'kg-fuse serve' in the background with these options "
                        "(all of serve's, and --wait); return once it answers. Ctrl-C "
                        "or kill while it waits stops the server it was starting.",
            handler=server_start_command, options=[
                *serve_options(log_default="DIR/server/server.log"),
                console.option("--wait", type=float, default=900.0,
                               help="seconds to wait for the server to answer (a first "
                                    "start builds the corpus); past them, the server "
                                    "is stopped"),
            ]),
        console.Command(
            "stop", help="stop the server started on this store",
            description="Stop the server named by the pid file (SIGTERM, then SIGKILL "
                        "after 30 s). Exit 0 also when none runs.",
            handler=lambda args: lifecycle.stop(args.data_dir), options=_store_options()),
        console.Command(
            "status", help="say whether the server runs, and where",
            description="Print the running server's address and pid, its model, "
                        "concepts and default threshold, and its warnings (no "
                        "WordNet); exit 1 when none runs.",
            handler=lambda args: lifecycle.status(args.data_dir), options=_store_options()),
        console.Command(
            "credentials", help="show the clients in the credentials file, or replace them",
            description="""Show which admin and user clients the credentials file holds. With
            --rotate, replace both by new ones and revoke every earlier secret and token at
            once (running or not, the server refuses them from then on); mounts re-read the
            file when the server refuses their client, so they carry on with the new
            credentials.""",
            handler=credentials_command, options=[
                *_store_options(),
                console.option("--rotate", action="store_true",
                               help="replace both clients and revoke every token"),
            ]),
    ]


def _commands() -> list[console.Command]:
    """``serve``, ``server``, ``index`` and ``calibrate``, as data (built when the parser
    is, so the paths their help names follow the environment)."""
    return [
        console.Command(
            "serve", help="run the embedded knowledge-graph server in the foreground",
            description="""Run the embedded server in the foreground until Ctrl-C or SIGTERM:
            build whatever the store lacks (first time: the corpus, a few minutes), calibrate
            the default threshold once, then serve the platform's HTTP API. It writes a pid
            file next to its store, so 'kg-fuse server stop' stops it wherever it was
            started. For the background, use 'kg-fuse server start'.""",
            handler=serve_command, options=serve_options(log_default="stderr")),
        console.Command(
            "server", help="start, stop or check the embedded server; rotate its credentials",
            description="""The embedded server in the background. 'start' runs 'kg-fuse serve'
            detached (log in the data directory) and returns once it answers; 'stop' stops
            exactly the server its pid file names; 'status' says whether one runs (exit code
            1 if not); 'credentials' shows or rotates its clients. Unmounting never stops the
            server: stop it here, or with 'kg-fuse unmount --stop-server'.""",
            actions=_server_actions()),
        console.Command(
            "index", help="build or refresh the server's store, then exit",
            description="""Build whatever the store lacks (the corpus, its embeddings, the
            calibration) with a progress bar, then exit. A built store only needs checking:
            seconds.""",
            handler=index_command, options=_corpus_options()),
        console.Command(
            "calibrate", help="print the noise-floor measurement and the default threshold",
            description="""Print the calibration table: how similar gibberish queries score
            against the store, and the default threshold chosen above that noise. --show
            prints the stored table without loading the model.""",
            handler=calibrate_command, options=[
                *_store_options(),
                console.option("--show", action="store_true",
                               help="print the stored calibration instead of measuring again"),
                console.option("--write", action="store_true",
                               help="store the chosen default as the server's search "
                                    "threshold"),
            ]),
    ]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``serve``, ``server``, ``index`` and ``calibrate`` to the ``kg-fuse`` command."""
    parsers = console.add_commands(subparsers, _commands())
    _SERVE_OPTIONS[:] = console.forwarded_options(parsers["serve"])


def server_start_command(args: argparse.Namespace) -> int:
    argv = serve_argv(args)  # checked; the paths in args made absolute too
    port = args.port if getattr(args, "port_given", False) else None
    with console.interrupted_by_signals():
        return lifecycle.start(argv, args.data_dir, args.wait, args.log_file, port=port)


def serve_argv(args: argparse.Namespace) -> list[str]:
    """``serve``'s command line for the serve options in ``args`` (``server start``'s or
    ``systemd install``'s), checked, every path made absolute (it runs in ``/``), without
    ``--log-file``."""
    if not _is_loopback(args.host) and not args.allow_remote:
        raise UsageError(f"refusing to listen on non-loopback host {args.host!r}",
                         hint="add --allow-remote if the API should leave this machine")
    console.absolute_paths(args)
    open_store.check_inputs(args)
    return _options_argv(args)


def _options_argv(args: argparse.Namespace) -> list[str]:
    """The serve options in ``args`` as a command line, without ``--log-file``."""
    argv: list[str] = []
    for action in _SERVE_OPTIONS:
        value = getattr(args, action.dest)
        if value is None or value is False or value == [] or action.dest == "log_file":
            continue
        argv += _option_argv(action, value)
    return argv


def _option_argv(action: argparse.Action, value: Any) -> list[str]:
    """One option given ``value`` as it is written on a command line."""
    flag = action.option_strings[0]
    if value is True:
        return [flag]
    if isinstance(action, argparse._AppendAction):  # --ingest, repeatable
        return [arg for item in value for arg in (flag, str(item))]
    if isinstance(value, list):  # --modules
        return [flag, ",".join(value)]
    return [flag, str(value)]


def local_api_url(host: str, port: int) -> str:
    """The address a server listening on ``host`` and ``port`` answers at."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, made here so it is created with ``IPPROTO_TCP``: asyncio
    sets ``TCP_NODELAY`` on accepted connections only when the socket says it is TCP
    (a bare ``SOCK_STREAM`` socket has protocol 0). Without it, Nagle's algorithm meets
    the client's delayed ACKs and every response on a kept-alive connection waits ~40 ms.
    The option is set on the listener too; Linux passes it on to accepted sockets."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _log_to(log_file: Path) -> None:
    """Send this process's stdout and stderr (log, progress bars) to ``log_file``."""
    owner_only.create_dir(log_file.parent)
    fd = owner_only.open_private(log_file)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def serve_command(args: argparse.Namespace) -> int:
    """Open or build the store, calibrate if needed, then serve until interrupted."""
    console.absolute_paths(args)
    console.leave_working_directory()  # a server started inside a mount would keep it busy
    if not _is_loopback(args.host) and not args.allow_remote:
        raise UsageError(f"refusing to listen on non-loopback host {args.host!r}",
                         hint="add --allow-remote if the API should leave this machine")
    open_store.check_inputs(args)
    pid_file = paths.server_pid_path(args.data_dir)
    lifecycle.refuse_second(args.data_dir)
    try:
        sock = _bind(args.host, args.port)
    except OSError as exc:
        status = paths.command_line("server", "status", *paths.data_dir_argv(args.data_dir))
        raise CommandError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}",
                           hint=f"another server may use this port: {status}, "
                                "or pick one with --port") from None
    if args.log_file is not None:
        _log_to(args.log_file)
    setup_logging()
    few_malloc_arenas()
    import uvicorn

    from kg_fuse.server.api.app import create_app
    from kg_fuse.server.api.auth import ensure_credentials, token_ttl

    port = sock.getsockname()[1]
    api_url = local_api_url(args.host, port)
    # uvicorn re-raises SIGTERM after its clean shutdown; as SystemExit, the pid file and
    # the store are closed on the way out (and a stop during the first build works too)
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(0))
    open_store.make_private(args.data_dir, args.log_file)
    open_store.remove_interrupted(args.data_dir)
    try:
        # held from here: a re-embed at start is a server starting ('server stop' ends it)
        with lifecycle.pid_file_held(pid_file, api_url, str(args.log_file or ""),
                                     tuple(_options_argv(args))):
            open_store.put_reembedded_in_place(args.data_dir, args.model)
            graph = open_store.open_graph(args.data_dir, args.model)
            try:
                graph.embedder.load()
                open_store.build(graph, args)
                if (warning := graph.model.warning()) is not None:
                    log.warning("%s", warning)
                ensure_credentials(graph.store,
                                   paths.server_credentials_path(args.data_dir), api_url)
                app = create_app(graph, token_ttl(args.token_ttl))
                log.info("serving %d concepts at %s (default threshold %.2f)",
                         len(graph.index), api_url, graph.default_threshold())
                config = uvicorn.Config(app, log_config=None, access_log=True,
                                        lifespan="on",
                                        timeout_graceful_shutdown=SHUTDOWN_GRACE)
                uvicorn.Server(config).run(sockets=[sock])
            finally:
                graph.store.close()
    finally:
        sock.close()
    return 0


def credentials_command(args: argparse.Namespace) -> int:
    """Show the credentials file's clients; ``--rotate`` replaces them and every token."""
    import json

    from kg_fuse.server.api.auth import rotate_credentials
    from kg_fuse.server.storage.store import Store

    db = paths.server_db_path(args.data_dir)
    path = paths.server_credentials_path(args.data_dir)
    start = f"kg-fuse server start{paths.data_dir_args(args.data_dir)}"
    if not db.exists():
        raise CommandError(f"no store at {db}", hint=start)
    try:
        held = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        held = {}
    held = held if isinstance(held, dict) else {}
    if not args.rotate:
        ids = [(held.get(role) or {}).get("client_id") for role in ("admin", "user")]
        if not all(ids):
            raise CommandError(f"no credentials in {path}", hint=f"{start} writes them")
        print(f"{path}: admin client {ids[0]}, user client {ids[1]} for "
              f"{held.get('api_url')}")
        return 0
    running = lifecycle.read_record(paths.server_pid_path(args.data_dir))
    api_url = (running.api_url if running else None) or held.get("api_url") or \
        paths.DEFAULT_API_URL
    store = Store(db)
    try:
        made = rotate_credentials(store, path, str(api_url))
    finally:
        store.close()
    print(f"kg-fuse: new admin client {made['admin']['client_id']} and user client "
          f"{made['user']['client_id']} written to {path}; every earlier secret and token "
          "is revoked")
    return 0
