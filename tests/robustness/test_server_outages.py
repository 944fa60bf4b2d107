"""The real server goes away and comes back: a file dropped for ingest meanwhile is not
lost, and a server restarted without its tokens (and with short-lived ones) is used again
without a remount, each call bounded meanwhile. These tests stop their own copy of the
session server (split from ``test_faults.py``, whose proxy only pretends)."""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kg_fuse.retry import SERVER_RETRY
from tests.helpers.faults import FaultProxy, proxy_env
from tests.helpers.mount import Mount
from tests.robustness.conftest import (
    FAULT_LOG,
    ONTOLOGY_DIR,
    RELEVANT,
    result_names,
    status_lines,
    timed,
    wait_until,
)
from tests.robustness.test_faults import BOUND, fetched_query, store_of

pytestmark = pytest.mark.mount


@pytest.fixture(scope="module")
def module_server(kg_server_clone: Callable[..., Any]) -> Iterator[Any]:
    server = kg_server_clone()  # one copy for the tests that add a document or stop it
    yield server
    server.stop()


@pytest.fixture
def private_server(module_server: Any) -> Any:
    """Not the shared server; running with its default arguments (a test that restarted
    it with others leaves it so: it is restarted here only if a later test needs it)."""
    if module_server.extra_args or module_server.process is None:
        module_server.restart(extra_args=[])  # stopped first: one server on its port
    return module_server


# Regression test (a bug this suite found; fixed in 6621f55):
# a failed upload discarded the dropped file, with no retry.
@pytest.mark.timeout(120)
def test_a_file_dropped_for_ingest_while_the_server_is_down_is_not_lost(
        private_server: Any, mount_factory: Callable[..., Mount]) -> None:
    server = private_server  # this test adds a document: not the shared server
    with FaultProxy(server.api_url) as fault:
        mount = mount_factory(
            server=server, env=proxy_env(server),
            extra_args=["--api-url", fault.url, "--timeout", "1", "--probe-timeout", "1",
                        "--ingest-delay", "0.2"],
            allowed_log=[*FAULT_LOG, r"WARNING kg_fuse\.fs\.queries\.ingest: upload of"])
        ontology = sorted(os.listdir(mount.path(ONTOLOGY_DIR)))[0]
        drop = mount.path(ONTOLOGY_DIR, ontology, "ingest")
        text = "# Sourdough starter\n\nFeed the starter with flour and water daily.\n"
        fault.set_mode("reset")
        (drop / "bread.md").write_text(text)  # e.g. `mv ~/bread.md .../ingest/`
        wait_until(lambda: fault.count("/ingest") > 0, timeout=10,
                   message="the upload being attempted")
        time.sleep(0.5)
        fault.set_mode("pass")

        def ingested_or_kept() -> bool:
            documents = os.listdir(mount.path(ONTOLOGY_DIR, ontology, "documents"))
            if any(d.startswith("bread") for d in documents):
                return True
            return any(p.is_file() and p.read_text(errors="replace") == text
                       for p in drop.iterdir())

        wait_until(ingested_or_kept, timeout=15, interval=0.5,
                   message="the dropped file ingested, or still there to recover")


