"""The server's subcommands: ``serve``, ``index`` and ``calibrate``.

Registered into the top-level ``kg-fuse`` parser by :func:`register`. Nothing heavy is
imported at module level (no fastapi, numpy, torch): the FUSE client imports this module
to build its parser and must work without the server extra installed.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kg_fuse import owner_only, paths
from kg_fuse.console import (
    Command,
    Option,
    absolute_paths,
    add_commands,
    forwarded_options,
    leave_working_directory,
    option,
)
from kg_fuse.exits import CommandError, UsageError
from kg_fuse.memory import few_malloc_arenas
from kg_fuse.server import lifecycle

if TYPE_CHECKING:
    from kg_fuse.server.knowledge.graph import KnowledgeGraph

log = logging.getLogger(__name__)

MODULES_HINT = "--modules takes standard-library modules written in Python, e.g. gzip,json"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
SHUTDOWN_GRACE = 5.0  # seconds requests in flight get at a stop; an ingest job stops sooner


def _setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format=LOG_FORMAT)


def _modules(value: str) -> list[str]:
    return [m.strip() for m in value.split(",") if m.strip()]


def _port(value: str) -> int:
    if not value.isdigit() or not 0 <= int(value) <= 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port (0..65535): {value!r}")
    return int(value)


def _store_options() -> list[Option]:
    return [option("--data-dir", type=Path, default=None, metavar="DIR",
                   help="kg-fuse's data directory: the store, its pid file and log are in "
                        "DIR/server/, and so is its credentials file unless DIR is the "
                        f"default (default: {paths.data_dir()})")]


def _model_option() -> Option:
    return option("--model", default=None, metavar="NAME",
                  help="the embedding model (kg-fuse model list; default: all-MiniLM-L6-v2)")


def _corpus_options() -> list[Option]:
    return [
        *_store_options(),
        _model_option(),
        option("--corpus", choices=("stdlib", "none"), default="stdlib",
               help="build the Python standard-library corpus, or none"),
        option("--modules", type=_modules, default=None, metavar="M1,M2,...",
               help="restrict the stdlib corpus to these dotted module names "
                    "(default: all documented modules)"),
        option("--ingest", type=Path, action="append", default=[], metavar="DIR",
               help="add a folder of Markdown/text files (repeatable)"),
        option("--ontology", default=None,
               help="ontology for --ingest folders (default: the folder name)"),
    ]


def serve_options(log_default: str) -> list[Option]:
    """``serve``'s options: ``server start`` and ``systemd install`` take the same and
    pass them on."""
    return [
        *_corpus_options(),
        option("--host", default=paths.DEFAULT_HOST,
               help="address to listen on (loopback unless --allow-remote)"),
        option("--port", type=_port, default=paths.DEFAULT_PORT,
               help="TCP port to listen on (0: any free port)"),
        option("--allow-remote", action="store_true",
               help="allow a non-loopback --host (the API then leaves this machine)"),
        option("--log-file", type=Path, default=None,
               help=f"append the log (and progress) to this file (default: {log_default})"),
        option("--token-ttl", type=int, default=None, help=argparse.SUPPRESS),
    ]


_SERVE_OPTIONS: list[argparse.Action] = []  # serve's options, as server start passes them


def _server_actions() -> list[Command]:
    """``server start``, ``stop``, ``status`` and ``credentials``."""
    return [
        Command("start", help="start the server in the background",
                description="Start 'kg-fuse serve' in the background with these options "
                            "(all of serve's, and --wait); return once it answers.",
                handler=server_start_command, options=[
                    *serve_options(log_default="DIR/server/server.log"),
                    option("--wait", type=float, default=900.0,
                           help="seconds to wait for the server to answer (a first start "
                                "builds the corpus)"),
                ]),
        Command("stop", help="stop the server started on this store",
                description="Stop the server named by the pid file (SIGTERM, then SIGKILL "
                            "after 30 s). Exit 0 also when none runs.",
                handler=lambda args: lifecycle.stop(args.data_dir), options=_store_options()),
        Command("status", help="say whether the server runs, and where",
                description="Print the running server's address and pid, and its warnings "
                            "(no WordNet); exit 1 when none runs.",
                handler=lambda args: lifecycle.status(args.data_dir),
                options=_store_options()),
        Command("credentials",
                help="show the clients in the credentials file, or replace them",
                description="""Show which admin and user clients the credentials file holds. With
                --rotate, replace both by new ones and revoke every earlier secret and token at
                once (running or not, the server refuses them from then on); mounts re-read the
                file when the server refuses their client, so they carry on with the new
                credentials.""",
                handler=credentials_command, options=[
                    *_store_options(),
                    option("--rotate", action="store_true",
                           help="replace both clients and revoke every token"),
                ]),
    ]


def _commands() -> list[Command]:
    """``serve``, ``server``, ``index`` and ``calibrate``, as data (built when the parser
    is, so the paths their help names follow the environment)."""
    return [
        Command("serve", help="run the embedded knowledge-graph server in the foreground",
                description="""Run the embedded server in the foreground until Ctrl-C or SIGTERM:
                build whatever the store lacks (first time: the corpus, a few minutes),
                calibrate the default threshold once, then serve the platform's HTTP API. It
                writes a pid file next to its store, so 'kg-fuse server stop' stops it wherever
                it was started. For the background, use 'kg-fuse server start'.""",
                handler=serve_command, options=serve_options(log_default="stderr")),
        Command("server",
                help="start, stop or check the embedded server; rotate its credentials",
                description="""The embedded server in the background. 'start' runs 'kg-fuse serve'
                detached (log in the data directory) and returns once it answers; 'stop' stops
                exactly the server its pid file names; 'status' says whether one runs (exit code
                1 if not); 'credentials' shows or rotates its clients. Unmounting never stops
                the server: stop it here, or with 'kg-fuse unmount --stop-server'.""",
                actions=_server_actions()),
        Command("index", help="build or refresh the server's store, then exit",
                description="""Build whatever the store lacks (the corpus, its embeddings, the
                calibration) with a progress bar, then exit. A built store only needs checking:
                seconds.""",
                handler=index_command, options=_corpus_options()),
        Command("calibrate",
                help="print the noise-floor measurement and the default threshold",
                description="""Print the calibration table: how similar gibberish queries score
                against the store, and the default threshold chosen above that noise. --show
                prints the stored table without loading the model.""",
                handler=calibrate_command, options=[
                    *_store_options(),
                    option("--show", action="store_true",
                           help="print the stored calibration instead of measuring again"),
                    option("--write", action="store_true",
                           help="store the chosen default as the server's search threshold"),
                ]),
    ]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``serve``, ``server``, ``index`` and ``calibrate`` to the ``kg-fuse`` command."""
    parsers = add_commands(subparsers, _commands())
    _SERVE_OPTIONS[:] = forwarded_options(parsers["serve"])


