#!/usr/bin/env python3
"""Start-up time and resident memory of the two WordNet readers over the same files:
kg-fuse's own (``kg_fuse.server.search.lexicon``) and nltk's ``WordNetCorpusReader``.

    .venv/bin/python scripts/bench_wordnet.py [--rounds 3] [--dict /usr/share/wordnet]

Each reader runs in a fresh interpreter per round (rounds interleaved, so a shared
machine's load hits both alike) and reports:

- ``start``: importing the reader and opening the database, in seconds;
- ``first``: the first word's meanings looked up after that;
- ``lookups``: the work a search does with it, for every word of the shipped eval sets'
  queries and gibberish: its base forms, its meanings in each part of speech with the
  words of their broader terms, and how often its meanings occur in the sense-tagged
  texts;
- resident memory (VmRSS) after the interpreter started, after opening, after the
  lookups, and how much of the last is the process's own (anonymous) memory and how
  much file pages (the memory-mapped database: shared, and given back under pressure).

nltk's reader needs a ``lexnames`` file that Debian's ``wordnet-base`` does not ship:
the script copies the package's files into a temporary folder (nltk refuses files
linked from outside the folder it reads, and any folder it was not told of in
``nltk.data.path``) and writes the 45 standard lexicographer file names there (the only
file not the package's own), and tells the reader its files need no mapping onto
nltk's own downloaded WordNet (otherwise it insists on that corpus and on an
``index.sense`` the package lacks). Needs
nltk (``pip install nltk``); prints the medians and the ratios nltk / kg-fuse.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

LEXNAMES = ("adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal",
            "noun.artifact", "noun.attribute", "noun.body", "noun.cognition",
            "noun.communication", "noun.event", "noun.feeling", "noun.food",
            "noun.group", "noun.location", "noun.motive", "noun.object", "noun.person",
            "noun.phenomenon", "noun.plant", "noun.possession", "noun.process",
            "noun.quantity", "noun.relation", "noun.shape", "noun.state",
            "noun.substance", "noun.time", "verb.body", "verb.change",
            "verb.cognition", "verb.communication", "verb.competition",
            "verb.consumption", "verb.contact", "verb.creation", "verb.emotion",
            "verb.motion", "verb.perception", "verb.possession", "verb.social",
            "verb.stative", "verb.weather", "adj.ppl")
LEX_SYNTAX = {"adj": 3, "adv": 4, "noun": 1, "verb": 2}

# What one fresh interpreter runs: the reader's work, timed, with VmRSS at each step.
CHILD = r'''
import json, sys, time
t0 = time.perf_counter()
def rss(key="VmRSS:"):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024
kind, root, words = sys.argv[1], sys.argv[2], json.loads(sys.stdin.read())
out = {"rss_base": rss()}
POS = ("n", "v", "a", "r")


def open_kg_fuse():
    """kg-fuse's reader, and one word's lookups as the server makes them."""
    from pathlib import Path
    from kg_fuse.server.search.lexicon import WordNet
    wn = WordNet(Path(root))

    def lookups(word, pos):
        wn.base_forms(word, pos)
        wn.tagged_senses(word, pos)
        found = 0
        for s in wn.synsets(word, pos):
            found += 1
            for symbol, offset, target in s.pointers:
                if symbol == "@":
                    wn.synset(target, offset).words
        return found
    return wn, lookups


def open_nltk():
    """nltk's reader over the same files, and the same lookups in its terms."""
    import warnings
    warnings.simplefilter("ignore")
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader
    nltk.data.path += [root, sys.argv[3]]  # nltk reads only folders it was told of
    # Left alone, the reader maps its senses onto nltk's own downloaded 'wordnet' corpus
    # through index.sense (neither is in Debian's package): the same files need no map.
    WordNetCorpusReader.map_wn = lambda self, version="wordnet": None
    wn = WordNetCorpusReader(root, None)

    def lookups(word, pos):
        wn._morphy(word, pos)
        found = 0
        for s in wn.synsets(word, pos):
            found += 1
            sum(lemma.count() for lemma in s.lemmas() if lemma.name().lower() == word)
            for h in s.hypernyms():
                h.lemma_names()
        return found
    return wn, lookups


