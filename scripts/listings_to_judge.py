"""Today's listings of a sample of queries, written out for judging by hand.

Picks ``--pick`` queries at random (``--seed``) from the relevant queries of the given
sets, lists each the way a query directory that inherits the default does (the mount's
plan code in kg_fuse.listing, not cut: every file above the default, up to
``--limit``), and prints JSON: per query its text, the sets' expected labels, and every
listed file's label, score and description. A person then marks each label relevant or
not; ``kg_fuse/eval/sets/judged-*.toml`` hold those judgments.

    python scripts/listings_to_judge.py --api-url URL --set stdlib --set heldout \\
        --pick 22 --seed 24 > to-judge.json
"""

from __future__ import annotations

import argparse
import json
import random

import trio

from kg_fuse.client import KgApiClient, resolve_connection
from kg_fuse.eval import sets
from kg_fuse.limits import DEFAULT_LIMIT
from kg_fuse.listing.execute import execute
from kg_fuse.listing.plan import inheriting_plan


async def _listings(api_url: str, queries: list[sets.RelevantQuery], ontology: str | None,
                    limit: int) -> list[dict]:
    connection = resolve_connection(api_url)
    client = KgApiClient(connection.api_url, connection.credentials, timeout=60.0)
    out = []
    try:
        for query in queries:
            plan = inheriting_plan(query.text, (ontology,) if ontology else (), limit,
                                   cut=False)
            outcome = await execute(client, plan)
            out.append({"text": query.text, "expect": list(query.expect),
                        "listing": [{"label": h.label, "score": round(h.score, 4),
                                     "description": h.description[:240]}
                                    for h in outcome.hits]})
    finally:
        await client.aclose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api-url", required=True)
    parser.add_argument("--set", dest="names", action="append", required=True)
    parser.add_argument("--pick", type=int, default=22)
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT)
    args = parser.parse_args()
    loaded = [sets.load(name) for name in args.names]
    pool = list({q.text: q for qset in loaded for q in qset.relevant}.values())
    picked = random.Random(args.seed).sample(pool, min(args.pick, len(pool)))
    listings = trio.run(_listings, args.api_url, picked, loaded[0].ontology, args.limit)
    print(json.dumps(listings, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
