"""The knowledge graph: store, model and search kept in step; ingest jobs and start-up."""