def server_start_command(args: argparse.Namespace) -> int:
    argv = serve_argv(args)  # checked; the paths in args made absolute too
    return lifecycle.start(argv, args.data_dir, args.wait, args.log_file)


def serve_argv(args: argparse.Namespace) -> list[str]:
    """``serve``'s command line for the serve options in ``args`` (``server start``'s or
    ``systemd install``'s), checked, every path made absolute (it runs in ``/``), without
    ``--log-file``."""
    if not _is_loopback(args.host) and not args.allow_remote:
        raise UsageError(f"refusing to listen on non-loopback host {args.host!r}",
                         hint="add --allow-remote if the API should leave this machine")
    absolute_paths(args)
    _check_inputs(args)
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


def _data_dir_option(data_dir: Path | None) -> str:
    return f" --data-dir {data_dir.resolve()}" if data_dir is not None else ""


def _open_graph(data_dir: Path | None, model_name: str | None = None) -> KnowledgeGraph:
    """The store and the model to embed with: ``model_name``, or the one the store's
    vectors were made by (the default for a new store). A store another model embedded
    is refused, naming the command that re-embeds it (:mod:`.graph.model_record`)."""
    from kg_fuse.server.embedding.embedder import Embedder
    from kg_fuse.server.embedding.models import resolve
    from kg_fuse.server.knowledge.graph import KnowledgeGraph
    from kg_fuse.server.startup import model_record
    from kg_fuse.server.storage.store import Store

    if model_name is not None:
        resolve(model_name)  # an unknown or missing model: one line, before the store
    store = Store(paths.server_db_path(data_dir))
    try:
        spec = resolve(model_name or model_record.stored_name(store))
        model_record.check(store, spec, _data_dir_option(data_dir))
    except BaseException:
        store.close()
        raise
    return KnowledgeGraph(store, Embedder(spec))


