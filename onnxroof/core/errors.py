"""Errors a user sees: one line that names the file, node or field at fault."""

from __future__ import annotations

import re


class OnnxroofError(Exception):
    """A problem with the user's input (model, platform file, option); the CLI prints it and exits 2."""


class ModelError(OnnxroofError):
    """The model file cannot be read, parsed or checked."""


class PlatformError(OnnxroofError):
    """A platform file is missing, malformed or names an unknown key."""


class DimsError(OnnxroofError):
    """Symbolic dimensions are unbound or bound to a value that is not a positive integer."""


class CostError(ModelError):
    """A rule gave a node a negative (or NaN) cost: the node's shapes or attributes are malformed."""


class MalformedNode(ModelError):
    """A node's tensors or attributes contradict its operator's definition (a rank, an axis out of range):
    the message names the node. Raised by rules, folding and control flow instead of an internal error."""


class StrictError(OnnxroofError):
    """`--strict` was given and some nodes could not be costed."""


class ShapeUnknown(Exception):
    """Raised by a rule when a tensor it needs has no static shape; the node is reported, never zeroed."""

    def __init__(self, tensor: str) -> None:
        super().__init__(tensor)
        self.tensor = tensor


def one_line(text: str) -> str:
    """Collapse a multi-line library message (e.g. the ONNX checker's) into one readable line."""
    text = re.sub(r"==> Context: Bad node spec for node\. Name: (.*?) OpType: (\S+)", r"(node '\1', \2)", text)
    return " ".join(text.split())


class RuntimeProfileError(OnnxroofError):
    """A runtime profile (``runtimes/*.toml`` or a user file) is missing, malformed, names an unknown key, or
    does not run on the platform it was asked for."""
