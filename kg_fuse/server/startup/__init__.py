"""A store made ready to serve: built where it lacks something and loaded
(:mod:`.prepare`), its model checked (:mod:`.model_record`), re-embedded for another model
(:mod:`.reembed`); a model graded (:mod:`.model_grade`)."""