@pytest.mark.timeout(150)
def test_server_stopped_then_restarted_without_its_tokens(
        private_server: Any, mount_factory: Callable[..., Mount]) -> None:
    """The real server goes away (connection refused) and comes back having forgotten
    every token, and issuing tokens that expire in 2 s: bounded errnos meanwhile, then
    fresh results with one new token, a new one once it expired, and no remount. (No
    background polling here, so only the listings use the token.)"""
    server = private_server
    mount = mount_factory(
        extra_args=["--api-url", server.api_url, "--timeout", "1", "--probe-timeout", "1",
                    "--poll-interval", "3600", "--max-age", "1"],
        env=proxy_env(server), allowed_log=FAULT_LOG)
    names, body = fetched_query(mount)
    fresh = ["tar archives", "csv files", "zip files", "base64 encoding"]
    time.sleep(1.1)

    server.stop()
    outcomes = {
        "ls fetched": timed(lambda: result_names(mount.path(RELEVANT))),
        "cat fetched": timed(lambda: mount.path(RELEVANT, names[0]).read_bytes()),
        "mkdir": timed(lambda: [mount.path(n).mkdir() for n in fresh]),
        "ls never fetched": timed(lambda: os.listdir(mount.path(fresh[0]))),
        "write threshold": timed(
            lambda: mount.path(fresh[1], ".meta", "threshold").write_text("0.45\n")),
        "mkdir with threshold": timed(lambda: mount.path("json@0.5").mkdir()),
        "rmdir": timed(lambda: os.rmdir(mount.path("json@0.5"))),
    }
    # (.meta/status is bounded separately: see test_status_read_is_bounded_...)
    status = timed(lambda: status_lines(mount, RELEVANT))
    assert all(o.seconds <= BOUND for o in outcomes.values()), outcomes
    assert outcomes["ls never fetched"].errno == errno.ECONNREFUSED, outcomes
    assert [k for k, o in outcomes.items() if not o.ok] == ["ls never fetched"], outcomes
    assert outcomes["ls fetched"].value == names
    assert outcomes["cat fetched"].value == body
    assert status.ok and "stale" in status.value["fetched"], status.value

    # the restarted server has no record of the mount's token
    with contextlib.closing(sqlite3.connect(server.db_path)) as db, db:
        db.execute("DELETE FROM tokens")
    server.extra_args = ["--token-ttl", "2"]  # and from now on tokens expire quickly
    server.start()
    # A restarted server's first searches are slow (a cold model): warm it, or the mount's
    # 1 s deadline trips on a busy machine. The admin's token is counted before the mount's.
    with server.client("admin") as http:
        assert http.post("/query/search", json={"query": "warm up", "limit": 1}).status_code == 200
    issued = server.log_text().count("issued a token")
    # the listing that failed once (refused) is asked again when the policy's first
    # retry is due, at most 1 s after: wait for it, the test is about the tokens
    time.sleep(SERVER_RETRY.initial + SERVER_RETRY.jitter)
    listings: dict[str, Any] = {}

    def list_one(name: str) -> None:
        listings[name] = timed(lambda: result_names(mount.path(name)))

    threads = [threading.Thread(target=list_one, args=(n,)) for n in fresh]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    took = time.monotonic() - started
    assert all(o.ok and o.value for o in listings.values()), listings
    # one token for all four listings' requests (no storm of token requests), and one
    # more per token lifetime the listings outlasted on a busy machine (2 s, used 1.8 s)
    new_tokens = server.log_text().count("issued a token") - issued
    assert 1 <= new_tokens <= 1 + int(took / 1.8), (new_tokens, took)
    time.sleep(2.5)  # the new token has expired
    mount.path("read csv rows").mkdir()
    assert result_names(mount.path("read csv rows"))
    assert server.log_text().count("issued a token") == issued + new_tokens + 1
    assert status_lines(mount, RELEVANT)["fetched"].endswith("(fresh)")
    assert status_lines(mount, fresh[1])["effective threshold"].startswith("0.45")
    assert mount.unmount() == 0
    assert store_of(mount) == {RELEVANT: "inherit", fresh[0]: "inherit", fresh[1]: 0.45,
                               fresh[2]: "inherit", fresh[3]: "inherit",
                               "read csv rows": "inherit"}


