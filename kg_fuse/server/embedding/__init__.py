"""The sentence-embedding model: its ONNX file and the runtime that encodes with it."""
