"""The search's tuned numbers live in one table, and each says what chose it."""

from __future__ import annotations

import ast
from pathlib import Path

from kg_fuse.server.search import (
    acronyms,
    bridges,
    index,
    keywords,
    tuning,
    understand,
    views,
)
from kg_fuse.server.threshold import calibrate, presets

SEARCH = Path(tuning.__file__).parent
#: the threshold rules read the same table (the calibration's, the presets', the scale's)
THRESHOLD = Path(calibrate.__file__).parent

#: Module-level numbers that are not tuning: the limits the table's docstring names (cost,
#: hostile input), and UNFAMILIARITY, whose 0 for the corpus's own words is what
#: "familiar" means (its typo entry is the table's). Any other number must be the table's.
NOT_TUNED = {
    ("words.py", "MAX_TERMS"), ("words.py", "MAX_WORD_CHARS"),
    ("understand.py", "TYPO_MIN_CHARS"), ("understand.py", "TYPO_MAX_CHARS"),
    ("keywords.py", "CACHED_TERMS"), ("searcher.py", "PREPARED_QUERIES"),
    ("lexicon.py", "CACHED_STEMS"),
    ("scan.py", "BLOCK_ROWS"), ("scan.py", "_MARGIN"), ("scan.py", "_GAP"),
    ("understand.py", "UNFAMILIARITY"),
}


def _numeric(node: ast.AST) -> bool:
    """A number, or a tuple, list or dict holding one."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _numeric(node.operand)
    if isinstance(node, ast.Tuple | ast.List):
        return any(_numeric(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return any(_numeric(v) for v in node.values)
    return False


def test_every_entry_says_what_it_is_for_and_what_chose_it() -> None:
    assert len(tuning.TABLE) >= 45
    for name, entry in tuning.TABLE.items():
        assert entry.purpose.strip(), name
        assert entry.chosen_by.strip(), name


def test_no_module_of_the_search_holds_a_number_of_its_own() -> None:
    found = []
    for path in sorted([*SEARCH.glob("*.py"), *THRESHOLD.glob("*.py")]):
        if path.name == "tuning.py":
            continue
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, ast.AnnAssign) and node.value else [])
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            if names and _numeric(node.value) and not any(
                    (path.name, n) in NOT_TUNED for n in names):
                found.append(f"{path.name}: {', '.join(names)}")
    assert found == []


def test_the_modules_read_the_table() -> None:
    assert tuning.KEYWORD_WEIGHT.value == index.KEYWORD_WEIGHT
    assert views.WEIGHTS is tuning.VIEW_WEIGHTS.value
    assert keywords.BM25_WEIGHTS is tuning.BM25_WEIGHTS.value
    assert bridges.BRIDGE_FACTORS is tuning.BRIDGE_FACTORS.value
    assert understand.UNFAMILIARITY["typo"] == tuning.TYPO_PENALTY.value
    assert tuning.ACRONYM_CHARS.value == (acronyms.MIN_SHORT, acronyms.MAX_SHORT)
    assert tuning.NOISE_MARGIN.value == calibrate.MARGIN
    assert presets.FALLBACK_OFFSETS is tuning.FALLBACK_OFFSETS.value


def test_the_rules_shown_to_users_state_the_table_s_numbers() -> None:
    assert calibrate.RULE == ("default = ceil((median over 16 noise samples of the "
                              "3rd-highest per-concept noise score, 2nd below 1,000 "
                              "concepts, + 0.03) * 100) / 100")
    assert presets.RULE == (
        "exact = default + (median relevant-probe score - default) / 2 within "
        "[default + 0.05, 0.99]; comprehensive = default - (default - noise median) / 2 "
        "within [default - 0.10, default - 0.02]")


def test_the_presets_fallback_is_the_mount_s() -> None:
    from kg_fuse.listing.presets import PRESET_OFFSETS

    assert tuning.FALLBACK_OFFSETS.value is PRESET_OFFSETS  # one copy, the listing's


def test_the_table_prints() -> None:
    text = tuning.render()
    assert "KEYWORD_WEIGHT = 0.3" in text and "chosen by: eval, second round" in text
