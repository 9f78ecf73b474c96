"""The ``genai_config.json`` that ONNX Runtime GenAI's model builder writes beside a model: the facts it states
about the KV cache and the context, read without running anything.

Read: ``search.past_present_share_buffer`` (present aliases past: the KV cache is written in place),
``model.context_length``, ``model.decoder.head_size``, ``num_key_value_heads``, ``num_hidden_layers``, and
``enable_cuda_graph`` among the decoder's provider options. A file that is not JSON (nested past the parser's
recursion limit, or an integer of more digits than Python converts, included), a field of the wrong type, or a
count that is not a positive integer below 2**63 is one :class:`~onnxroof.core.errors.ModelError` line naming the
file and the field.
"""

from __future__ import annotations

import json
import stat
from functools import lru_cache
from pathlib import Path
from typing import Any

from onnxroof.core.errors import ModelError
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.strict_toml import parse_failure

FILE_NAME = "genai_config.json"
_INT_LIMIT = 2**63
"""Counts (context length, heads, layers, head size) must lie below it, as dims bound with ``--dim`` do."""


@frozen_dataclass
class GenaiConfig:
    """What a ``genai_config.json`` says (None: not stated)."""

    path: str
    past_present_share_buffer: bool | None = None
    context_length: int | None = None
    head_size: int | None = None
    num_key_value_heads: int | None = None
    num_hidden_layers: int | None = None
    enable_cuda_graph: bool | None = None

    def facts(self) -> tuple[tuple[str, str], ...]:
        """The stated fields as (key, value text) pairs, in file order."""
        named = (
            ("search.past_present_share_buffer", self.past_present_share_buffer),
            ("model.context_length", self.context_length),
            ("model.decoder.head_size", self.head_size),
            ("model.decoder.num_key_value_heads", self.num_key_value_heads),
            ("model.decoder.num_hidden_layers", self.num_hidden_layers),
            ("model.decoder.session_options.provider_options.enable_cuda_graph", self.enable_cuda_graph),
        )
        return tuple((key, _text(value)) for key, value in named if value is not None)


def _text(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def read_genai_config(model_path: Path | str | None) -> GenaiConfig | None:
    """The ``genai_config.json`` in the model's folder, None when there is none (or no path)."""
    if model_path is None:
        return None
    path = Path(model_path).parent / FILE_NAME
    try:
        info = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return _read(str(path), info.st_mtime_ns, info.st_size)


@lru_cache(maxsize=64)
def _read(name: str, _mtime_ns: int, _size: int) -> GenaiConfig:
    """The file at ``name`` parsed, once per version of it (its modification time and size are the key: a study
    that analyzes one model many times reads it once)."""
    path = Path(name)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: JSONDecodeError, UnicodeDecodeError, digits
        raise ModelError(f"{path}: not a readable JSON file ({parse_failure(exc)})") from None
    if not isinstance(doc, dict):
        raise ModelError(f"{path}: must hold a JSON object, got {type(doc).__name__}")
    model = _table(doc, "model", path)
    decoder = _table(model, "model.decoder", path, model.get("decoder"))
    return GenaiConfig(
        path=str(path),
        past_present_share_buffer=_typed(_table(doc, "search", path), "search.past_present_share_buffer", bool, path),
        context_length=_typed(model, "model.context_length", int, path),
        head_size=_typed(decoder, "model.decoder.head_size", int, path),
        num_key_value_heads=_typed(decoder, "model.decoder.num_key_value_heads", int, path),
        num_hidden_layers=_typed(decoder, "model.decoder.num_hidden_layers", int, path),
        enable_cuda_graph=_cuda_graph(decoder, path),
    )


def _table(doc: dict[str, Any], key: str, path: Path, value: Any = None) -> dict[str, Any]:
    """The object at ``key`` (``{}`` when absent); a value of another type is an error naming it."""
    found = doc.get(key.rsplit(".", 1)[-1]) if value is None else value
    if found is None:
        return {}
    if not isinstance(found, dict):
        raise ModelError(f"{path}: {key}: must be a JSON object, got {json.dumps(found)[:60]}")
    return found


def _typed(table: dict[str, Any], key: str, kind: type, path: Path) -> Any:
    """``table``'s last component of ``key``, checked to be a ``kind`` (a bool is not an int); None when absent."""
    value = table.get(key.rsplit(".", 1)[-1])
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ModelError(f"{path}: {key}: must be a {kind.__name__}, got {json.dumps(value)[:60]}")
    if isinstance(value, int) and not isinstance(value, bool) and not 0 < value < _INT_LIMIT:
        raise ModelError(f"{path}: {key}: must be a positive integer below 2**63, got {str(value)[:60]}")
    return value


def _cuda_graph(decoder: dict[str, Any], path: Path) -> bool | None:
    """``enable_cuda_graph`` in any provider's options (``"1"``/``"0"`` or a boolean), None when not stated."""
    options = _table(decoder, "model.decoder.session_options", path, decoder.get("session_options"))
    providers = options.get("provider_options", [])
    if not isinstance(providers, list):
        return None
    for provider in providers:
        for settings in provider.values() if isinstance(provider, dict) else ():
            if isinstance(settings, dict) and "enable_cuda_graph" in settings:
                return str(settings["enable_cuda_graph"]).strip().lower() in {"1", "true"}
    return None
