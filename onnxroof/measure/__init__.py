"""Measured truth: calibrating a platform on this machine and profiling a model in onnxruntime, and the
measured overlay on a report. The only package that imports onnxruntime.
"""
