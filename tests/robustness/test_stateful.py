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
from collections.abc import Iterator
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
from tests.robustness.stateful_cases import (
    AT_LIMIT,
    COMMON,
    DEFAULTS,
    MAX_DEPTH,
    ONTOLOGY,
    RESULT_NAME,
    STEPS,
    NameCase,
    QueryPath,
    last_line,
    names,
    shown,
    undecodable,
)
from tests.robustness.stateful_writes import ControlWriteRules

pytestmark = pytest.mark.mount


class MountModel(ControlWriteRules, RuleBasedStateMachine):
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

    @rule(case=st.sampled_from(AT_LIMIT))
    def mkdir_at_the_name_limit(self, case: tuple[str, int | None]) -> None:
        STEPS["mkdir_at_the_name_limit"] += 1
        name, expect = case
        self.create((name.encode(),), NameCase(name.encode(), expect, name, None))

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
                            allowed_log=[
                                r"WARNING kg_fuse\.fs\.kernel\.errnos: server request failed"])


@pytest.mark.timeout(240)
def test_filesystem_behaves_like_its_model(model_mount: Mount, kg_admin: Any,
                                          request: pytest.FixtureRequest) -> None:
    MountModel.mount = model_mount
    MountModel.admin = kg_admin
    MountModel.original_default = kg_admin.get_default()
    # No shrinking: against a real mount it takes minutes; a failure is reported as the
    # (at most 40-step) sequence that found it.
    run_state_machine_as_test(MountModel, settings=settings(
        max_examples=20, stateful_step_count=40, deadline=None, derandomize=True,
        database=None, print_blob=False, phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                               HealthCheck.data_too_large]))
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"state machine: {sum(STEPS.values())} steps: "
                            + ", ".join(f"{k}={v}" for k, v in sorted(STEPS.items())))
