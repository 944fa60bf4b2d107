"""The search: how a query is read, scored and ranked.

Ranking: :mod:`.index` (the fused-vector matrix and the hybrid merge), :mod:`.scan` (the
exact int8 threshold scan), :mod:`.views` (what a concept's vectors are made of),
:mod:`.keywords` (FTS5 keyword scores). Reading the query: :mod:`.understand` (each word
read against the corpus), :mod:`.bridges` (WordNet's meanings in the corpus's words),
:mod:`.words` (tokens and the corpus's vocabulary), :mod:`.lexicon` (word forms and
WordNet), :mod:`.acronyms` (the corpus's own acronym definitions). Every tuned number:
:mod:`.tuning`. The store's model, which embeds the query and owns the line its cosines
are mapped by, is below: :mod:`kg_fuse.server.store_model`.

Nothing here imports the HTTP layer, the knowledge graph or the threshold rules above
it. This module imports nothing, so reading one part loads no other.
"""
