"""Corpus-derived acronym expansion (Schwartz & Hearst definitions), without a model."""

from __future__ import annotations

from kg_fuse.server.search.acronyms import build_map, definitions, expand, match_long_form, used


def test_long_form_before_the_short_form() -> None:
    assert definitions("Compute a Cyclic Redundancy Check (CRC) of data.") == \
        [("CRC", "Cyclic Redundancy Check")]
    assert definitions("Based on RFC 959: File Transfer Protocol (FTP), by J. Postel") == \
        [("FTP", "File Transfer Protocol")]


def test_short_form_before_its_long_form() -> None:
    assert definitions("HMAC (Keyed-Hashing for Message Authentication) module.") == \
        [("HMAC", "Keyed-Hashing for Message Authentication")]
    # the acronym may be one word before the parentheses
    assert definitions("UUID objects (universally unique identifiers) per RFC 4122.") == \
        [("UUID", "universally unique identifiers")]


def test_parentheses_that_are_not_definitions_are_ignored() -> None:
    assert definitions("An FTP client. >>> ftp = FTP('ftp.python.org')") == []
    assert definitions("Return the SHA (default) value.") == []
    assert definitions("call f(x) with g (y, z) and HTTP (see below)") == []
    assert definitions("a string (SPAM) that abbreviates nothing") == []
    assert definitions("") == []


def test_letters_must_appear_in_order_with_the_first_starting_a_word() -> None:
    assert match_long_form("CRC", ["of", "a", "cyclic", "redundancy", "check"]) == \
        ["cyclic", "redundancy", "check"]
    assert match_long_form("XYZ", ["cyclic", "redundancy", "check"]) is None
    assert match_long_form("CR", ["scream"]) is None  # 'c' inside a word cannot start it


def test_the_most_frequent_long_form_wins() -> None:
    texts = ["Comma Separated Values (CSV) files", "comma separated values (CSV)",
             "Character Set Values (CSV)"]
    assert build_map(texts) == {"csv": "comma separated values"}


def test_concepts_using_an_acronym_get_its_long_form_once() -> None:
    acr = {"crc": "cyclic redundancy check", "sha": "secure hash algorithm"}
    assert used("zlib.crc32 Compute a CRC-32 checksum", acr) == ["crc"]
    assert used("hashlib.sha256 returns a SHA-256 hash object", acr) == ["sha"]
    assert used("crcx is not crc-less", acr) == ["crc"]
    assert expand("Compute a CRC-32 checksum.", "zlib.crc32 CRC-32", acr) == \
        "Compute a CRC-32 checksum. (cyclic redundancy check)"
    already = "A cyclic redundancy check (CRC)."
    assert expand(already, already, acr) == already
    assert expand("plain text", "plain text", acr) == "plain text"
    assert expand("Compute a CRC.", "CRC", {}) == "Compute a CRC."
