"""onnxroof's version, defined once: ``onnxroof.__version__``, and what reports (SARIF, JUnit), the fleet cache's keys
and calibrated platform files record. A core module, so that the library never imports the package's façade
(``onnxroof/__init__.py``, which names the public API from every stage)."""

from __future__ import annotations

__version__ = "0.1.0"
