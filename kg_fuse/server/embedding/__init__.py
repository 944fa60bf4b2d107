"""The sentence-embedding models: the ones to choose from, their ONNX graphs (written from
the weights, without torch) and the runtime that encodes with them."""
