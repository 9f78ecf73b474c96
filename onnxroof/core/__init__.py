"""The core types every stage shares: the IR (OpView, TensorInfo, the graph index), Cost, dtypes, the rule
registry, the enums for states/kinds/bounds/roles, errors, SI unit formatting and atomic file writes.

Imports nothing else from onnxroof.
"""
