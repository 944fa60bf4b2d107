"""Resolving ``ln -s TARGET NAME`` in a query directory to an ontology name."""

from __future__ import annotations

from kg_fuse.fs.kernel.errnos import InvalidName
from kg_fuse.fs.queries.saved import ONTOLOGY_DIR


def resolve_link_target(query_key: str, target: str, mountpoint: str) -> str | None:
    """The ontology a link made in query directory ``query_key`` points at, or None.

    Relative targets resolve from the directory holding the link (so ``../ontology/X``
    from a global query, ``../../ontology/X`` from a nested one), as the kernel resolves
    them: a ``..`` above the mount's root leaves the mount, so such a link is refused
    (``normpath`` would clamp it to the root and accept it). Absolute targets must point
    inside this mount.
    """
    if target.startswith("/"):
        root = mountpoint.rstrip("/") + "/"
        if not mountpoint or not target.startswith(root):
            return None
        start, rest = [], target[len(root):]
    else:
        start, rest = query_key.split("/"), target
    parts = _walk([p for p in start if p], rest)
    if parts is not None and len(parts) == 2 and parts[0] == ONTOLOGY_DIR:
        return parts[1]
    return None


def _walk(parts: list[str], path: str) -> list[str] | None:
    """``parts`` after following the relative ``path``, as the kernel would; None when
    a ``..`` climbs above the mount's root."""
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None  # outside the mount
            parts.pop()
        else:
            parts.append(part)
    return parts


def link_target_ontology(query_key: str, target: str, mountpoint: str) -> str:
    """The ontology ``target`` names (see ``resolve_link_target``), or InvalidName."""
    ontology = resolve_link_target(query_key, target, mountpoint)
    if ontology is None:
        raise InvalidName(f"a link must point at ontology/NAME in this mount: {target!r}")
    return ontology
