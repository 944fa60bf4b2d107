"""A store's model, with one owner: which model made the store's vectors (its record:
name, dimensions, weights digest, pooling, prompts), how it embeds (the embedder, its
prompts applied), and what was measured of it once for this store (the pairs: the score
scale the search maps its cosines by, and the grade that says how well it separates
related from unrelated text).

:class:`.owner.StoreModel` is the owner; the searcher, the threshold rules, start-up and
the commands ask it. Below the search, above the store's rows. This module imports
nothing, so reading a record (``server status``, ``calibrate --show``) loads no model.
"""
