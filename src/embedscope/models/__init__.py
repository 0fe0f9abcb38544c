"""Encoders: backends, loading, the embedding cache and the fast paths' exports."""

from embedscope.models.third_party import keep_torch_inside, quiet_onnxruntime

keep_torch_inside()  # before any backend imports torch
quiet_onnxruntime()  # before any backend imports onnxruntime
