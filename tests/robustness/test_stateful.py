"""Random sequences of what users do, checked against a reference model after every step.

A Hypothesis ``RuleBasedStateMachine`` drives one real mount (against the session
server): mkdir with odd names, rmdir, ls, cat, stat, valid and invalid writes to
``.meta/threshold`` in several styles, reading ``.meta/query.toml``, and an operator
changing the server's default threshold. The model is a dict of saved queries (name ->
text and threshold) plus the server default; it is deliberately simpler than the code:
expected outcomes of names and threshold texts are written out by hand below.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
import tomllib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.helpers.mount import Mount

pytestmark = pytest.mark.mount

# -- names -----------------------------------------------------------------------------

# Text pieces and whether they are acceptable in a query name (besides the rules on the
# whole name: not empty after stripping, no leading dot, at most 255 bytes).
SAFE_PIECES = ["gzip", "zlib", "csv", "json", " ", "files", "é", "e\u0301", "日本",
               "🙂", "\u200b", "tab-less", "a.b", "?", "#", "%", "100%", "'", '"',
               "back\\slash", "x" * 60]
BAD_PIECES = ["\t", "\n", "\x7f", "\x85", "\u2028", "\x01"]
# threshold suffixes: (suffix, stored threshold or "plain" (part of the text) or None
# (refused))
SUFFIXES = [
    ("@0", 0.0), ("@0.5", 0.5), ("@1", 1.0), ("@.25", 0.25), ("@0.75", 0.75),
    ("@1.0", 1.0), ("@0.333", 0.333),
    ("@1.5", None), ("@-0.1", None), ("@+0.5", None), ("@2", None), ("@0.5.5", None),
    ("@1e5", None), ("@.", None),
    ("@home", "plain"), ("@", "plain"), ("@x1", "plain"),
]


@dataclass(frozen=True)
class NameCase:
    raw: bytes
    expect_errno: int | None  # None: created
    text: str = ""  # the query text when created
    threshold: float | None = None  # the typed threshold when created


def classify(pieces: list[str], suffix: str | None, prefix_dot: bool) -> NameCase:
    body = ("." if prefix_dot else "") + "".join(pieces)
    threshold: float | None = None
    text = body
    bad = any(p in BAD_PIECES for p in pieces)
    refused = False
    if suffix is not None:
        value = dict(SUFFIXES)[suffix]
        if value is None:
            refused = True
        elif value == "plain":
            text = body + suffix
        else:
            threshold = float(value)
    name = body + (suffix or "")
    raw = name.encode("utf-8")
    if len(raw) > 255:
        return NameCase(raw, errno.ENAMETOOLONG)
    if prefix_dot or bad or refused or not text.strip():
        return NameCase(raw, errno.EINVAL)
    return NameCase(raw, None, text.strip(), threshold)


names = st.builds(
    classify,
    st.lists(st.sampled_from(SAFE_PIECES * 4 + BAD_PIECES), max_size=5),
    st.one_of(st.none(), st.none(), st.sampled_from([s for s, _ in SUFFIXES])),
    st.integers(0, 7).map(lambda i: i == 0),  # a leading dot, now and then
).filter(lambda case: case.raw not in (b"", b".", b".."))
COMMON = [classify([text], suffix, False) for text, suffix in [
    ("gzip", None), ("csv files", None), ("json", "@0.5"), ("tar archives", "@.25"),
    ("zlib", "@0"), ("bz2", "@0.75"), ("base64", None), ("zip files", "@0.333")]]
# names exactly at the kernel's NAME_MAX in UTF-8 bytes, and one byte over
AT_LIMIT = [("é" * 127 + "a", None), ("日" * 85, None), ("🙂" * 63 + "abc", None),
            ("é" * 128, errno.ENAMETOOLONG), ("日" * 85 + "a", errno.ENAMETOOLONG),
            ("🙂" * 64, errno.ENAMETOOLONG)]
assert all(len(n.encode()) == (255 if e is None else 256) for n, e in AT_LIMIT)
undecodable = st.sampled_from([b"\xff", b"gzip\xfe", b"\xc3(", b"caf\xe9"]).map(
    lambda raw: NameCase(raw, errno.EINVAL))

# -- threshold texts ---------------------------------------------------------------------

VALID_VALUES = {  # text written -> stored threshold (None: inherit)
    "0": 0.0, "0.35": 0.35, "0.5": 0.5, ".7": 0.7, "1": 1.0, "1.0": 1.0, "0.999": 0.999,
    "  0.6  ": 0.6, "inherit": None, "default": None, "INHERIT": None, "": None,
    "# a comment\n0.45": 0.45,
}
INVALID_VALUES = ["banana", "nan", "inf", "-0.1", "1.5", "0.5 0.6", "0x1", "1e5",
                  "0.5\n0.6", "½", "0,5"]
WRITE_STYLES = ["echo", "printf", "append", "truncate+write", "rename", "editor"]
INVALID_STYLES = ["echo", "append", "rename"]
DEFAULTS = [0.3, 0.5, 0.6]
# a valid value written in two write(2) calls: (first part, second part, stored value)
PARTIAL_VALID = [("0.", "35", 0.35), ("0.9", "99", 0.999), ("1", ".0", 1.0),
                 ("0", "\n", 0.0), ("0.4", "5\n", 0.45)]
# the first part is valid, the whole is not: the session must commit nothing
PARTIAL_INVALID = [("0.5", ".5"), ("0.5", " 0.6"), ("0.7", "x"), ("1", "5"), ("0.", "5\n2")]
OVERSIZED = 64 * 1024 + 1  # one byte more than a control file holds: EFBIG

ONTOLOGY = b"ontology"  # the root's fixed directory of the server's ontologies
RESULT_NAME = re.compile(r"^[^./\x00-\x1f\x7f][^/\x00-\x1f\x7f]*\.concept\.md$")


VALID_LIMITS = {"1": 1, "5": 5, "20": 20, "100": 100, "default": None, "": None,
                "# how many\n30": 30}
INVALID_LIMITS = ["0", "1001", "2.5", "-1", "ten", "1 2", "+5", "0x10"]
MAX_DEPTH = 3  # a query, a nested query and one nested in that

QueryPath = tuple[bytes, ...]
STEPS: Counter[str] = Counter()  # rule -> how many times it ran (printed at the end)


def model_threshold(content: bytes) -> float | None | str:
    """What a threshold file's text means: a value, None (inherit) or "invalid"."""
    try:
        lines = content.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return "invalid"
    tokens = [t for line in lines if not line.strip().startswith("#") for t in line.split()]
    if not tokens:
        return None
    if len(tokens) > 1:
        return "invalid"
    token = tokens[0]
    if token.lower() in ("inherit", "default"):
        return None
    if not re.fullmatch(r"(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?", token):
        return "invalid"
    value = float(token)
    return value if 0.0 <= value <= 1.0 else "invalid"


