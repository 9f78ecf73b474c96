"""The command line: typer's app, shared options, one module per command group; each command parses its
options, calls one library function and hands the result to a renderer.

The modules register their commands on :data:`app` when imported, in the order the help lists them.
"""

from __future__ import annotations

# isort: off  (the import order is the order of the commands in --help)
from onnxroof.cli import (
    gate,  # noqa: F401
    graphs,  # noqa: F401
    measure,  # noqa: F401
    report,  # noqa: F401
    whatif,  # noqa: F401
)

# isort: split
from onnxroof.cli import (
    audit,  # noqa: F401
    llm,  # noqa: F401
)
from onnxroof.cli.common import app

# isort: on

__all__ = ["app", "main"]


def main() -> None:
    app(prog_name="onnxroof")
