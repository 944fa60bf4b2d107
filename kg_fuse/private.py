"""The old name of :mod:`kg_fuse.owner_only`, kept only for the server's modules while
another branch refactors the server: once they import ``owner_only``, delete this."""

from kg_fuse.owner_only import (
    DIR_MODE,
    FILE_MODE,
    create_dir,
    create_file,
    log_fixed,
    open_private,
    private_dirs,
    private_files,
)

__all__ = ["DIR_MODE", "FILE_MODE", "create_dir", "create_file", "log_fixed", "open_private",
           "private_dirs", "private_files"]
