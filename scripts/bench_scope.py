#!/usr/bin/env python3
"""What a scoped listing costs when the client filters it itself (the platform, whose
``ontology`` filter finds nothing), against the same listing unscoped and, where the
server says it filters by sources (the embedded server), scoped by the server.

    .venv/bin/python scripts/bench_scope.py --api-url URL --client-id ID \\
        --client-secret-file FILE --ontology NAME [--rounds 3] QUERY...

For each query, interleaved so that a shared machine's load hits every variant alike:

- ``unscoped``: the listing of the query over every ontology (the reference);
- ``scoped``: the same listing in ``--ontology``, as the mount runs it against this
  server (by the server where it says it filters by sources, else by the client);
- ``by client``: the same, filtered by the client whatever the server says (what a
  scoped listing costs against the platform, measured on any server's corpus).

Prints, per variant, the searches sent and the listing's time (p50 over the rounds and
queries), each as a ratio to the reference. Each listing inherits the server default
and is cut as a query directory's is.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import httpx
import trio

from kg_fuse.client.api import KgApiClient
from kg_fuse.client.credentials import Credentials
from kg_fuse.limits import DEFAULT_LIMIT
from kg_fuse.listing.execute import execute
from kg_fuse.listing.plan import inheriting_plan


class Counting(httpx.AsyncHTTPTransport):
    """The network, counting the searches sent."""

    searches = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/query/search":
            self.searches += 1
        return await super().handle_async_request(request)


async def measure(args: argparse.Namespace) -> None:
    secret = Path(args.client_secret_file).read_text().strip()
    transport = Counting()
    client = KgApiClient(args.api_url, Credentials(args.client_id, secret, "bench"),
                         timeout=60, transport=transport)
    variants = {"unscoped": (), "scoped": (args.ontology,), "by client": (args.ontology,)}
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    searches: dict[str, list[int]] = {name: [] for name in variants}
    listed: dict[str, list[int]] = {name: [] for name in variants}
    try:
        for _ in range(args.rounds):
            for text in args.queries:
                for name, scope in variants.items():
                    learned = client.scopes
                    if name == "by client":
                        client.scopes = False
                    before = transport.searches
                    started = time.perf_counter()
                    outcome = await execute(client, inheriting_plan(text, scope,
                                                                    DEFAULT_LIMIT))
                    seconds[name].append(time.perf_counter() - started)
                    searches[name].append(transport.searches - before)
                    listed[name].append(len(outcome.hits))
                    if name == "by client":
                        client.scopes = learned
    finally:
        await client.aclose()
    how = {None: "not asked", True: "by the server", False: "by the client"}[client.scopes]
    print(f"{len(args.queries)} queries x {args.rounds} rounds; scope {args.ontology!r} "
          f"applied {how}")
    reference_time = statistics.median(seconds["unscoped"])
    reference_searches = statistics.mean(searches["unscoped"])
    print(f"{'variant':<10} {'searches/listing':>17} {'ratio':>6} {'p50 ms':>8} {'ratio':>6} "
          f"{'files p50':>9}")
    for name in variants:
        mean_searches = statistics.mean(searches[name])
        p50 = statistics.median(seconds[name])
        print(f"{name:<10} {mean_searches:>17.2f} {mean_searches / reference_searches:>6.2f} "
              f"{p50 * 1000:>8.1f} {p50 / reference_time:>6.2f} "
              f"{statistics.median(listed[name]):>9g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api-url", required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--client-secret-file", required=True)
    parser.add_argument("--ontology", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("queries", nargs="+")
    trio.run(measure, parser.parse_args())


if __name__ == "__main__":
    main()