def last_line(path: Path) -> str:
    return path.read_text().splitlines()[-1]


def shown(value: float | None) -> str:
    return "inherit" if value is None else repr(float(value))


class MountModel(RuleBasedStateMachine):
    """Set ``MountModel.mount`` and ``MountModel.admin`` before running.

    The model: ``queries`` maps a query's path (its directory names from the root, as
    bytes; nested queries have longer paths) to its text, threshold and limit.
    """

    mount: Mount
    admin: Any
    original_default: float

    def __init__(self) -> None:
        super().__init__()
        self.queries: dict[QueryPath, dict[str, Any]] = {}
        self.default = self.original_default

    # -- helpers -------------------------------------------------------------------------

    def path(self, query: QueryPath, *parts: str) -> bytes:
        out = os.fsencode(self.mount.mountpoint)
        for raw in query:
            out = os.path.join(out, raw)
        for part in parts:
            out = os.path.join(out, part.encode())
        return out

    def meta(self, query: QueryPath, name: str) -> Path:
        return Path(os.fsdecode(self.path(query, ".meta", name)))

    def effective(self, query: QueryPath) -> float:
        own = self.queries[query]["threshold"]
        return self.default if own is None else own

    def children(self, query: QueryPath) -> set[bytes]:
        return {p[-1] for p in self.queries if len(p) == len(query) + 1
                and p[:len(query)] == query}

    def wait_for_default(self, value: float) -> None:
        """Until the mount has learned the server's default (within --max-age, 0.3 s)."""
        probe = (b"default probe",)
        os.mkdir(self.path(probe))
        try:
            deadline = time.monotonic() + 5
            needle = f"# Server default: {value!r}"
            while needle not in self.meta(probe, "threshold").read_text():
                assert time.monotonic() < deadline, f"the mount never learned {value}"
                time.sleep(0.05)
        finally:
            os.rmdir(self.path(probe))

    @initialize()
    def reset(self) -> None:
        """Each example starts from an empty mount and the server's original default."""
        def remove(directory: bytes) -> None:
            for name in os.listdir(directory):
                child = os.path.join(directory, name)
                if name != b".meta" and os.path.isdir(child):
                    remove(child)
            os.rmdir(directory)

        root = os.fsencode(self.mount.mountpoint)
        for name in os.listdir(root):
            if name != ONTOLOGY:
                remove(os.path.join(root, name))
        if self.admin.get_default() != self.original_default:
            self.admin.put_default(self.original_default)
        self.wait_for_default(self.original_default)

    def some_query(self, data: st.DataObject) -> QueryPath:
        return data.draw(st.sampled_from(sorted(self.queries)), label="query")

    def create(self, query: QueryPath, case: NameCase) -> None:
        expected = case.expect_errno
        if expected is None and query in self.queries:
            expected = errno.EEXIST
        try:
            os.mkdir(self.path(query))
        except OSError as exc:
            assert exc.errno == expected, (case, exc)
            return
        assert expected is None, f"{case} was created, expected errno {expected}"
        threshold = case.threshold
        if threshold is not None:
            # the creation probe may lower a threshold that finds nothing, but never
            # below the server default (and to "inherit" when the default binds)
            stored = last_line(self.meta(query, "threshold"))
            if stored != shown(threshold):
                assert stored == "inherit" or self.default <= float(stored) < threshold, \
                    (case, stored, self.default)
                threshold = None if stored == "inherit" else float(stored)
        self.queries[query] = {"text": case.text, "threshold": threshold, "limit": None}

    # -- rules ---------------------------------------------------------------------------

    @rule(case=st.sampled_from(COMMON))
    def mkdir_common(self, case: NameCase) -> None:
        """Names people type: keeps a few queries around for the other rules."""
        STEPS["mkdir_common"] += 1
        self.create((case.raw,), case)

    @rule(case=st.one_of(names, names, names, undecodable))
    def mkdir(self, case: NameCase) -> None:
        STEPS["mkdir"] += 1
        self.create((case.raw,), case)

    @precondition(lambda self: any(len(p) < MAX_DEPTH for p in self.queries))
    @rule(data=st.data(), case=st.one_of(st.sampled_from(COMMON), names))
    def mkdir_nested(self, data: st.DataObject, case: NameCase) -> None:
        STEPS["mkdir_nested"] += 1
        parent = data.draw(st.sampled_from(sorted(p for p in self.queries
                                                  if len(p) < MAX_DEPTH)), label="parent")
        self.create((*parent, case.raw), case)

    @precondition(lambda self: self.queries)
    @rule(data=st.data())
    def rmdir(self, data: st.DataObject) -> None:
        STEPS["rmdir"] += 1
        query = self.some_query(data)
        if self.children(query):
            with pytest.raises(OSError) as refused:
                os.rmdir(self.path(query))
            assert refused.value.errno == errno.ENOTEMPTY, refused.value
            return
        os.rmdir(self.path(query))
        del self.queries[query]
        assert not os.path.exists(self.path(query))

    @rule(case=names)
    def rmdir_missing(self, case: NameCase) -> None:
        if case.expect_errno is not None or (case.raw,) in self.queries:
            return
        try:
            os.rmdir(self.path((case.raw,)))
        except OSError as exc:
            assert exc.errno == errno.ENOENT, exc
        else:
            raise AssertionError(f"rmdir of a missing {case.raw!r} succeeded")

    @precondition(lambda self: self.queries)
    @rule(data=st.data())
    def ls_and_cat(self, data: st.DataObject) -> None:
        STEPS["ls_and_cat"] += 1
        query = self.some_query(data)
        directory = self.path(query)
        names = os.listdir(directory)
        assert names.count(b".meta") == 1
        subdirs = {n for n in names if n != b".meta" and os.path.isdir(
            os.path.join(directory, n))}
        assert subdirs == self.children(query)
        files = [n for n in names if n != b".meta" and n not in subdirs]
        # every level's own threshold must be passed; the score is the lowest of them
        floor = min(self.effective(query[:i]) for i in range(1, len(query) + 1))
        limit = self.queries[query]["limit"] or 50
        assert len(files) <= limit, (len(files), limit)
        for name in files:
            text = os.fsdecode(name)
            assert RESULT_NAME.match(text) and len(name) <= 255, text
            full = os.path.join(directory, name)
            st_ = os.stat(full)
            assert stat.S_ISREG(st_.st_mode) and stat.S_IMODE(st_.st_mode) == 0o444
            with open(full, "rb") as f:
                body = f.read()
            assert st_.st_size == len(body), text
            score = float(re.search(rb"\nscore: ([0-9.]+)\n", body).group(1))  # type: ignore[union-attr]
            assert score >= floor - 1e-4, (text, score, floor)
        status = self.meta(query, "status").read_text()
        assert f"results: {len(files)}\n" in status, status

    @precondition(lambda self: self.queries)
    @rule(data=st.data())
    def stat_meta(self, data: st.DataObject) -> None:
        query = self.some_query(data)
        assert stat.S_ISDIR(os.stat(self.path(query)).st_mode)
        assert stat.S_ISDIR(os.stat(self.path(query, ".meta")).st_mode)
        modes = {n: stat.S_IMODE(os.stat(self.meta(query, n)).st_mode)
                 for n in ("threshold", "limit", "query.toml", "status")}
        assert modes == {"threshold": 0o644, "limit": 0o644, "query.toml": 0o444,
                         "status": 0o444}
        for name in ("threshold", "limit", "query.toml", "status"):
            path = self.meta(query, name)
            assert os.stat(path).st_size == len(path.read_bytes()), name

    @precondition(lambda self: self.queries)
    @rule(data=st.data(), value=st.sampled_from(sorted(VALID_VALUES)),
          style=st.sampled_from(WRITE_STYLES))
    def write_threshold(self, data: st.DataObject, value: str, style: str) -> None:
        STEPS["write_threshold"] += 1
        query = self.some_query(data)
        self._write(query, "threshold", value, style)
        self.queries[query]["threshold"] = VALID_VALUES[value]

    @precondition(lambda self: self.queries)
    @rule(data=st.data(), value=st.sampled_from(INVALID_VALUES),
          style=st.sampled_from(INVALID_STYLES))
    def write_invalid_threshold(self, data: st.DataObject, value: str, style: str) -> None:
        STEPS["write_invalid_threshold"] += 1
        query = self.some_query(data)
        with pytest.raises(OSError) as refused:
            self._write(query, "threshold", value, style)
        assert refused.value.errno == errno.EINVAL, (value, style, refused.value)
        self._drop_scratch(query, "threshold")

    @precondition(lambda self: self.queries)
    @rule(data=st.data(), value=st.sampled_from(sorted(VALID_LIMITS)),
          style=st.sampled_from(["echo", "printf", "rename", "editor"]))
    def write_limit(self, data: st.DataObject, value: str, style: str) -> None:
        STEPS["write_limit"] += 1
        query = self.some_query(data)
        self._write(query, "limit", value, style)
        self.queries[query]["limit"] = VALID_LIMITS[value]
        shown_limit = self.queries[query]["limit"] or "default"
        assert last_line(self.meta(query, "limit")) == str(shown_limit)

    @precondition(lambda self: self.queries)
    @rule(data=st.data(), value=st.sampled_from(INVALID_LIMITS),
          style=st.sampled_from(INVALID_STYLES))
    def write_invalid_limit(self, data: st.DataObject, value: str, style: str) -> None:
        STEPS["write_invalid_limit"] += 1
        query = self.some_query(data)
        with pytest.raises(OSError) as refused:
            self._write(query, "limit", value, style)
        assert refused.value.errno == errno.EINVAL, (value, style, refused.value)
        self._drop_scratch(query, "limit")

    @rule(case=st.sampled_from(AT_LIMIT))
    def mkdir_at_the_name_limit(self, case: tuple[str, int | None]) -> None:
        STEPS["mkdir_at_the_name_limit"] += 1
        name, expect = case
        self.create((name.encode(),), NameCase(name.encode(), expect, name, None))

    def _unchanged(self, query: QueryPath, control: str) -> None:
        """The control still shows the model's value (a refused write changed nothing)."""
        if control == "threshold":
            assert last_line(self.meta(query, control)) == shown(
                self.queries[query]["threshold"])
        else:
            assert last_line(self.meta(query, control)) == str(
                self.queries[query]["limit"] or "default")

    @precondition(lambda self: self.queries)
    @rule(data=st.data(), control=st.sampled_from(["threshold", "limit"]),
          truncating=st.booleans())
    def write_oversized(self, data: st.DataObject, control: str, truncating: bool) -> None:
        STEPS["write_oversized"] += 1
        query = self.some_query(data)
        path = self.meta(query, control)
        before = os.stat(path).st_mtime_ns
        flags = os.O_WRONLY | (os.O_TRUNC if truncating else 0)
        fd = os.open(path, flags)
        try:
            with pytest.raises(OSError) as refused:
                os.write(fd, b"0" * OVERSIZED)
            assert refused.value.errno == errno.EFBIG, refused.value
        finally:
            with pytest.raises(OSError):  # close reports the refusal too
                os.close(fd)
        self._unchanged(query, control)
        assert os.stat(path).st_mtime_ns == before

    @precondition(lambda self: self.queries)
    @rule(data=st.data(), case=st.sampled_from(PARTIAL_VALID))
    def write_threshold_in_two_parts(self, data: st.DataObject,
                                     case: tuple[str, str, float]) -> None:
        STEPS["write_threshold_in_two_parts"] += 1
        query = self.some_query(data)
        first, second, value = case
        fd = os.open(self.meta(query, "threshold"), os.O_WRONLY | os.O_TRUNC)
        try:
            assert os.write(fd, first.encode()) == len(first)
            assert os.write(fd, second.encode()) == len(second)
        finally:
            os.close(fd)
        self.queries[query]["threshold"] = value
        self._unchanged(query, "threshold")

    @precondition(lambda self: self.queries)
    @rule(data=st.data(), case=st.sampled_from(PARTIAL_INVALID), truncating=st.booleans())
    def write_threshold_that_fails_part_way(self, data: st.DataObject,
                                            case: tuple[str, str], truncating: bool) -> None:
        STEPS["write_threshold_that_fails_part_way"] += 1
        query = self.some_query(data)
        path = self.meta(query, "threshold")
        before = os.stat(path).st_mtime_ns
        first, second = case
        flags = os.O_WRONLY | (os.O_TRUNC if truncating else os.O_APPEND)
        fd = os.open(path, flags)
        try:
            os.write(fd, first.encode())
            with pytest.raises(OSError) as refused:
                os.write(fd, second.encode())
            assert refused.value.errno == errno.EINVAL, (case, refused.value)
        finally:
            with pytest.raises(OSError) as at_close:
                os.close(fd)
            assert at_close.value.errno == errno.EINVAL
        self._unchanged(query, "threshold")
        assert os.stat(path).st_mtime_ns == before

    @precondition(lambda self: self.queries)
    @rule(data=st.data(), value=st.sampled_from(sorted(VALID_VALUES) + INVALID_VALUES))
    def write_threshold_at_an_offset(self, data: st.DataObject, value: str) -> None:
        """pwrite over the value line of the file as read, keeping what follows it."""
        STEPS["write_threshold_at_an_offset"] += 1
        query = self.some_query(data)
        path = self.meta(query, "threshold")
        content = path.read_bytes()
        offset = content.rstrip(b"\n").rfind(b"\n") + 1
        payload = value.encode() + b"\n"
        result = content[:offset] + payload + content[offset + len(payload):]
        expected = model_threshold(result)
        fd = os.open(path, os.O_RDWR)
        try:
            if expected == "invalid":
                with pytest.raises(OSError) as refused:
                    os.pwrite(fd, payload, offset)
                assert refused.value.errno == errno.EINVAL
            else:
                assert os.pwrite(fd, payload, offset) == len(payload)
        finally:
            try:
                os.close(fd)
            except OSError as exc:
                assert expected == "invalid" and exc.errno == errno.EINVAL
        if expected != "invalid":
            self.queries[query]["threshold"] = expected
        self._unchanged(query, "threshold")

    @precondition(lambda self: self.queries)
    @rule(data=st.data())
    def vim_saves_the_same_value(self, data: st.DataObject) -> None:
        """vim's pattern: a swap file beside the file, a test file, an in-place rewrite of
        an unchanged value, the swap file removed: the file's mtime must not move."""
        STEPS["vim_saves_the_same_value"] += 1
        query = self.some_query(data)
        path = self.meta(query, "threshold")
        before = os.stat(path).st_mtime_ns
        text = path.read_text()
        swap = self.meta(query, ".threshold.swp")
        swap.write_bytes(b"b0VIM 9.0" + b"\0" * 100)
        probe = self.meta(query, "4913")
        probe.write_bytes(b"")
        probe.unlink()
        with open(path, "w") as f:
            f.write(text)
        swap.unlink()
        assert os.stat(path).st_mtime_ns == before
        self._unchanged(query, "threshold")

    @precondition(lambda self: self.queries)
    @rule(data=st.data())
    def truncate_threshold(self, data: st.DataObject) -> None:
        STEPS["truncate_threshold"] += 1
        query = self.some_query(data)
        os.truncate(self.meta(query, "threshold"), 0)
        self.queries[query]["threshold"] = None

    def _drop_scratch(self, query: QueryPath, control: str) -> None:
        scratch = self.meta(query, control + ".new")
        if scratch.exists():  # the editor's temporary file is the editor's to remove
            scratch.unlink()

    def _write(self, query: QueryPath, control: str, value: str, style: str) -> None:
        path = self.meta(query, control)
        if style == "echo":
            with open(path, "w") as f:
                f.write(value + "\n")
        elif style == "printf":
            with open(path, "w") as f:
                f.write(value)
        elif style == "append":
            with open(path, "a") as f:
                f.write(value + "\n")
        elif style == "truncate+write":  # truncate -s 0 threshold && printf V > threshold
            os.truncate(path, 0)
            with open(path, "w") as f:
                f.write(value)
        elif style == "rename":  # sed -i: write a scratch file, rename it over
            scratch = self.meta(query, control + ".new")
            scratch.write_text("# edited\n" + value + "\n")
            os.rename(scratch, path)
        else:  # an editor rewriting the whole file in place, comments kept
            lines = path.read_text().splitlines()
            text = "\n".join(lines[:-1] + [value]) + "\n"
            with open(path, "r+") as f:
                f.truncate(0)
                f.write(text)

    @precondition(lambda self: self.queries)
    @rule(data=st.data())
    def read_settings(self, data: st.DataObject) -> None:
        query = self.some_query(data)
        model = self.queries[query]
        doc = tomllib.loads(self.meta(query, "query.toml").read_text())
        assert doc["name"] == os.fsdecode(query[-1])
        assert doc["query"] == model["text"]
        expected = "inherit" if model["threshold"] is None else model["threshold"]
        assert doc["threshold"] == expected
        assert doc["effective_threshold"] == pytest.approx(self.effective(query))
        assert doc["server_default_last_seen"] == pytest.approx(self.default)
        sources = (["server default"] if model["threshold"] is None
                   else ["override", "auto-adjusted"])
        assert doc["threshold_source"] in sources
        assert doc["limit"] == (model["limit"] or 50)
        if len(query) > 1:
            assert doc["parent"] == "/".join(os.fsdecode(p) for p in query[:-1])
        else:
            assert "parent" not in doc
        text = self.meta(query, "threshold").read_text()
        assert text.splitlines()[-1] == shown(model["threshold"])
        assert all(line.startswith("#") for line in text.splitlines()[:-1])
        assert f"# Server default: {self.default!r}" in text

    @precondition(lambda self: self.queries)
    @rule(value=st.sampled_from(DEFAULTS))
    def operator_changes_the_default(self, value: float) -> None:
        self.admin.put_default(value)
        self.default = value
        self.wait_for_default(value)

    # -- after every step ----------------------------------------------------------------

    @invariant()
    def root_lists_exactly_the_saved_queries(self) -> None:
        listed = sorted(n for n in os.listdir(os.fsencode(self.mount.mountpoint))
                        if n != ONTOLOGY)
        assert listed == sorted(p[0] for p in self.queries if len(p) == 1)


