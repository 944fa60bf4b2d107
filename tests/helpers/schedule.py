"""How the suite's modules are shared among pytest-xdist workers: longest first.

``--dist loadfile`` keeps a module (and its module-scoped servers and mounts) in one
worker and hands modules out in order of their number of tests. Our long modules are
not the ones with many tests, so a worker could start a 30-second module while the
other had nothing left to do. Here the longest module waiting goes to the next free
worker (longest-processing-time-first), by the seconds each took in a clean-clone run;
the modules not in the table (all short) follow, most tests first. The order changes only
the suite's wall time, never what runs.

The kernel-free modules share one unit: each worker that runs one loads the model in
process, so they run in one worker, once.
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadFileScheduling

CORE_UNIT = "tests/core/"
SECONDS_PER_TEST = 0.01  # a module the table does not know: after every one it knows

# Seconds per module (with its fixtures) in clean-clone runs, two workers; modules of
# 8 s or more. Refresh when a module grows: `pytest --durations=0` sums per module.
MODULE_SECONDS = {
    "tests/robustness/test_faults.py": 50,
    CORE_UNIT: 29,
    "tests/robustness/test_stateful.py": 27,
    "tests/readme/test_readme_blocks.py": 26,
    "tests/server/test_fuzz_openapi.py": 25,
    "tests/robustness/test_kernel_invalidation.py": 22,
    "tests/fs/test_mount_user_words.py": 20,
    "tests/robustness/test_kill.py": 18,
    "tests/fs/test_mount_links_ingest.py": 17,
    "tests/server/test_graph_updates.py": 15,
    "tests/server/test_corpus.py": 14,
    "tests/fs/test_mount_hostile.py": 14,
    "tests/server/test_lifecycle.py": 14,
    "tests/fs/test_mount_first_hour.py": 13,
    "tests/robustness/test_kernel_caches.py": 13,
    "tests/server/test_scan.py": 12,
    "tests/robustness/test_server_outages.py": 11,
    "tests/robustness/test_mount_lifecycle.py": 9,
    "tests/fs/test_mount_floor.py": 9,
    # not yet timed in CI: half of a local run on the loaded shared machine
    "tests/readme/test_doc_examples.py": 30,
    "tests/cli/test_cli_help_is_true.py": 18,
    # a 35-second soak and the server's first start: 47 s in three local runs, alone
    "tests/robustness/test_soak.py": 47,
}


class LongestFirst(LoadFileScheduling):
    """``--dist loadfile``, handing out the longest waiting module first."""

    def _split_scope(self, nodeid: str) -> str:
        if nodeid.startswith(CORE_UNIT):
            return CORE_UNIT
        return super()._split_scope(nodeid)

    def _seconds(self, scope: str) -> float:
        return MODULE_SECONDS.get(scope, SECONDS_PER_TEST * len(self.workqueue[scope]))

    def _assign_work_unit(self, node: Any) -> None:
        longest = max(self.workqueue, key=self._seconds)
        self.workqueue.move_to_end(longest, last=False)  # the base class pops the first
        super()._assign_work_unit(node)
