"""Cost of one node: its state (costed, zero, folded, unsupported, unknown_shape) and Cost from the registered
rule, control-flow nodes through their bodies. Loads the rule families (:mod:`onnxroof.rules`).
"""
