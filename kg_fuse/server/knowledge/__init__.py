"""The knowledge graph: store, model and search kept in step; content added and removed,
made searchable, and the ingest queue."""
