"""A store made ready to serve: built where it lacks something and loaded
(:mod:`.prepare`), re-embedded for another model (:mod:`.reembed`); a model's grade kept
for ``model list`` (:mod:`.model_grade`). The store's model itself is
:mod:`kg_fuse.server.store_model`'s."""
