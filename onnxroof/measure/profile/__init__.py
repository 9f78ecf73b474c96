"""Profiling: run a model in onnxruntime (run), map its optimized nodes back to ours (map), match kernels
(match), predicted figures per kernel (predict), the result and its statistics (result, explain);
profiler.profile() runs them in order.
"""
