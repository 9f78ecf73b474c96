"""Calibration: timed probes (timing), the probe models (probes), fitting roofs and levels (fit), the
platform file written (write); calibrator.calibrate() runs them in order.
"""
