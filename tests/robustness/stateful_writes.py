"""The state machine's rules for writing ``.meta`` control files: valid and invalid values
in every style an editor or shell uses, partial and oversized writes, offsets and
truncation. A refused write must change nothing; the model says what every text means."""

from __future__ import annotations

import errno
import os
import tomllib
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from tests.robustness.stateful_cases import (
    INVALID_LIMITS,
    INVALID_STYLES,
    INVALID_VALUES,
    OVERSIZED,
    PARTIAL_INVALID,
    PARTIAL_VALID,
    STEPS,
    VALID_LIMITS,
    VALID_VALUES,
    WRITE_STYLES,
    QueryPath,
    last_line,
    model_threshold,
    shown,
)


class ControlWriteRules:
    """Mixed into ``MountModel`` (test_stateful.py), whose helpers these rules use."""

    queries: dict[QueryPath, dict[str, Any]]
    default: float
    some_query: Any
    meta: Any
    path: Any
    effective: Any

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
        self._refused(self.some_query(data), "threshold", value, style)

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
        self._refused(self.some_query(data), "limit", value, style)

    def _refused(self, query: QueryPath, control: str, value: str, style: str) -> None:
        """An invalid value is refused with EINVAL, and an editor's scratch file renamed
        over the control goes with the refusal."""
        with pytest.raises(OSError) as refused:
            self._write(query, control, value, style)
        assert refused.value.errno == errno.EINVAL, (value, style, refused.value)
        assert not self.meta(query, control + ".new").exists()

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
