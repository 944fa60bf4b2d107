"""Telling the kernel to forget what it cached, without ever blocking the loop.

Result files are cached by the kernel (positive entry and attribute timeouts, pages kept
across opens), so every change of a listing has to be pushed to it: a name that left is
invalidated (``invalidate_entry``), a file whose bytes changed has its attributes and
pages dropped (``invalidate_inode``).

Both notifications can block in the kernel: an entry invalidation waits for the
directory's lock, which a ``lookup`` or ``readdir`` in that directory holds while it waits
for *this* process to answer. So they are sent from a worker thread (pyfuse3 releases the
GIL around them) while the trio loop keeps answering. Handlers that change a listing on
purpose (a ``.meta`` write, ``opendir`` after a refetch) wait for the notifications, with
a bound, so the change is visible when the command returns; handlers that run while the
kernel holds the directory's lock (``lookup``, ``mkdir``, ``rmdir``, ``symlink``) only
queue them, and the background task sends them a moment later.
"""

from __future__ import annotations

import errno
import logging

import pyfuse3
import trio

log = logging.getLogger(__name__)

FLUSH_WAIT = 5.0  # seconds a handler waits for the kernel to take its notifications


class KernelCache:
    def __init__(self) -> None:
        self.enabled = False  # set once mounted: without a session there is nothing to tell
        self._names: dict[tuple[int, bytes], None] = {}  # ordered set
        self._inodes: dict[int, None] = {}
        self._lock = trio.Lock()
        self._wake = trio.Event()
        self.sent = 0  # notifications the kernel took (for tests and the benchmark)

    @property
    def pending(self) -> bool:
        return bool(self._names or self._inodes)

    def forget_name(self, parent_inode: int, name: str) -> None:
        if self.enabled:
            self._names[(parent_inode, name.encode("utf-8", "surrogateescape"))] = None

    def forget_content(self, inode: int) -> None:
        """Drop the inode's cached attributes and pages (its bytes or size changed)."""
        if self.enabled:
            self._inodes[inode] = None

    def flush_soon(self) -> None:
        """Have the background task send what is queued."""
        if self.pending:
            self._wake.set()

    async def flush(self, wait: float = FLUSH_WAIT) -> None:
        """Send what is queued and wait (at most ``wait`` seconds) until the kernel took
        it, and whatever the background task is sending; past the bound the worker
        carries on alone and the caller goes on."""
        if not self.pending and not self._lock.locked():
            return
        with trio.move_on_after(wait) as scope:
            async with self._lock:  # also waits for a batch the background task is sending
                names, self._names = list(self._names), {}
                inodes, self._inodes = list(self._inodes), {}
                if names or inodes:
                    await trio.to_thread.run_sync(self._send, names, inodes,
                                                  abandon_on_cancel=True)
        if scope.cancelled_caught:
            log.info("the kernel did not take its cache notifications within %gs", wait)

    def _send(self, names: list[tuple[int, bytes]], inodes: list[int]) -> None:
        """In a worker thread: one notification at a time (the kernel may block each)."""
        for parent, name in names:
            try:
                pyfuse3.invalidate_entry(parent, name)
                self.sent += 1
            except OSError as exc:  # ENOENT: the kernel did not have it
                self._failed(exc)
        for inode in inodes:
            try:
                pyfuse3.invalidate_inode(inode)
                self.sent += 1
            except OSError as exc:
                self._failed(exc)

    @staticmethod
    def _failed(exc: OSError) -> None:
        if exc.errno != errno.ENOENT:  # e.g. while unmounting
            log.info("cache notification refused: %s", exc)

    async def run(self) -> None:
        """Background task: send queued notifications whenever some arrive."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            await self.flush()
