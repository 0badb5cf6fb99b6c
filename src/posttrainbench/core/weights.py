"""Which file names hold model weights: the one home of the weight-file suffixes.

Every other list is a named subset of `WEIGHT_SUFFIXES` (tests/unit/test_weights.py), so
a new format is added once and each reader says which part of it it means.
"""

from __future__ import annotations

# Every format a loader reads weights from: transformers (safetensors, pickled .bin),
# torch checkpoints, llama.cpp, Keras, Flax, numpy archives and ONNX. The integrity judges
# account for every such file a submitted model holds.
WEIGHT_SUFFIXES: tuple[str, ...] = (
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".gguf",
    ".h5",
    ".msgpack",
    ".npz",
    ".onnx",
)
# What transformers loads a causal LM from: what evaluation compares, sizes and serves.
TRANSFORMERS_WEIGHT_SUFFIXES: tuple[str, ...] = (".safetensors", ".bin")
# Checkpoint formats: a directory holding one of these beside a config.json is a model (or
# checkpoint) directory, whose json and txt files are its metadata, not training data.
# Narrower than WEIGHT_SUFFIXES on purpose: a numpy archive beside a config.json must not
# turn a directory of data files into "metadata" the code snapshot leaves out.
CHECKPOINT_SUFFIXES: tuple[str, ...] = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf")
# Large binary data that is not weights: left out of code snapshots with the weights.
BINARY_DATA_SUFFIXES: tuple[str, ...] = (".npy", ".arrow", ".parquet")
