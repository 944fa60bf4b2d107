"""The server's subcommands: ``serve``, ``index`` and ``calibrate``.

Registered into the top-level ``kg-fuse`` parser by :func:`register`. Nothing heavy is
imported at module level (no fastapi, numpy, torch): the FUSE client imports this module
to build its parser and must work without the server extra installed.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kg_fuse import paths

if TYPE_CHECKING:
    from kg_fuse.server.service import KnowledgeGraph

log = logging.getLogger(__name__)

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format=LOG_FORMAT)


def _modules(value: str) -> list[str]:
    return [m.strip() for m in value.split(",") if m.strip()]


def _add_store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="where the store lives (default: the user data dir)")


def _add_corpus_options(parser: argparse.ArgumentParser) -> None:
    _add_store_options(parser)
    parser.add_argument("--corpus", choices=("stdlib", "none"), default="stdlib",
                        help="build the Python standard-library corpus (default) or none")
    parser.add_argument("--modules", type=_modules, default=None, metavar="M1,M2,...",
                        help="restrict the stdlib corpus to these dotted module names")
    parser.add_argument("--ingest", type=Path, action="append", default=[], metavar="DIR",
                        help="add a folder of Markdown/text files (repeatable)")
    parser.add_argument("--ontology", default=None,
                        help="ontology for --ingest folders (default: the folder name)")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``serve``, ``index`` and ``calibrate`` to the ``kg-fuse`` command."""
    serve = subparsers.add_parser("serve", help="run the embedded knowledge-graph server")
    _add_corpus_options(serve)
    serve.add_argument("--host", default=paths.DEFAULT_HOST)
    serve.add_argument("--port", type=int, default=paths.DEFAULT_PORT)
    serve.add_argument("--allow-remote", action="store_true",
                       help="allow a non-loopback --host (the API then leaves this machine)")
    serve.add_argument("--token-ttl", type=int, default=None, help=argparse.SUPPRESS)
    serve.set_defaults(func=serve_command)

    index = subparsers.add_parser("index", help="build or refresh the server's store, then exit")
    _add_corpus_options(index)
    index.set_defaults(func=index_command)

    calibrate = subparsers.add_parser(
        "calibrate", help="measure the noise floor and print the default-threshold table")
    _add_store_options(calibrate)
    calibrate.add_argument("--write", action="store_true",
                           help="store the chosen default as the server's search threshold")
    calibrate.set_defaults(func=calibrate_command)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _open_graph(data_dir: Path | None) -> KnowledgeGraph:
    from kg_fuse.server.embedder import Embedder
    from kg_fuse.server.service import KnowledgeGraph
    from kg_fuse.server.store import Store

    return KnowledgeGraph(Store(paths.server_db_path(data_dir)), Embedder())


def _prepare(graph: KnowledgeGraph, args: argparse.Namespace) -> None:
    for folder in args.ingest:
        if not folder.is_dir():
            raise SystemExit(f"kg-fuse: --ingest {folder}: not a directory")
    graph.prepare(corpus=args.corpus, modules=args.modules, ingest=list(args.ingest),
                  ontology=args.ontology, progress=True)


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
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve_command(args: argparse.Namespace) -> int:
    """Open or build the store, calibrate if needed, then serve until interrupted."""
    _setup_logging()
    if not _is_loopback(args.host) and not args.allow_remote:
        print(f"kg-fuse serve: refusing to listen on non-loopback host {args.host!r} "
              "without --allow-remote", file=sys.stderr)
        return 2
    try:
        sock = _bind(args.host, args.port)
    except OSError as exc:
        print(f"kg-fuse serve: cannot listen on {args.host}:{args.port}: {exc}",
              file=sys.stderr)
        return 1
    import uvicorn

    from kg_fuse.server.app import create_app
    from kg_fuse.server.auth import ensure_credentials, token_ttl

    graph = _open_graph(args.data_dir)
    try:
        graph.embedder.load()
        _prepare(graph, args)
        port = sock.getsockname()[1]
        url_host = f"[{args.host}]" if ":" in args.host else args.host
        api_url = f"http://{url_host}:{port}"
        ensure_credentials(graph.store, paths.server_credentials_path(), api_url)
        app = create_app(graph, token_ttl(args.token_ttl))
        log.info("serving %d concepts at %s (default threshold %.2f)", len(graph.index),
                 api_url, graph.default_threshold())
        config = uvicorn.Config(app, log_config=None, access_log=True, lifespan="on")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        graph.store.close()
    return 0


def index_command(args: argparse.Namespace) -> int:
    """Build or refresh the store (with a progress bar) without serving."""
    _setup_logging()
    graph = _open_graph(args.data_dir)
    try:
        _prepare(graph, args)
        print(f"index ready: {len(graph.index)} concepts in {graph.store.path} "
              f"(default threshold {graph.default_threshold():.2f})")
    finally:
        graph.store.close()
    return 0


def calibrate_command(args: argparse.Namespace) -> int:
    """Print the calibration table for the built store; ``--write`` stores the default."""
    _setup_logging()
    from kg_fuse.server.calibrate import format_report

    db = paths.server_db_path(args.data_dir)
    if not db.exists():
        print(f"kg-fuse calibrate: no store at {db}; run 'kg-fuse index' first",
              file=sys.stderr)
        return 1
    graph = _open_graph(args.data_dir)
    try:
        graph.reload_index()
        if not len(graph.index):
            print("kg-fuse calibrate: the store has no embedded concepts", file=sys.stderr)
            return 1
        report = graph.calibrate(write=args.write)
        print(format_report(report))
        if args.write:
            print(f"stored: search_default_similarity_threshold = {report.default:.2f}")
    finally:
        graph.store.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``python -m kg_fuse.server.commands``)."""
    parser = argparse.ArgumentParser(prog="kg-fuse")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
