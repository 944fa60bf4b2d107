"""The search: how a query is read, scored and ranked, and how its default is chosen.

Ranking: :mod:`.index` (the fused-vector matrix and the hybrid merge), :mod:`.scan` (the
exact int8 threshold scan), :mod:`.views` (what a concept's vectors are made of),
:mod:`.keywords` (FTS5 keyword scores). Reading the query: :mod:`.understand` (each word
read against the corpus), :mod:`.lexicon` (word forms and WordNet), :mod:`.acronyms`
(the corpus's own acronym definitions). Choosing the default: :mod:`.calibrate` and
:mod:`.presets`.

Nothing here imports the HTTP layer or the knowledge graph above it. This module
imports nothing, so reading one part (``calibrate --show``) loads no other.
"""
