"""The built-in corpus: the standard library's own docstrings and signatures.

Modules with source are parsed with ``ast``, never imported in the server: each is a
document whose content is its source text, and every public class, function and method
with a docstring becomes a concept (labelled ``module.name``, ``module.Class.method``).
What has no source (built-ins, methods of built-in types, C modules and C functions
re-exported by Python modules) is then read from live objects in a child process, see
:mod:`kg_fuse.server.corpus.live`.
"""

from __future__ import annotations

import ast
import copy
import logging
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from pathlib import Path

from kg_fuse.server.corpus import ChunkSpec, ConceptSpec, DocumentSpec
from kg_fuse.server.corpus.chapters import chapter_of
from kg_fuse.server.corpus.docstrings import examples_of, first_paragraph, paragraphs

log = logging.getLogger(__name__)

#: A small, fast corpus for tests: compression, archives, file formats, paths.
#: (zlib and binascii are C extensions: no source, so no docstrings to parse.)
SMALL_TEST_MODULES: tuple[str, ...] = (
    "gzip", "bz2", "lzma", "zipfile", "tarfile", "shutil", "json", "json.decoder",
    "json.encoder", "csv", "configparser", "tomllib", "netrc", "plistlib", "base64",
    "quopri", "posixpath", "genericpath", "fnmatch", "glob", "tempfile",
    "filecmp", "textwrap",
)

#: Top-level names never included: test suites, tools, demos and installer payloads.
SKIPPED_TOP_LEVEL = frozenset({
    "test", "idlelib", "lib2to3", "turtledemo", "ensurepip", "pydoc_data", "site-packages",
    "dist-packages", "this", "antigravity", "encodings",
})
SKIPPED_PARTS = frozenset({"test", "tests", "idle_test", "__main__", "__pycache__"})

#: Bumped when the builder adds kinds of concepts; a store built by an older version
#: gains the new documents at the next start (2: compiled modules and built-ins).
CORPUS_VERSION = 2
#: The settings key recording which stdlib corpus a store holds.
STDLIB_MARKER_KEY = "stdlib_corpus"

def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def discover_modules(root: Path | None = None) -> dict[str, Path]:
    """Dotted module name -> source file, for every public stdlib module."""
    root = root or stdlib_dir()
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
            if not parts:
                continue
            # A package's directory must itself be importable all the way up.
        if not parts or parts[0] in SKIPPED_TOP_LEVEL or parts[0].startswith("config-"):
            continue
        if any(p.startswith("_") or p in SKIPPED_PARTS or "-" in p for p in parts):
            continue
        if len(rel.parts) > 1 and not _is_package_path(root, rel.parts[:-1]):
            continue
        found[".".join(parts)] = path
    return found


def _is_package_path(root: Path, dirs: tuple[str, ...]) -> bool:
    current = root
    for part in dirs:
        current = current / part
        if not (current / "__init__.py").exists():
            return False
    return True


def ast_signature(node: ast.AST) -> str:
    """``name(args) -> returns`` of a def, or the ``__init__`` signature of a class."""
    if isinstance(node, ast.ClassDef):
        init = next((n for n in _definitions(node.body)
                     if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is None:
            return ""
        args = copy.copy(init.args)  # drop ``self``, as pydoc shows a class
        if args.posonlyargs:
            args.posonlyargs = args.posonlyargs[1:]
        elif args.args:
            args.args = args.args[1:]
        return f"{node.name}({ast.unparse(args)})"
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
        return f"{node.name}({ast.unparse(node.args)}){returns}"
    return ""


class _Offsets:
    """Converts ast (line, utf-8 byte column) positions to character offsets."""

    def __init__(self, source: str) -> None:
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def char(self, lineno: int, col_bytes: int) -> int:
        line = self.lines[lineno - 1] if lineno - 1 < len(self.lines) else ""
        col = len(line.encode("utf-8")[:col_bytes].decode("utf-8", errors="ignore"))
        return self.starts[lineno - 1] + col


def _definitions(body: Iterable[ast.stmt]) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef
                                                         | ast.ClassDef]:
    """Definitions directly in a body, looking through if/try/with blocks."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node
        elif isinstance(node, ast.If):
            yield from _definitions(node.body)
            yield from _definitions(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _definitions(node.body)
            yield from _definitions(node.orelse)
            for handler in node.handlers:
                yield from _definitions(handler.body)
        elif isinstance(node, ast.With):
            yield from _definitions(node.body)


def _docstring_node(node: ast.AST) -> ast.Constant | None:
    body = getattr(node, "body", None)
    if not body or not isinstance(body[0], ast.Expr):
        return None
    value = body[0].value
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value
    return None


class _ModuleParser:
    """Builds one module's document spec from its syntax tree."""

    def __init__(self, module: str, source: str, filename: str) -> None:
        self.module = module
        self.offsets = _Offsets(source)
        self.doc = DocumentSpec(
            name=module, filename=filename, ontology=chapter_of(module), content=source,
            source_type="stdlib",
        )
        self.seen: set[str] = set()

    def add(self, node: ast.AST, label: str, relations: list[tuple[str, str]]) -> bool:
        docstring = ast.get_docstring(node, clean=True)  # type: ignore[arg-type]
        const = _docstring_node(node)
        if not docstring or const is None or label in self.seen:
            return False
        description = first_paragraph(docstring)
        if not description:
            return False
        self.seen.add(label)
        start = self.offsets.char(const.lineno, const.col_offset)
        end = self.offsets.char(const.end_lineno or const.lineno, const.end_col_offset or 0)
        chunk = ChunkSpec(paragraph=len(self.doc.chunks), text=docstring, start=start, end=end)
        self.doc.chunks.append(chunk)
        evidence = [(chunk.paragraph, para) for para in paragraphs(docstring)]
        self.doc.concepts.append(ConceptSpec(
            seed=f"stdlib:{label}", label=label, description=description,
            evidence=evidence, relations=relations, signature=ast_signature(node),
            examples=examples_of(docstring),
        ))
        return True

    def walk(self, tree: ast.Module) -> DocumentSpec:
        module_seed = f"stdlib:{self.module}"
        has_module = self.add(tree, self.module, [])
        module_rel = [("DEFINED_IN", module_seed)] if has_module else []
        for node in _definitions(tree.body):
            if node.name.startswith("_"):
                continue
            label = f"{self.module}.{node.name}"
            self.add(node, label, list(module_rel))
            if isinstance(node, ast.ClassDef):
                self.walk_class(node, label, module_rel)
        return self.doc

    def walk_class(self, cls: ast.ClassDef, cls_label: str,
                   module_rel: list[tuple[str, str]]) -> None:
        cls_rel = [("METHOD_OF", f"stdlib:{cls_label}")] if cls_label in self.seen else []
        for node in _definitions(cls.body):
            if node.name.startswith("_"):
                continue
            label = f"{cls_label}.{node.name}"
            if isinstance(node, ast.ClassDef):
                self.add(node, label, list(module_rel))
                self.walk_class(node, label, module_rel)
            else:
                self.add(node, label, cls_rel + module_rel)


def parse_module(module: str, path: Path, root: Path | None = None) -> DocumentSpec | None:
    """The document spec of one module, or None when it cannot be parsed or is empty."""
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError) as exc:
        log.debug("skipping %s: %s", module, exc)
        return None
    filename = str(path.relative_to(root)) if root else path.name
    doc = _ModuleParser(module, source, filename).walk(tree)
    return doc if doc.concepts else None