@pytest.fixture
def model_mount(mount_factory: Any, kg_admin: Any) -> Iterator[Mount]:
    original = kg_admin.get_default()
    with kg_admin.default_set_to(original):
        # an ordinary user's mount learns a new default within --max-age (no searches
        # on a schedule), so both are short here
        yield mount_factory(extra_args=["--poll-interval", "0.3", "--max-age", "0.3"],
                            allowed_log=[r"WARNING kg_fuse\.fs\.errors: server request failed"])


@pytest.mark.timeout(240)
def test_filesystem_behaves_like_its_model(model_mount: Mount, kg_admin: Any,
                                          request: pytest.FixtureRequest) -> None:
    MountModel.mount = model_mount
    MountModel.admin = kg_admin
    MountModel.original_default = kg_admin.get_default()
    started = time.monotonic()
    # No shrinking: against a real mount it takes minutes; a failure is reported as the
    # (at most 40-step) sequence that found it.
    run_state_machine_as_test(MountModel, settings=settings(
        max_examples=20, stateful_step_count=40, deadline=None, derandomize=True,
        database=None, print_blob=False, phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                               HealthCheck.data_too_large]))
    assert time.monotonic() - started < 120
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"state machine: {sum(STEPS.values())} steps: "
                            + ", ".join(f"{k}={v}" for k, v in sorted(STEPS.items())))
