"""Resolving ``ln -s TARGET NAME`` in a query directory to an ontology name."""

from __future__ import annotations

import posixpath

from kg_fuse.fs.queries import ONTOLOGY_DIR


def resolve_link_target(query_key: str, target: str, mountpoint: str) -> str | None:
    """The ontology a link made in query directory ``query_key`` points at, or None.

    Relative targets resolve from the directory holding the link (so ``../ontology/X``
    from a global query, ``../../ontology/X`` from a nested one); absolute ones must
    point inside this mount.
    """
    if target.startswith("/"):
        root = mountpoint.rstrip("/") + "/"
        if not mountpoint or not target.startswith(root):
            return None
        virtual = "/" + target[len(root):]
    else:
        virtual = posixpath.join("/" + query_key, target)
    parts = [p for p in posixpath.normpath(virtual).split("/") if p]
    if len(parts) == 2 and parts[0] == ONTOLOGY_DIR:
        return parts[1]
    return None
