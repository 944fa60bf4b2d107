"""How the write styles of shells and editors turn into the text of a control file."""

from __future__ import annotations

import os

import pytest

from kg_fuse.fs.tree.meta.session import WriteSession
from kg_fuse.fs.tree.meta.values import parse_threshold_file
from kg_fuse.listing.thresholds import InvalidThreshold

CURRENT = b"# Server default: 0.47\n0.7\n"


def write(session: WriteSession, offset: int, data: bytes) -> float | None:
    """One write(2) as the filesystem handles it: validate the whole text, keep it if valid."""
    content = session.candidate(offset, data)
    try:
        value = parse_threshold_file(content)
    except InvalidThreshold:
        session.refuse()
        raise
    session.accept(content)
    return value


def test_trunc_open_starts_empty():
    session = WriteSession.begin(CURRENT, os.O_WRONLY | os.O_TRUNC)
    assert bytes(session.buffer) == b""
    assert write(session, 0, b"0.6\n") == 0.6
    assert bytes(session.buffer) == b"0.6\n"


def test_shell_redirection_in_two_writes():
    session = WriteSession.begin(CURRENT, os.O_WRONLY | os.O_TRUNC)
    write(session, 0, b"0.")
    assert write(session, 2, b"55\n") == 0.55


def test_append_open_starts_empty_and_appends():
    session = WriteSession.begin(CURRENT, os.O_WRONLY | os.O_APPEND)
    assert bytes(session.buffer) == b""
    assert write(session, len(CURRENT), b"# note\n") is None
    # the offset given for an append is ignored: the data goes at the end
    assert write(session, 0, b"0.8\n") == 0.8
    assert bytes(session.buffer) == b"# note\n0.8\n"


def test_plain_open_starts_with_current_content_and_patches_in_place():
    session = WriteSession.begin(CURRENT, os.O_WRONLY)
    assert bytes(session.buffer) == CURRENT
    patch = b"# Server default: 0.47\n0.9\n"
    assert len(patch) == len(CURRENT)
    assert write(session, 0, patch) == 0.9
    assert bytes(session.buffer) == patch


def test_write_at_offset_zero_overwrites_only_the_bytes_written():
    current = b"0.70\n"
    session = WriteSession.begin(current, os.O_RDWR)
    content = session.candidate(0, b"0.8")
    assert content == b"0.8" + current[3:]
    assert parse_threshold_file(content) == 0.8


def test_write_past_the_end_fills_with_nul_then_is_refused():
    session = WriteSession.begin(b"0.5", os.O_WRONLY)
    content = session.candidate(5, b"x")
    assert content == b"0.5\0\0x"
    with pytest.raises(InvalidThreshold):
        parse_threshold_file(content)
    with pytest.raises(InvalidThreshold):
        parse_threshold_file(content)


def test_refused_write_leaves_the_buffer_unchanged():
    session = WriteSession.begin(CURRENT, os.O_WRONLY)
    with pytest.raises(InvalidThreshold):
        write(session, 0, b"bogus\n")
    assert bytes(session.buffer) == CURRENT
    # a later valid write builds on the unchanged content
    patch = b"# Server default: 0.47\n0.3\n"
    assert write(session, 0, patch) == 0.3


def test_refused_append_leaves_the_buffer_unchanged():
    session = WriteSession.begin(CURRENT, os.O_WRONLY | os.O_APPEND)
    write(session, 0, b"0.4\n")
    with pytest.raises(InvalidThreshold):
        write(session, 0, b"0.5\n")  # two values
    assert bytes(session.buffer) == b"0.4\n"


def test_truncating_open_with_no_write_commits_empty_once_the_opener_closed():
    session = WriteSession.begin(CURRENT, os.O_WRONLY | os.O_TRUNC)
    assert session.due(opener_closed=False) is None  # a forked child closed its copy
    assert session.due(opener_closed=True) == b""  # ``: > f``; and at release


def test_truncating_open_with_a_refused_write_never_commits_empty():
    session = WriteSession.begin(CURRENT, os.O_WRONLY | os.O_TRUNC)
    with pytest.raises(InvalidThreshold):
        write(session, 0, b"bogus\n")
    assert session.due(opener_closed=True) is None


def test_truncating_open_with_an_accepted_write_commits_that_write():
    session = WriteSession.begin(CURRENT, os.O_WRONLY | os.O_TRUNC)
    write(session, 0, b"0.6\n")
    assert session.due(opener_closed=False) == b"0.6\n"


@pytest.mark.parametrize("flags", [os.O_WRONLY, os.O_WRONLY | os.O_APPEND, os.O_RDWR])
def test_non_truncating_open_never_commits_empty(flags):
    assert WriteSession.begin(CURRENT, flags).due(opener_closed=True) is None


def test_explicit_truncation_is_due_at_once_even_after_a_write():
    session = WriteSession.begin(CURRENT, os.O_WRONLY)
    write(session, 0, b"# Server default: 0.47\n0.2\n")
    session.truncate()
    assert bytes(session.buffer) == b""
    assert session.due(opener_closed=False) == b""


# -- the session as a transaction -------------------------------------------------------


def test_nothing_is_due_until_something_changed():
    session = WriteSession.begin(CURRENT, os.O_RDWR)
    assert session.due(opener_closed=True) is None


def test_after_a_refused_last_write_nothing_is_due():
    session = WriteSession.begin(CURRENT, os.O_WRONLY | os.O_TRUNC)
    write(session, 0, b"0.4\n")
    with pytest.raises(InvalidThreshold):
        write(session, 4, b"word\n")
    assert session.due(opener_closed=True) is None
    assert bytes(session.buffer) == b"0.4\n"  # the refused write was not applied
    # a later accepted write makes the session's last write valid again
    write(session, 0, b"0.3\n")
    assert session.due(opener_closed=False) == b"0.3\n"


def test_committed_content_is_not_due_twice():
    session = WriteSession.begin(CURRENT, os.O_WRONLY | os.O_TRUNC)
    write(session, 0, b"0.4\n")
    session.committed()
    assert session.due(opener_closed=True) is None


def test_oversized_content_is_refused_before_parsing():
    from kg_fuse.fs.tree.meta.session import CONTROL_MAX_BYTES, ContentTooLarge

    session = WriteSession.begin(b"", os.O_WRONLY | os.O_TRUNC)
    with pytest.raises(ContentTooLarge):
        session.candidate(0, b"x" * (CONTROL_MAX_BYTES + 1))
    assert session.refused and session.due(opener_closed=True) is None
    with pytest.raises(ContentTooLarge):  # a write far past the end, too
        session.candidate(10**12, b"x")
