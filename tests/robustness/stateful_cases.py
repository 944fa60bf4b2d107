"""The state machine's cases: names users type, threshold and limit texts, and what
each means, written out by hand (deliberately simpler than the code under test)."""

from __future__ import annotations

import errno
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

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