t = time.perf_counter()
wn, lookups = open_kg_fuse() if kind == "kg-fuse" else open_nltk()
out["start"] = time.perf_counter() - t
t = time.perf_counter()
wn.synsets("dog", "n")
out["first"] = time.perf_counter() - t
out["rss_open"] = rss()
t = time.perf_counter()
found = sum(lookups(word, pos) for word in words for pos in POS)
out["lookups"] = time.perf_counter() - t
out["meanings"] = found
out["rss_end"] = rss()
out["anon_end"] = rss("RssAnon:")
out["file_end"] = rss("RssFile:")
print(json.dumps(out))
'''


def eval_words() -> list[str]:
    """Every distinct lower-case alphabetic word of the shipped eval sets."""
    from kg_fuse.eval.sets import BUILTIN_DIR

    words: set[str] = set()
    for path in sorted(BUILTIN_DIR.glob("*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        texts = [q["text"] for q in data.get("query", [])]
        texts += list(data.get("gibberish", [])) + list(data.get("queries", []))
        for text in texts:
            words.update(w for w in text.lower().split() if w.isalpha() and w.isascii())
    return sorted(words)


def nltk_root(debian: Path, folder: Path) -> Path:
    """Debian's files, copied (nltk refuses a file linked from outside its root), plus
    the lexnames file nltk's reader insists on."""
    for source in debian.iterdir():
        shutil.copyfile(source, folder / source.name)
    (folder / "lexnames").write_text("".join(
        f"{i:02d}\t{name}\t{LEX_SYNTAX[name.split('.')[0]]}\n"
        for i, name in enumerate(LEXNAMES)))
    return folder


def run(kind: str, root: Path, debian: Path, words: list[str]) -> dict[str, float]:
    # PYTHONSAFEPATH: ``python -c`` would put the working directory first on sys.path,
    # and a checkout there would be the code measured
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
           "PYTHONSAFEPATH": "1"}
    done = subprocess.run([sys.executable, "-c", CHILD, kind, str(root), str(debian)], env=env,
                          input=json.dumps(words), capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{kind} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dict", type=Path, default=Path("/usr/share/wordnet"),
                        help="WordNet's database files (Debian's wordnet-base)")
    args = parser.parse_args()
    words = eval_words()
    results: dict[str, list[dict[str, float]]] = {"kg-fuse": [], "nltk": []}
    with tempfile.TemporaryDirectory() as tmp:
        roots = {"kg-fuse": args.dict, "nltk": nltk_root(args.dict, Path(tmp))}
        for _ in range(args.rounds):
            for kind in results:
                results[kind].append(run(kind, roots[kind], args.dict, words))
    print(f"{len(words)} words of the eval sets, {args.rounds} rounds, medians")
    print(f"{'':<30} {'kg-fuse':>9} {'nltk':>9} {'nltk/kg-fuse':>13}")
    rows = (("start (s)", "start"), ("first lookup (s)", "first"),
            ("lookups (s)", "lookups"), ("meanings found", "meanings"),
            ("RSS interpreter (MiB)", "rss_base"), ("RSS opened (MiB)", "rss_open"),
            ("RSS after lookups (MiB)", "rss_end"),
            ("  of it anonymous (MiB)", "anon_end"), ("  of it file pages (MiB)", "file_end"))
    for title, key in rows:
        ours = statistics.median(r[key] for r in results["kg-fuse"])
        theirs = statistics.median(r[key] for r in results["nltk"])
        print(f"{title:<30} {ours:>9.3f} {theirs:>9.3f} {theirs / ours if ours else 0:>12.2f}x")
    for kind in results:
        grown = [r["rss_end"] - r["rss_base"] for r in results[kind]]
        print(f"{kind}: RSS grown by the reader, per round (MiB): "
              + ", ".join(f"{g:.1f}" for g in grown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