def build_stdlib_corpus(modules: Iterable[str] | None = None, root: Path | None = None,
                        live: bool = True) -> list[DocumentSpec]:
    """Document specs for the whole public stdlib, or only the named modules.

    Source modules are parsed (:class:`_ModuleParser`); then, with ``live``, every module
    is read from its live objects in a child process (:mod:`.live`) for what has no
    source: built-ins, methods of built-in types, C functions and classes.
    """
    from kg_fuse.server.corpus import live as live_corpus

    root = root or stdlib_dir()
    selected, to_describe = _selected(modules, discover_modules(root))
    docs = _parsed(selected, root)
    parsed = len(docs)
    if live and to_describe:
        described = live_corpus.read_modules(to_describe)
        labels = {c.label for d in docs for c in d.concepts}
        docs += live_corpus.live_documents(described, labels, {d.name for d in docs})
    log.info("stdlib corpus: %d modules parsed, %d read live, %d concepts", parsed,
             len(docs) - parsed, sum(len(d.concepts) for d in docs))
    return docs


def _selected(modules: Iterable[str] | None, available: dict[str, Path]
              ) -> tuple[dict[str, Path], list[str]]:
    """The source modules to parse (name -> file) and the modules to read live: every
    public one, or the named ones (ValueError naming any that are not the standard
    library's)."""
    from kg_fuse.server.corpus import live as live_corpus

    if modules is None:
        return available, live_corpus.public_modules(available)
    wanted = list(dict.fromkeys(modules))
    missing = [m for m in wanted if m not in available
               and m.split(".")[0] not in sys.stdlib_module_names]
    if missing:
        raise ValueError(f"not standard-library modules: {', '.join(missing)}")
    return ({m: available[m] for m in wanted if m in available},
            [m for m in wanted if not live_corpus.denied(m)])


def _parsed(selected: dict[str, Path], root: Path) -> list[DocumentSpec]:
    """Each source module parsed into a document, the same content only once."""
    docs: list[DocumentSpec] = []
    seen_hashes: set[str] = set()
    for module, path in selected.items():
        doc = parse_module(module, path, root)
        if doc is None or doc.id in seen_hashes:
            continue
        seen_hashes.add(doc.id)
        docs.append(doc)
    return docs


def stdlib_docs_to_store(marker: object, modules: list[str] | None
                         ) -> tuple[dict | None, list[DocumentSpec]]:
    """The stdlib documents a store with this ``marker`` still lacks, and the marker to
    record once they are stored (``None``: nothing to record). Without ``modules``
    (no ``--modules``), a store built of some modules keeps them, and says nothing
    more: the README's ``index --modules json,csv`` then ``serve`` is that."""
    if modules is None and isinstance(marker, dict) and marker.get("corpus") == "stdlib":
        modules = marker.get("modules")
    wanted = {"corpus": "stdlib", "modules": sorted(modules) if modules else None,
              "version": CORPUS_VERSION}
    if marker == wanted:
        log.info("stdlib corpus already in the store (%s modules)",
                 len(modules) if modules else "all")
        return None, []
    if isinstance(marker, dict) and marker.get("modules") == wanted["modules"]:
        # An older build of the same corpus: documents are keyed by content, so only
        # what the newer builder adds (compiled modules, built-ins) is stored.
        log.info("upgrading the stdlib corpus from version %s to %s",
                 marker.get("version", 1), CORPUS_VERSION)
        return wanted, build_stdlib_corpus(modules)
    if marker is not None:
        log.warning("store holds a stdlib corpus built with modules=%s; keeping it "
                    "(use a fresh --data-dir to change it)", marker.get("modules"))
        return None, []
    log.info("building the stdlib corpus (%s modules)",
             len(modules) if modules else "all")
    return wanted, build_stdlib_corpus(modules)