@pytest.mark.timeout(120)
def test_status_says_the_server_stopped_on_its_next_read(
        private_server: Any, mount_factory: Callable[..., Mount]) -> None:
    """Right after ``kg-fuse server stop`` a held listing is still fresh for ``--max-age``
    and the next poll is far off (here an hour), yet the next read of ``.meta/status``
    says the server is gone; and the first read after it is back says fresh again."""
    server = private_server
    mount = mount_factory(
        extra_args=["--api-url", server.api_url, "--poll-interval", "3600"],
        env=proxy_env(server), allowed_log=FAULT_LOG)
    fetched_query(mount)
    assert status_lines(mount, RELEVANT)["fetched"].endswith("(fresh)")

    server.stop()
    status = timed(lambda: status_lines(mount, RELEVANT))
    assert status.ok and status.seconds <= BOUND, status
    assert status.value["fetched"].endswith("(stale: server unavailable)"), status.value
    assert "connect" in status.value.get("error", "").lower(), status.value

    server.start()
    assert status_lines(mount, RELEVANT)["fetched"].endswith("(fresh)")
    assert "error" not in status_lines(mount, RELEVANT)
    assert mount.unmount() == 0


# Regression test (issue 34): with the server stopped, `echo 0.5 > Q/.meta/threshold;
# ls Q` failed with ECONNREFUSED, where the docs promise the cached listing at once; and
# the status showed the new threshold with the old listing's counts.
@pytest.mark.timeout(150)
def test_a_setting_written_while_the_server_is_stopped_waits_for_it(
        private_server: Any, mount_factory: Callable[..., Mount]) -> None:
    """The setting is accepted and saved at once, ``ls`` serves the last listing, the
    status says the setting waits for the server (and which listing it shows); once the
    server is back, the listing follows the setting, without a remount."""
    server = private_server
    mount = mount_factory(
        extra_args=["--api-url", server.api_url, "--poll-interval", "2"],
        env=proxy_env(server), allowed_log=FAULT_LOG)
    names, body = fetched_query(mount)
    inherited = status_lines(mount, RELEVANT)["threshold used by the server"]

    server.stop()
    threshold = mount.path(RELEVANT, ".meta", "threshold")
    written = timed(lambda: threshold.write_text("0.5\n"))
    listed = timed(lambda: result_names(mount.path(RELEVANT)))
    read = timed(lambda: mount.path(RELEVANT, names[0]).read_bytes())
    for outcome in (written, listed, read):
        assert outcome.ok and outcome.seconds <= BOUND, (written, listed, read)
    assert listed.value == names and read.value == body
    assert threshold.read_text().splitlines()[-1] == "0.5"
    assert store_of(mount)[RELEVANT] == 0.5  # saved while the server is down
    status = status_lines(mount, RELEVANT)
    assert status["effective threshold"] == "0.5 (override)"
    assert status["pending"].endswith(
        f"fetched for the earlier settings (threshold {inherited}, limit 50)"), status
    assert status["results"] == str(len(names))
    assert status["fetched"].endswith("(stale: server unavailable)")
    assert "matches" not in status["level 1"] and "more" not in status

    server.start()
    wait_until(lambda: result_names(mount.path(RELEVANT)) is not None and status_lines(
        mount, RELEVANT)["threshold used by the server"] == "0.5", timeout=30,
               interval=0.5, message="the listing following the new threshold")
    # 0.5, above the default: never more than inheriting listed
    assert set(result_names(mount.path(RELEVANT))) <= set(names)
    status = status_lines(mount, RELEVANT)
    assert "pending" not in status and status["fetched"].endswith("(fresh)"), status
    assert status["threshold used by the server"] == "0.5"
    assert mount.unmount() == 0
    assert store_of(mount)[RELEVANT] == 0.5


