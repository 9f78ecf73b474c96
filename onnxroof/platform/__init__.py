"""Hardware as data: the Platform type, strict parsing of platform TOML files, lookup of bundled and user files.

Imports only :mod:`onnxroof.core`.
"""
