"""Reading a model: no weight bytes read, symbolic dims bound, ONNX shape inference and its fallbacks.

Imports only :mod:`onnxroof.core`.
"""
