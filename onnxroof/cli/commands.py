"""The app with every command registered: what tests and programs that embed the command line import
(``from onnxroof.cli.commands import app``); ``onnxroof`` itself loads only the module of the command it runs
(:func:`onnxroof.cli.main`)."""

from __future__ import annotations

from onnxroof.cli import COMMAND_MODULES, load_commands
from onnxroof.cli.common import app

__all__ = ["app"]

load_commands(tuple(dict.fromkeys(COMMAND_MODULES.values())))
