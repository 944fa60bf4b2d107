"""What a user does in a mount, as one small interface with two implementations, so the
platform's scenarios (``tests.helpers.platform_scenarios``) are written once:

- ``OsShell``: real system calls on a real mount (the live tier), each in a worker
  thread so the trio loop never blocks on the kernel;
- ``DriverShell``: the same calls made of the handler calls the kernel would send
  (``tests.helpers.driver.FsDriver``, the kernel-free replay tier).

Paths are relative to the mount's root, with ``/`` between parts. Failures are
``OSError`` with the errno a shell would see, in both.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol, TypeVar

import pyfuse3
import trio

from tests.helpers.core import MOUNTPOINT
from tests.helpers.driver import FsDriver

T = TypeVar("T")


class Shell(Protocol):
    name: str  # who is signed in to this mount (admin, contributor)

    async def listdir(self, path: str = "") -> list[str]:
        """The names ``ls -AU`` shows, in listing order."""

    async def read(self, path: str) -> bytes: ...

    async def write(self, path: str, data: bytes) -> None:
        """``printf DATA > path``."""

    async def create(self, path: str, data: bytes) -> None:
        """``cp`` of a file to a new name."""

    async def mkdir(self, path: str) -> None: ...

    async def rmdir(self, path: str) -> None: ...

    async def unlink(self, path: str) -> None: ...

    async def remove_tree(self, path: str) -> None:
        """``rm -r path``."""

    async def symlink(self, path: str, target: str) -> None:
        """``ln -s target path``."""

    async def readlink(self, path: str) -> str: ...

    async def rename(self, old: str, new: str) -> None:
        """``mv old new``."""

    async def getxattr(self, path: str, name: str) -> bytes: ...

    async def exists(self, path: str) -> bool: ...


async def read_text(shell: Shell, path: str) -> str:
    return (await shell.read(path)).decode("utf-8")


class OsShell:
    """A real mount, through the kernel."""

    def __init__(self, root: Path, name: str) -> None:
        self.root = root
        self.name = name

    def _path(self, path: str) -> Path:
        return self.root.joinpath(*[p for p in path.split("/") if p])

    async def _run(self, call: Callable[..., T], *args: object) -> T:
        return await trio.to_thread.run_sync(call, *args)

    async def listdir(self, path: str = "") -> list[str]:
        return await self._run(os.listdir, self._path(path))

    async def read(self, path: str) -> bytes:
        return await self._run(self._path(path).read_bytes)

    async def write(self, path: str, data: bytes) -> None:
        def write() -> None:
            fd = os.open(self._path(path), os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        await self._run(write)

    async def create(self, path: str, data: bytes) -> None:
        def create() -> None:
            with open(self._path(path), "xb") as out:
                out.write(data)
        await self._run(create)

    async def mkdir(self, path: str) -> None:
        await self._run(os.mkdir, self._path(path))

    async def rmdir(self, path: str) -> None:
        await self._run(os.rmdir, self._path(path))

    async def unlink(self, path: str) -> None:
        await self._run(os.unlink, self._path(path))

    async def remove_tree(self, path: str) -> None:
        def rm() -> None:
            done = subprocess.run(["rm", "-r", "--", str(self._path(path))],
                                  capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise OSError(errno.EIO, f"rm -r failed: {done.stderr.strip()}")
        await self._run(rm)

    async def symlink(self, path: str, target: str) -> None:
        await self._run(os.symlink, target, self._path(path))

    async def readlink(self, path: str) -> str:
        return await self._run(os.readlink, self._path(path))

    async def rename(self, old: str, new: str) -> None:
        await self._run(os.rename, self._path(old), self._path(new))

    async def getxattr(self, path: str, name: str) -> bytes:
        return await self._run(os.getxattr, self._path(path), name)

    async def exists(self, path: str) -> bool:
        return await self._run(os.path.lexists, self._path(path))


def _errors(call: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    async def wrapped(*args: object, **kwargs: object) -> T:
        try:
            return await call(*args, **kwargs)
        except pyfuse3.FUSEError as exc:
            raise OSError(exc.errno, os.strerror(exc.errno)) from None
    return wrapped


class DriverShell:
    """The filesystem's handlers, without a kernel. Links are followed as the kernel
    follows them (``readlink``, then a walk from the link's directory); each call
    resolves the path's directories, and ``listdir``, ``read``, ``write`` and
    ``getxattr`` its last part too."""

    def __init__(self, fs: FsDriver, name: str, mountpoint: str = MOUNTPOINT) -> None:
        self.fs = fs
        self.name = name
        self.mountpoint = mountpoint.rstrip("/")

    async def _resolve(self, path: str, follow_last: bool = True) -> str:
        parts = [p for p in path.split("/") if p and p != "."]
        resolved: list[str] = []
        links = 0
        while parts:
            part = parts.pop(0)
            if part == "..":
                if resolved:
                    resolved.pop()
                continue
            here = "/".join([*resolved, part])
            if parts or follow_last:
                attributes = await self.fs.lookup(here)
                if stat.S_ISLNK(attributes.st_mode):
                    links += 1
                    if links > 40:
                        raise pyfuse3.FUSEError(errno.ELOOP)
                    target = await self.fs.readlink(here)
                    if target.startswith("/"):
                        if not target.startswith(self.mountpoint + "/"):
                            raise pyfuse3.FUSEError(errno.ENOENT)  # outside the mount
                        target, resolved = target[len(self.mountpoint) + 1:], []
                    parts = [p for p in target.split("/") if p and p != "."] + parts
                    continue
            resolved.append(part)
        return "/".join(resolved)

    @_errors
    async def listdir(self, path: str = "") -> list[str]:
        return await self.fs.listdir(await self._resolve(path))

    @_errors
    async def read(self, path: str) -> bytes:
        return await self.fs.read(await self._resolve(path))

    @_errors
    async def write(self, path: str, data: bytes) -> None:
        await self.fs.write(await self._resolve(path), data)

    @_errors
    async def create(self, path: str, data: bytes) -> None:
        await self.fs.create(await self._resolve(path, follow_last=False), data)

    @_errors
    async def mkdir(self, path: str) -> None:
        await self.fs.mkdir(await self._resolve(path, follow_last=False))

    @_errors
    async def rmdir(self, path: str) -> None:
        await self.fs.rmdir(await self._resolve(path, follow_last=False))

    @_errors
    async def unlink(self, path: str) -> None:
        await self.fs.unlink(await self._resolve(path, follow_last=False))

    async def remove_tree(self, path: str) -> None:
        """As ``rm -r`` does it: depth first, unlink what is not a directory (links
        too: never followed), then rmdir."""
        await self._remove_tree(await _errors(self._resolve)(path, follow_last=False))

    @_errors
    async def _remove_tree(self, path: str) -> None:
        for entry in await self.fs.readdir(path):
            if entry.name in (".", ".."):
                continue
            child = f"{path}/{entry.name}"
            if stat.S_ISDIR(entry.attributes.st_mode):
                await self._remove_tree(child)
            else:
                await self.fs.unlink(child)
        await self.fs.rmdir(path)

    @_errors
    async def symlink(self, path: str, target: str) -> None:
        await self.fs.symlink(await self._resolve(path, follow_last=False), target)

    @_errors
    async def readlink(self, path: str) -> str:
        return await self.fs.readlink(await self._resolve(path, follow_last=False))

    @_errors
    async def rename(self, old: str, new: str) -> None:
        await self.fs.rename(await self._resolve(old, follow_last=False),
                             await self._resolve(new, follow_last=False))

    @_errors
    async def getxattr(self, path: str, name: str) -> bytes:
        return await self.fs.getxattr(await self._resolve(path), name.encode())

    async def exists(self, path: str) -> bool:
        try:
            await self.fs.lookup(await self._resolve(path, follow_last=False))
        except pyfuse3.FUSEError as exc:
            if exc.errno == errno.ENOENT:
                return False
            raise OSError(exc.errno, os.strerror(exc.errno)) from None
        return True