def _reembed_if_asked(args: argparse.Namespace) -> bool:
    """``index --model NAME`` on a store another model embedded: re-embed it (all or
    nothing; :mod:`.graph.reembed`). Returns whether a running server must be restarted
    to serve it; with no server running, the new store is in place."""
    from kg_fuse.server.embedding.embedder import Embedder
    from kg_fuse.server.embedding.models import resolve
    from kg_fuse.server.startup import model_record, reembed
    from kg_fuse.server.storage.store import read_setting_at

    db = paths.server_db_path(args.data_dir)
    running = lifecycle.read_record(paths.server_pid_path(args.data_dir)) is not None
    if not running and reembed.swap_in_ready(db):
        log.info("a store re-embedded earlier is in place")
    if args.model is None or not db.exists():
        return False
    raw = read_setting_at(db, model_record.MODEL_KEY)
    stored = json.loads(raw).get("name") if raw else None
    spec = resolve(args.model)
    if stored in (None, spec.name):
        return False  # a new store, a store of this model, or one from before the record
    embedder = Embedder(spec)
    embedder.load()
    reembed.reembed(db, embedder, server_running=running)
    return running


def _check_inputs(args: argparse.Namespace) -> None:
    """Refuse a bad --model (or a model not installed), --modules or --ingest before
    opening (or creating) a store, and before ``server start`` detaches."""
    from kg_fuse.server.embedding.models import resolve

    resolve(args.model)
    if args.modules and args.corpus == "stdlib":
        from kg_fuse.server.corpus.stdlib import discover_modules

        unknown = sorted(set(args.modules) - set(discover_modules()))
        if unknown:
            raise UsageError(f"--modules: not standard-library source modules: "
                             f"{', '.join(unknown)}", hint=MODULES_HINT)
    for folder in args.ingest:
        if not folder.is_dir():
            raise UsageError(f"--ingest {folder}: not a directory",
                             hint="give a folder of Markdown or text files")


def _prepare(graph: KnowledgeGraph, args: argparse.Namespace) -> None:
    from kg_fuse.server.startup.prepare import prepare

    try:
        prepare(graph, corpus=args.corpus, modules=args.modules,
                        ingest=list(args.ingest), ontology=args.ontology, progress=True)
    except ValueError as exc:  # --modules naming something the corpus cannot read
        raise UsageError(str(exc), hint=MODULES_HINT) from None


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


def _make_private(data_dir: Path | None, log_file: Path | None = None) -> None:
    """Keep the store and the logs from other local users (an install made before this
    was kept is fixed here, and the log says so once)."""
    files = paths.server_private_files(data_dir) + ([log_file] if log_file else [])
    owner_only.log_fixed(owner_only.private_dirs(paths.server_private_dirs(data_dir))
                      + owner_only.private_files(files))


