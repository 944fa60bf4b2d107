"""``scripts/sweep_tuning.py`` measures a tuned number at another value: that value must be
the one in force in the search's modules, what they derive from it included."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter, after ``set_tuned`` was imported from the script."""
    prelude = f"import sys; sys.path.insert(0, {str(ROOT / 'scripts')!r}); " \
              "from sweep_tuning import set_tuned; "
    return subprocess.run([sys.executable, "-c", prelude + code], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_a_swept_value_reaches_aliases_defaults_and_what_is_derived() -> None:
    done = _run(
        "set_tuned('TYPO_PENALTY', 0.7); set_tuned('KEYWORD_WEIGHT', 0.1); "
        "set_tuned('BM25_WEIGHTS', (0.0, 2.0, 1.0, 2.0, 1.0)); "
        "from kg_fuse.server.search import index, keywords, understand; "
        "print(understand.TYPO_PENALTY, index.merge(0.5, 1.0), keywords._BM25_ARGS)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0.7", "0.55", "0.0,", "2.0,", "1.0,", "2.0,", "1.0"]


def test_a_value_set_after_the_search_was_imported_is_refused() -> None:
    done = _run("import kg_fuse.server.search.understand; set_tuned('TYPO_PENALTY', 0.7)")
    assert done.returncode != 0 and "before importing" in done.stderr


def test_a_name_not_in_the_table_is_refused() -> None:
    done = _run("set_tuned('NOT_A_NUMBER', 1)")
    assert done.returncode != 0


def test_a_swept_entry_holds_for_a_model_whose_row_moves_it() -> None:
    done = _run(
        "from kg_fuse.server.search import tuning; import dataclasses; "
        "tuning.BY_MODEL = dataclasses.replace(tuning.BY_MODEL, value={'m': "
        "{'KEYWORD_WEIGHT': 0.05}}); set_tuned('KEYWORD_WEIGHT', 0.4); "
        "print(tuning.for_model('m').keyword_weight)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0.4"]  # the sweep's value, not the row's
