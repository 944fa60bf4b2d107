"""The compiled half of the standard library, read from live objects in a child process.

``builtins``, the methods of built-in types and every C-implemented function (``math``,
``zlib``, most of ``os``...) have no source to parse. Their docstrings and signatures
(``inspect.signature``, i.e. ``__text_signature__``) are read from the imported objects,
but the importing happens in a separate process (:mod:`.introspect`) with a deadline per
module and a deny-list, so building the corpus runs no standard-library module code in
the server and cannot hang it.

Labels: a function or class is labelled by the public module users import it from
(``os.listdir``, not ``posix.listdir``; ``csv.reader``, not ``_csv.reader``); built-ins
carry no module (``sorted``, ``list.sort``, ``str.split``), as the Python documentation
writes them; methods are ``Class.method``. An object exported by several modules (a
re-export such as ``os.path.join`` / ``posixpath.join``) becomes one concept.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from kg_fuse.server.corpus import ChunkSpec, ConceptSpec, DocumentSpec
from kg_fuse.server.corpus.chapters import chapter_of
from kg_fuse.server.corpus.docstrings import EXAMPLES_MAX_CHARS, first_paragraph, paragraphs

log = logging.getLogger(__name__)

#: Never imported, not even in the worker: GUI toolkits, easter eggs that open a browser
#: or print, the test suite, installers and demos, and Windows-only modules.
DENY_LIST = frozenset({
    "tkinter", "turtle", "turtledemo", "idlelib", "antigravity", "this", "test",
    "ensurepip", "pydoc_data", "lib2to3", "encodings", "xxsubtype", "xxlimited",
    "xxlimited_35", "msilib", "msvcrt", "winreg", "winsound", "nt", "nturl2path",
    "__main__", "site", "venv", "distutils",
})

MODULE_DEADLINE = 20.0  # seconds one import may take
TOTAL_DEADLINE = 300.0
BUILTINS = "builtins"
BOILERPLATE = frozenset({"An enumeration."})
#: Objects defined in these modules are labelled by the public module that wraps them.
PREFERRED_HOME = {"posix": "os", "_io": "io", "posixpath": "os.path"}


def denied(module: str) -> bool:
    parts = module.split(".")
    return parts[0] in DENY_LIST or any(p.startswith("_") for p in parts)


def public_modules(source_modules: Iterable[str]) -> list[str]:
    """Every public stdlib module to read live: top-level names plus source submodules."""
    names = {m for m in sys.stdlib_module_names if not denied(m)}
    names.update(m for m in source_modules if not denied(m))
    return sorted(names)


# -- the worker ------------------------------------------------------------------------


def _spawn(modules: list[str]) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["TERM"] = "dumb"
    return subprocess.Popen(
        [sys.executable, "-I", "-m", "kg_fuse.server.corpus.introspect", *modules],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env=env, start_new_session=True)


def read_modules(modules: list[str], module_deadline: float = MODULE_DEADLINE,
                 total_deadline: float = TOTAL_DEADLINE) -> dict[str, dict]:
    """Describe each module in a child process; a module that hangs is skipped."""
    pending = [m for m in modules if not denied(m)]
    results: dict[str, dict] = {}
    give_up = time.monotonic() + total_deadline
    while pending and time.monotonic() < give_up:
        current = _run_worker(pending, results, module_deadline, give_up)
        done = set(results) | ({current} if current else set())
        if current is None and not set(pending) - done:
            break
        pending = [m for m in pending if m not in done]
        if current is None and pending:
            log.warning("stdlib corpus: the introspection worker died; modules left: %d",
                        len(pending))
            break
    return _imported(results)


def _run_worker(modules: list[str], results: dict[str, dict], module_deadline: float,
                give_up: float) -> str | None:
    """One worker over ``modules``, each description it writes kept in ``results``;
    returns the module it was importing when it stopped (it hung past
    ``module_deadline``, or died), None when it finished one."""
    proc = _spawn(modules)
    current: str | None = None
    buffer = b""
    try:
        while True:
            wait = min(module_deadline, give_up - time.monotonic())
            ready, _, _ = select.select([proc.stdout], [], [], max(wait, 0))
            if not ready:
                log.warning("stdlib corpus: importing %s took over %.0f s; skipped",
                            current, module_deadline)
                break
            chunk = os.read(proc.stdout.fileno(), 1 << 20)  # type: ignore[union-attr]
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                current = _kept(json.loads(line), results)
    finally:
        proc.kill()
        proc.wait()
    return current


def _kept(message: dict, results: dict[str, dict]) -> str | None:
    """A worker's line: the module it begins importing (returned), or a module's
    description (kept in ``results``)."""
    if "begin" in message:
        return str(message["begin"])
    results[message["module"]] = message
    return None


def _imported(results: dict[str, dict]) -> dict[str, dict]:
    """The descriptions of the modules that could be imported (the others logged)."""
    failed = [m for m, r in results.items() if "error" in r]
    if failed:
        log.info("stdlib corpus: %d modules could not be imported (%s)", len(failed),
                 ", ".join(failed[:8]) + ("..." if len(failed) > 8 else ""))
    return {m: r for m, r in results.items() if "error" not in r}


# -- merging into documents --------------------------------------------------------------


def _owns(module: dict, obj: dict) -> bool:
    """Whether ``module`` is a legitimate exporter of ``obj`` (not a stray import)."""
    name, home = module["module"], obj["home"]
    if name == BUILTINS:
        return True
    if module["all"] is not None:
        return obj["name"] in module["all"]
    return home == name or home.lstrip("_") == name or PREFERRED_HOME.get(home) == name


def _rank(exporter: str, home: str) -> tuple:
    """Lower is better: builtins, the public wrapper of a C module (``os`` for
    ``posix``), the defining module, the shortest name."""
    return (exporter != BUILTINS, exporter != PREFERRED_HOME.get(home, home.lstrip("_")),
            exporter != home, len(exporter), exporter)


def _label(module: str, name: str) -> str:
    return name if module == BUILTINS else f"{module}.{name}"


def _split_doc(name: str, signature: str, doc: str) -> tuple[str, str, list[str]]:
    """(signature, description, paragraphs): a doc that opens with call lines gives them
    as the signature when ``inspect`` could not."""
    paras = paragraphs(doc)
    if paras and f"{name}(" in paras[0].splitlines()[0]:
        signature = signature or paras[0].splitlines()[0].strip()
        # Call lines, and alternatives between them ("[or]"), are not the description.
        while len(paras) > 1 and (f"{name}(" in paras[0].splitlines()[0]
                                  or paras[0].strip("[] ").lower() == "or"):
            paras.pop(0)
    return signature, first_paragraph("\n\n".join(paras[:1])), paras


def _no_prose(name: str, signature: str, doc: str, description: str) -> bool:
    """A docstring that says nothing: a bare call line (ast's node classes), the name
    itself (``ast.Eq``: "Eq") or boilerplate every enum gets ("An enumeration.")."""
    return (not description or " ".join(doc.split()) == signature
            or description.rstrip(".").lower() == name.lower() or description in BOILERPLATE)


@dataclass
class _Builder:
    """Collects one live document per module, skipping what is already in the corpus."""

    taken_labels: set[str]
    taken_keys: set[str]
    docs: dict[str, DocumentSpec] = field(default_factory=dict)
    parts: dict[str, list[str]] = field(default_factory=dict)

    def _doc(self, module: str) -> DocumentSpec:
        if module not in self.docs:
            self.docs[module] = DocumentSpec(
                name=f"{module}.pydoc", filename=f"{module}.pydoc",
                ontology=chapter_of(module),
                content="", source_type="stdlib")
            self.parts[module] = []
        return self.docs[module]

    def add(self, module: str, label: str, key: str, signature: str, doc: str,
            relations: list[tuple[str, str]]) -> bool:
        if label in self.taken_labels or (key and key in self.taken_keys):
            return False
        name = label.rsplit(".", 1)[-1]
        signature, description, paras = _split_doc(name, signature, doc)
        if _no_prose(name, signature, doc, description):
            return False
        spec = self._doc(module)
        parts = self.parts[module]
        header = f"{label}\n{signature}\n\n" if signature else f"{label}\n\n"
        start = sum(len(p) for p in parts) + len(header)
        body = "\n\n".join(paras)
        parts.append(header + body + "\n\n")
        chunk = ChunkSpec(paragraph=len(spec.chunks), text=body, start=start,
                          end=start + len(body))
        spec.chunks.append(chunk)
        rest = paras[1:]
        doctests = [p for p in rest if p.lstrip().startswith(">>>")]
        spec.concepts.append(ConceptSpec(
            seed=f"stdlib:{label}", label=label, description=description,
            evidence=[(chunk.paragraph, p) for p in paras], relations=relations,
            signature=signature,
            examples="\n\n".join(doctests or rest)[:EXAMPLES_MAX_CHARS]))
        self.taken_labels.add(label)
        if key:
            self.taken_keys.add(key)
        return True

    def documents(self) -> list[DocumentSpec]:
        out = []
        for module, spec in self.docs.items():
            spec.content = "".join(self.parts[module])
            if spec.concepts:
                out.append(spec)
        return out


def live_documents(described: dict[str, dict], taken_labels: set[str],
                   covered_modules: set[str]) -> list[DocumentSpec]:
    """Documents for what the ast pass did not cover: compiled modules, C functions,
    built-ins and the methods of built-in types. ``taken_labels`` are the labels (and so
    the definition keys) the ast pass produced; ``covered_modules`` the modules it read."""
    builder = _Builder(set(taken_labels), set(taken_labels))
    for module, info in sorted(described.items()):
        if module not in covered_modules and info.get("doc"):
            builder.add(module, module, "", "", info["doc"], [])
    classes = _place(builder, _best_exporters(described), taken_labels)
    # A class's own name before its aliases (``socket.socket`` before ``SocketType``),
    # so members inherited from a private C base are listed under the name users know.
    classes.sort(key=lambda c: c[2]["name"] != c[2]["key"].rsplit(".", 1)[-1])
    for module, label, obj in classes:
        cls_rel = [("METHOD_OF", f"stdlib:{label}")]
        for member in obj["members"]:
            builder.add(module, f"{label}.{member['name']}", member["key"],
                        member["signature"], member["doc"], cls_rel)
    return builder.documents()


def _best_exporters(described: dict[str, dict]) -> list[tuple[str, dict]]:
    """Each definition with its best exporter (:func:`_rank`; its own name before an
    alias), as (module, object), by module and name."""
    best: dict[str, tuple[tuple, str, dict]] = {}
    for module, info in described.items():
        for obj in info["objects"]:
            if not _owns(info, obj):
                continue
            alias = obj["name"] != obj["key"].rsplit(".", 1)[-1]
            candidate = ((alias, *_rank(module, obj["home"])), module, obj)
            if obj["key"] not in best or candidate[0] < best[obj["key"]][0]:
                best[obj["key"]] = candidate
    placed = sorted(best.values(), key=lambda c: (c[1], c[2]["name"]))
    return [(module, obj) for _, module, obj in placed]


def _place(builder: _Builder, placed: list[tuple[str, dict]], taken_labels: set[str]
           ) -> list[tuple[str, str, dict]]:
    """Each definition added under its exporter; returns the classes whose members are
    to be added too: those whose own entry was added, or whose label the ast pass or
    nobody holds (``struct.Struct``: a class with no prose), not one another object's."""
    classes: list[tuple[str, str, dict]] = []
    for module, obj in placed:
        label = _label(module, obj["name"])
        module_rel = ([("DEFINED_IN", f"stdlib:{module}")]
                      if module in builder.taken_labels else [])
        added = builder.add(module, label, obj["key"], obj["signature"], obj["doc"],
                            module_rel)
        if obj["kind"] == "class" and (added or label in taken_labels
                                       or label not in builder.taken_labels):
            classes.append((module, label, obj))
    return classes