# Regression test (issue 26): while the server failed, a running job's status was asked
# for every 0.5 s.
@pytest.mark.timeout(120)
def test_job_status_polls_back_off_while_the_server_fails(
        private_server: Any, mount_factory: Callable[..., Mount]) -> None:
    """A file dropped for ingest is accepted, then the server fails every job status
    request: the mount asks less and less often (0.5 s, 1 s, 2 s, 4 s), and once the
    server answers again the job file goes away as the job completes."""
    server = private_server  # this test adds a document: not the shared server
    with FaultProxy(server.api_url) as fault:
        mount = mount_factory(
            server=server, env=proxy_env(server),
            extra_args=["--api-url", fault.url, "--timeout", "1", "--probe-timeout", "1",
                        "--ingest-delay", "0.2", "--poll-interval", "3600"],
            allowed_log=FAULT_LOG)
        ontology = sorted(os.listdir(mount.path(ONTOLOGY_DIR)))[0]
        drop = mount.path(ONTOLOGY_DIR, ontology, "ingest")
        fault.set_mode("reset", paths=["/jobs"])
        (drop / "rye.md").write_text("# Rye bread\n\nRye dough is sticky; proof it in a "
                                     "floured banneton for three hours.\n")
        wait_until(lambda: fault.count("/ingest", action="pass") > 0, timeout=10,
                   message="the upload being accepted")
        accepted = fault.mark()
        time.sleep(6.0)
        polls = fault.count("/jobs", since=accepted)
        # every 0.5 s would be 12; the policy's 0.5, 1, 2 and 4 s make at most 5
        assert 1 <= polls <= 5, [r for r in fault.requests[accepted:]]
        assert (drop / "rye.md.ingesting").exists()  # still followed, not given up
        fault.set_mode("pass")
        wait_until(lambda: not (drop / "rye.md.ingesting").exists(), timeout=30,
                   interval=0.2, message="the job file gone once the job completed")
        assert not (drop / "rye.md").exists()


# Regression test (issue 26): while the server was down every read of a query that was
# never listed asked the server again at once.
@pytest.mark.timeout(150)
def test_a_stopped_server_is_asked_under_the_policy_and_picked_up_within_its_cap(
        private_server: Any, mount_factory: Callable[..., Mount]) -> None:
    """A program reads a query that was never listed ten times a second while the server
    is stopped: each read fails at once with ECONNREFUSED, but the server is asked only
    at the policy's retries (0.5 s, 1 s, 2 s, 4 s, then every 5 s). The program keeps
    reading while the server restarts; once it answers (no poll here: only the
    listing's own retries can notice), the query lists within the policy's cap."""
    server = private_server
    with FaultProxy(server.api_url) as fault:
        mount = mount_factory(
            server=server, env=proxy_env(server),
            extra_args=["--api-url", fault.url, "--timeout", "5", "--probe-timeout", "1",
                        "--poll-interval", "3600"],
            allowed_log=FAULT_LOG)
        fetched_query(mount)  # the mount knows the server's default
        mount.path("tar archives").mkdir()
        server.stop()
        mark = fault.mark()
        reads: list[tuple[float, Any]] = []

        def reader() -> None:  # until the query lists, or 60 s
            until = time.monotonic() + 60
            while time.monotonic() < until:
                reads.append((time.monotonic(),
                              timed(lambda: os.listdir(mount.path("tar archives")))))
                if reads[-1][1].ok:
                    return
                time.sleep(0.1)

        thread = threading.Thread(target=reader)
        thread.start()
        time.sleep(8.0)
        asked = fault.count("/query/search", since=mark, action="refused")
        restarting = time.monotonic()
        server.start()
        back = time.monotonic()  # it answers /health
        thread.join(timeout=70)
        down = [o for at, o in reads if at < restarting]
        assert all(o.errno == errno.ECONNREFUSED and o.seconds <= BOUND for o in down), down
        # 8 s of failures: at 0, ~0.5, ~1.5, ~3.5 and ~7.5 s (plus jitter), not ~70
        assert len(down) > 40 and 1 <= asked <= 6, (asked, len(down))
        listed = [at for at, o in reads if o.ok and o.value]
        assert listed, reads[-3:]
        took = listed[0] - back
        assert took <= 5.0 + 0.5 + 2.0, took  # the cap, its jitter, and a fetch
        assert mount.unmount() == 0