def serve_command(args: argparse.Namespace) -> int:
    """Open or build the store, calibrate if needed, then serve until interrupted."""
    absolute_paths(args)
    leave_working_directory()  # a server started inside a mount would keep it busy
    if not _is_loopback(args.host) and not args.allow_remote:
        raise UsageError(f"refusing to listen on non-loopback host {args.host!r}",
                         hint="add --allow-remote if the API should leave this machine")
    _check_inputs(args)
    pid_file = paths.server_pid_path(args.data_dir)
    lifecycle.refuse_second(args.data_dir)
    try:
        sock = _bind(args.host, args.port)
    except OSError as exc:
        raise CommandError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}",
                           hint="another server may use this port: kg-fuse server status, "
                                "or pick one with --port") from None
    if args.log_file is not None:
        _log_to(args.log_file)
    _setup_logging()
    few_malloc_arenas()
    import uvicorn

    from kg_fuse.server.api.app import create_app
    from kg_fuse.server.api.auth import ensure_credentials, token_ttl

    port = sock.getsockname()[1]
    api_url = local_api_url(args.host, port)
    # uvicorn re-raises SIGTERM after its clean shutdown; as SystemExit, the pid file and
    # the store are closed on the way out (and a stop during the first build works too)
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(0))
    _make_private(args.data_dir, args.log_file)
    from kg_fuse.server.startup import reembed

    if reembed.swap_in_ready(paths.server_db_path(args.data_dir)):
        log.info("serving the store re-embedded while the last server ran")
    graph = _open_graph(args.data_dir, args.model)
    try:
        with lifecycle.pid_file_held(pid_file, api_url, str(args.log_file or "")):
            graph.embedder.load()
            _prepare(graph, args)
            ensure_credentials(graph.store, paths.server_credentials_path(args.data_dir),
                               api_url)
            app = create_app(graph, token_ttl(args.token_ttl))
            log.info("serving %d concepts at %s (default threshold %.2f)", len(graph.index),
                     api_url, graph.default_threshold())
            config = uvicorn.Config(app, log_config=None, access_log=True, lifespan="on",
                                    timeout_graceful_shutdown=SHUTDOWN_GRACE)
            uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        graph.store.close()
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


def index_command(args: argparse.Namespace) -> int:
    """Build or refresh the store (with a progress bar) without serving."""
    _check_inputs(args)
    _setup_logging()
    _make_private(args.data_dir)
    if _reembed_if_asked(args):
        where = _data_dir_option(args.data_dir)
        print(f"re-embedded with {args.model}; the running server still serves the old "
              f"store: restart it to serve the new one: kg-fuse server stop{where} && "
              f"kg-fuse server start{where}")
        return 0
    graph = _open_graph(args.data_dir, args.model)
    try:
        _prepare(graph, args)
        print(f"index ready: {len(graph.index)} concepts in {graph.store.path} "
              f"(default threshold {graph.default_threshold():.2f})")
    finally:
        graph.store.close()
    return 0


def _stored_report(db: Path) -> str | None:
    """The calibration table the store keeps, read from its file alone (no model)."""
    import json

    from kg_fuse.server.storage.store import read_setting_at
    from kg_fuse.server.threshold.calibrate import CalibrationReport, format_report
    from kg_fuse.server.threshold.keys import CALIBRATION_KEY

    raw = read_setting_at(db, CALIBRATION_KEY)
    if raw is None:
        return None
    fields = json.loads(raw)
    fields["probes"] = [tuple(p) for p in fields.get("probes", [])]
    return format_report(CalibrationReport(**fields))


def calibrate_command(args: argparse.Namespace) -> int:
    """Print the calibration table for the built store; ``--write`` stores the default."""
    db = paths.server_db_path(args.data_dir)
    if not db.exists():
        raise CommandError(f"no store at {db}", hint="build it first: kg-fuse index")
    if args.show:
        report_text = _stored_report(db)
        if report_text is None:
            raise CommandError("the store holds no calibration yet",
                               hint="kg-fuse calibrate --write")
        print(report_text)
        return 0
    _setup_logging()
    from kg_fuse.server.threshold.calibrate import format_report

    graph = _open_graph(args.data_dir)
    try:
        graph.reload_index()
        if not len(graph.index):
            raise CommandError("the store has no embedded concepts",
                               hint="kg-fuse index")
        report = graph.threshold.calibrate(write=args.write)
        print(format_report(report))
        if args.write:
            print(f"stored: search_default_similarity_threshold = {report.default:.2f}")
    finally:
        graph.store.close()
    return 0
