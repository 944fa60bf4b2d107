#!/usr/bin/env python3
"""Every model, every eval set: quality and cost per model, in one run. Prints figures;
asserts nothing.

    .venv/bin/python scripts/eval_models.py --work /tmp/models [--model NAME ...]
        [--corpus stdlib --corpus kitchen --corpus manpages] [--reference CHECKOUT]

For each model (default: every model ``kg-fuse model list`` shows installed; the models
this user installed or added are shared by every run's own data folder) and each
corpus, a store of its own is built from nothing with ``kg-fuse index --model NAME`` (timed: the
build rate), served with ``kg-fuse serve --model NAME`` (timed to its first ``/health``:
the start), searched once with each of 60 queries it has not seen (the search p50, over
HTTP, embedding included), read for its resident memory (VmRSS), then measured with
``kg-fuse eval --json`` over every shipped set of that corpus: the calibrated default,
gibberish that lists anything, the expected concept listed (at the mount's cut), the
median listing, and judged precision and recall.

``--reference CHECKOUT`` measures another checkout's code the same way in the same run
(this environment's interpreter, ``PYTHONPATH=CHECKOUT``), with the default model only,
so today's model's figures and cost read against the code before a change. The
manual pages' corpus needs ``scripts/man_corpus.sh`` (man-db).

``--cost ROUNDS`` measures cost only, the reference and each model taking turns round by
round (a shared machine's load then hits all alike): a build of the standard library's
``--modules`` from nothing, a start, 60 new searches and the resident memory; it prints
each one's medians and their ratios to the reference's.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import httpx
import platformdirs

ROOT = Path(__file__).resolve().parent.parent
SETS = ROOT / "kg_fuse" / "eval" / "sets"
KITCHEN = ROOT / "kg_fuse" / "eval" / "corpora" / "kitchen"
DEFAULT_MODEL = "all-MiniLM-L6-v2"
#: The models installed for this environment's user, which every run's data folder shares.
MODELS = Path(platformdirs.user_data_dir("kg-fuse")) / "models"


def corpus_of(set_file: Path) -> str | None:
    serve = tomllib.loads(set_file.read_text()).get("serve", "")
    if "man_corpus" in serve:
        return "manpages"
    if "kitchen" in serve:
        return "kitchen"
    return "stdlib" if serve.strip() == "kg-fuse serve" else None


def sets_by_corpus() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(SETS.glob("*.toml")):
        corpus = corpus_of(path)
        if corpus:
            found.setdefault(corpus, []).append(path.stem)
    return found


def corpus_args(corpus: str, work: Path) -> list[str]:
    if corpus == "stdlib":
        return []
    if corpus == "kitchen":
        return ["--corpus", "none", "--ingest", str(KITCHEN)]
    pages = work / "man-pages"
    if not pages.exists():
        subprocess.run([str(ROOT / "scripts" / "man_corpus.sh"), str(pages)], check=True)
    return ["--corpus", "none", "--ingest", str(pages)]


class Runner:
    """``kg-fuse`` of one checkout, in its own data and config folders."""

    def __init__(self, checkout: Path | None, home: Path) -> None:
        self.home = home
        self.env = {**os.environ, "XDG_DATA_HOME": str(home / "data"),
                    "XDG_CONFIG_HOME": str(home / "config"), "HF_HUB_OFFLINE": "1"}
        # its own store and credentials, but the models installed here (model install, add)
        models = home / "data" / "kg-fuse" / "models"
        if not models.exists():
            models.parent.mkdir(parents=True, exist_ok=True)
            models.symlink_to(MODELS, target_is_directory=True)
        # the code measured is the checkout's, not whatever the environment installed
        self.env.update(PYTHONPATH=str(checkout or ROOT), PYTHONSAFEPATH="1")

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "kg_fuse.cli", *args]

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(*args), env=self.env, capture_output=True,
                              text=True, check=False)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def search_queries() -> list[str]:
    data = tomllib.loads((SETS / "heldout.toml").read_text())
    return [q["text"] for q in data["query"]][:60]


def measure(runner: Runner, model: str | None, corpus: str, sets: list[str],
            work: Path, extra: list[str] | None = None) -> dict:
    model_args = ["--model", model] if model else []
    extra = corpus_args(corpus, work) + (extra or [])
    started = time.perf_counter()
    built = runner.run("index", *model_args, *extra)
    build_s = time.perf_counter() - started
    if built.returncode != 0:
        return {"error": built.stderr.strip().splitlines()[-1:]}
    concepts = int(built.stdout.split("index ready: ")[1].split()[0])
    port = free_port()
    log = open(runner.home / "serve.log", "ab")  # noqa: SIM115 - closed below
    started = time.perf_counter()
    server = subprocess.Popen(runner.argv("serve", "--port", str(port), *model_args, *extra),
                              env=runner.env, stdout=log, stderr=log)
    row: dict = {"concepts": concepts, "build_s": round(build_s, 1),
                 "build_rate": round(concepts / build_s, 1)}
    try:
        url = f"http://127.0.0.1:{port}"
        while True:
            try:
                health = httpx.get(f"{url}/health", timeout=2).json()
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        row["start_s"] = round(time.perf_counter() - started, 2)
        row["served_model"] = health.get("embedding_model")
        if corpus == "stdlib":
            row.update(latency(runner, url))
            row["rss_mib"] = round(rss_mib(server.pid), 1)
        if sets:
            evaluated = runner.run("eval", *[a for s in sets for a in ("--set", s)],
                                   "--json")
            report = json.loads(evaluated.stdout)
            row["sets"] = {s["set"]: summary(s) for s in report.get("sets", [report])}
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait()
        log.close()
    return row


def latency(runner: Runner, url: str) -> dict:
    creds = json.loads((runner.home / "config" / "kg-fuse" /
                        "server-credentials.json").read_text())["user"]
    with httpx.Client(base_url=url, timeout=60) as http:
        token = http.post("/auth/oauth/token", data={"grant_type": "client_credentials",
                                                     **creds}).json()["access_token"]
        http.headers["Authorization"] = f"Bearer {token}"
        times = []
        for text in search_queries():
            started = time.perf_counter()
            http.post("/query/search", json={"query": text, "limit": 50}).raise_for_status()
            times.append(time.perf_counter() - started)
    return {"search_p50_ms": round(statistics.median(times) * 1000, 1)}


def summary(one: dict) -> dict:
    s = one["summary"]
    out = {"default": s["default_threshold"],
           "gibberish_listing": s["gibberish_listing_anything"],
           "gibberish": len(one["gibberish"]), "listed": s["relevant_listed"],
           "relevant": len(one["relevant"]), "listing_median": s["listing_size"]["median"]}
    if s.get("judged"):
        out["precision"] = s["judged"]["precision"]
        out["recall"] = s["judged"]["recall"]
    return out


def cost(args: argparse.Namespace, runs: list[tuple[str, Path | None, str | None]]) -> None:
    """Interleaved rounds of build, start, searches and memory; medians and ratios."""
    samples: dict[str, list[dict]] = {label: [] for label, _, _ in runs}
    modules = ["--modules", args.modules] if args.modules else []
    for round_no in range(args.cost):
        for label, checkout, model in runs:
            home = args.work / "cost" / f"{label.replace(' ', '-')}-{round_no}"
            home.mkdir(parents=True, exist_ok=True)
            row = measure(Runner(checkout, home), model, "stdlib", [], args.work,
                          extra=modules)
            samples[label].append(row)
            print(json.dumps({"model": label, "round": round_no, **row}), flush=True)
    keys = ("build_rate", "start_s", "search_p50_ms", "rss_mib")
    medians = {label: {k: statistics.median(r[k] for r in rows) for k in keys}
               for label, rows in samples.items()}
    reference = medians[runs[0][0]]
    for label, values in medians.items():
        ratios = ", ".join(f"{k} {values[k]:g} ({values[k] / reference[k]:.2f}x)"
                           for k in keys)
        print(f"{label}: {ratios}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--model", action="append", default=[])
    parser.add_argument("--corpus", action="append", default=[])
    parser.add_argument("--reference", type=Path)
    parser.add_argument("--cost", type=int, default=0, metavar="ROUNDS")
    parser.add_argument("--modules", default="", help="--cost: the modules built")
    args = parser.parse_args()
    corpora = sets_by_corpus()
    wanted = args.corpus or list(corpora)
    listed = Runner(None, args.work / "list").run("model", "list").stdout.splitlines()
    models = args.model or [line.lstrip("* ").split()[0]  # "*" marks the model in use
                            for line in listed[1:]  # under the header
                            if line.strip() and line[2:].split()[1] != "-"]  # installed
    results: dict[str, dict] = {}
    runs: list[tuple[str, Path | None, str | None]] = [(m, None, m) for m in models]
    if args.reference:
        runs.insert(0, ("reference " + DEFAULT_MODEL, args.reference.resolve(), None))
    if args.cost:
        cost(args, runs)
        return 0
    for corpus in wanted:
        for label, checkout, model in runs:
            home = args.work / label.replace(" ", "-") / corpus
            home.mkdir(parents=True, exist_ok=True)
            row = measure(Runner(checkout, home), model, corpus, corpora[corpus], args.work)
            results.setdefault(label, {})[corpus] = row
            print(json.dumps({"model": label, "corpus": corpus, **row}), flush=True)
    (args.work / "results.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
