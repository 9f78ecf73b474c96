"""Measured times from ``onnxroof profile`` laid over a report of the same model.

``onnxroof profile MODEL --format json -o prof.json`` writes onnxruntime's measured time for each compared
row of kernels; ``onnxroof report MODEL --profile prof.json`` reads it back (:func:`read_profile`), checks
that it was made for the model being reported (:func:`measured_overlay`), and the JSON and HTML renderers
show the measured figures beside the predicted ones. Per kernel ``k`` of the analysis:

* measured time ``m_k``: its profile row's measured seconds per run. A row of several kernels (onnxruntime
  fused them differently from onnxroof, so only their sum is measured) shares its time among them in
  proportion to their predicted times, ``m_k = M_row · p_k ÷ Σ_row p`` (equally when nothing is predicted):
  each kernel of the row gets the row's ratio, and the kernels' times add up to the row's;
* ratio ``m_k ÷ p_k`` against *this report's* prediction ``p_k`` (above 1: slower than predicted);
* achieved throughput ``F_k ÷ m_k`` at the kernel's own intensity: on the roofline chart the measured point
  sits straight above or below the predicted one, by the factor ``1 ÷ ratio``.

Checks, each failing with one line that names the file and the field: the file reads and is JSON; it has
the shape of the profile document (``kind``, ``model``, ``fusion_profile``, ``dims``, ``rows[]``...);
``model`` has the reported model's file name; ``fusion_profile`` is the analysis' (otherwise the same kernel
id names a different group of nodes); ``dims`` are the analysis' bound dims; every row whose kernels the
analysis has runs the same op types there (``rows[i].op_types``), and at least one row's kernels exist.
Kernel ids the analysis does not have are ignored, with a warning that counts them.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, TypeGuard

from onnxroof.core.errors import OnnxroofError
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.strict_toml import parse_failure
from onnxroof.measure.profile.result import PROFILE_KIND, PROFILE_SCHEMA, MeasuredPoint

_HOW = "make one with `onnxroof profile MODEL --format json -o PROF.json`"


@frozen_dataclass(slots=True)
class MeasuredKernel(MeasuredPoint):
    """One kernel's measured time beside this report's prediction."""

    id: str
    measured_s: float  # per run; a share of its row's time when the row holds several kernels
    predicted_s: float  # this report's prediction
    flops: float
    intensity: float  # the kernel's FLOP/B (infinite: FLOPs with no bytes)
    measured_with: tuple[str, ...]  # the other kernels of its profile row (measured as one)
    ort_nodes: tuple[str, ...]  # the onnxruntime nodes that ran the row
    ort_op_types: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "measured_s": self.measured_s,
            "predicted_s": self.predicted_s,
            "ratio": _finite(self.ratio),
            "achieved_flops": self.achieved_flops,
            "intensity": _finite(self.intensity),
            "measured_with": list(self.measured_with),
            "ort_nodes": list(self.ort_nodes),
            "ort_op_types": list(self.ort_op_types),
        }


@frozen_dataclass
class MeasuredOverlay:
    """What a profile file measured, matched to an analysis' kernels."""

    source: str  # the profile file
    model: str
    platform: str  # the platform the profile predicted for
    fusion_profile: str
    dims: Mapping[str, int]
    threads: int | None
    onnxruntime: str | None
    measured_s: float | None  # end to end: median wall time of a run, profiling off
    kernels: tuple[MeasuredKernel, ...]  # in the analysis' kernel order
    unmeasured: tuple[str, ...]  # the analysis' kernels with no measurement (onnxruntime folded them...)
    ignored: tuple[str, ...]  # kernel ids of the profile that the analysis does not have
    warnings: tuple[str, ...] = field(default=())

    @property
    def measured_kernels_s(self) -> float:
        """Σ measured time of the matched kernels."""
        return sum(k.measured_s for k in self.kernels)

    @property
    def predicted_kernels_s(self) -> float:
        """Σ this report's predicted time of the same kernels."""
        return sum(k.predicted_s for k in self.kernels)

    @property
    def ratio(self) -> float:
        predicted = self.predicted_kernels_s
        return self.measured_kernels_s / predicted if predicted > 0 else math.inf

    def by_id(self) -> dict[str, MeasuredKernel]:
        return {k.id: k for k in self.kernels}

    def to_dict(self) -> dict[str, Any]:
        """The ``measured`` section of the report's JSON document (see docs/json-schema.md)."""
        return {
            "source": self.source,
            "model": self.model,
            "platform": self.platform,
            "fusion_profile": self.fusion_profile,
            "dims": dict(self.dims),
            "threads": self.threads,
            "onnxruntime": self.onnxruntime,
            "measured_s": self.measured_s,
            "measured_kernels_s": self.measured_kernels_s,
            "predicted_kernels_s": self.predicted_kernels_s,
            "ratio": _finite(self.ratio),
            "kernels": [k.to_dict() for k in self.kernels],
            "unmeasured_kernels": list(self.unmeasured),
            "ignored_kernels": list(self.ignored),
            "warnings": list(self.warnings),
        }


# ------------------------------------------------------------------------------------------------ reading


def read_profile(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The profile document in ``path``, checked for shape (:func:`check_profile`)."""
    label = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise OnnxroofError(f"{label}: cannot read the profile: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise OnnxroofError(f"{label}: not a profile JSON: the file is not UTF-8 text") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OnnxroofError(
            f"{label}: not a profile JSON: {exc.msg} at line {exc.lineno} column {exc.colno}; {_HOW}"
        ) from None
    except (ValueError, RecursionError) as exc:  # an integer of too many digits, arrays nested too deep
        raise OnnxroofError(f"{label}: not a profile JSON: {parse_failure(exc)}; {_HOW}") from None
    check_profile(document, label)
    return document


def check_profile(document: Any, label: str) -> None:
    """Raise :class:`OnnxroofError` naming the first field of ``document`` that a profile document cannot have.

    In order: the header (:func:`_check_header`), the model, fusion profile, dims and platform, each row
    (:func:`_check_row`), the unmeasured kernels, and the end-to-end time."""
    _check_header(document, label)
    for key in ("model", "fusion_profile"):
        _expect(document, key, str, "a string", label)
    dims = _expect(document, "dims", dict, "an object", label)
    for name, value in dims.items():
        if not _is_int(value):
            raise _fail(label, f"dims.{name}", f"expected an integer, got {_show(value)}")
    platform = _expect(document, "platform", dict, "an object", label)
    _expect(platform, "name", str, "a string", label, "platform.")
    rows = _expect(document, "rows", list, "a list", label)
    for index, row in enumerate(rows):
        _check_row(row, f"rows[{index}]", label)
    for index, item in enumerate(document.get("unmeasured_kernels") or []):
        where = f"unmeasured_kernels[{index}]"
        if not isinstance(item, dict):
            raise _fail(label, where, f"expected an object, got {_show(item)}")
        for key in ("name", "op_type"):
            _expect(item, key, str, "a string", label, f"{where}.")
    _check_end_to_end(document.get("end_to_end"), label)


def _check_header(document: Any, label: str) -> None:
    """That ``document`` is an object of the profile ``kind`` with ``rows`` (a report JSON is told apart) and a
    ``schema`` version this onnxroof reads (1 to :data:`PROFILE_SCHEMA`; absent means the current one)."""
    if not isinstance(document, dict):
        raise _fail(label, "", f"not a profile JSON: the top level is a {type(document).__name__}, not an object")
    kind = document.get("kind")
    if kind is not None and kind != PROFILE_KIND:
        raise _fail(label, "kind", f"expected '{PROFILE_KIND}', got {_show(kind)}; {_HOW}")
    if "rows" not in document:
        what = "an `onnxroof report` JSON, not a profile" if "kernels" in document else "not a profile JSON"
        raise _fail(label, "rows", f"missing: {what}; {_HOW}")
    schema = document.get("schema", PROFILE_SCHEMA)
    if not _is_int(schema) or schema < 1:
        raise _fail(label, "schema", f"expected a positive integer, got {_show(schema)}")
    if schema > PROFILE_SCHEMA:
        raise _fail(label, "schema", f"version {schema} is newer than this onnxroof reads ({PROFILE_SCHEMA})")


def _check_row(row: Any, where: str, label: str) -> None:
    """That a row (at ``where``) is an object with lists of strings ``kernels`` (at least one), ``op_types``,
    ``ort_nodes`` (and ``ort_op_types`` when present) and a finite ``measured_s`` ≥ 0."""
    if not isinstance(row, dict):
        raise _fail(label, where, f"expected an object, got {_show(row)}")
    for key in ("kernels", "op_types", "ort_nodes"):
        _strings(_expect(row, key, list, "a list", label, f"{where}."), label, f"{where}.{key}")
    if not row["kernels"]:
        raise _fail(label, f"{where}.kernels", "expected at least one kernel id")
    measured = row.get("measured_s")
    if not _is_number(measured) or not math.isfinite(measured) or measured < 0:
        raise _fail(label, f"{where}.measured_s", f"expected a number ≥ 0, got {_show(measured)}")
    if "ort_op_types" in row:
        _strings(_expect(row, "ort_op_types", list, "a list", label, f"{where}."), label, f"{where}.ort_op_types")


def _check_end_to_end(end_to_end: Any, label: str) -> None:
    """That the optional ``end_to_end`` section is an object whose ``measured_s``, when present, is a number."""
    if end_to_end is None:
        return
    if not isinstance(end_to_end, dict):
        raise _fail(label, "end_to_end", f"expected an object, got {_show(end_to_end)}")
    value = end_to_end.get("measured_s")
    if value is not None and not _is_number(value):
        raise _fail(label, "end_to_end.measured_s", f"expected a number, got {_show(value)}")


# ---------------------------------------------------------------------------------------------- matching


def measured_overlay(document: Mapping[str, Any], analysis, source: str) -> MeasuredOverlay:
    """Match a checked profile ``document`` (from :func:`read_profile`, or a
    :meth:`~onnxroof.measure.profile.result.ProfileResult.to_dict`) to ``analysis``' kernels; ``source`` names the file
    in messages. Raises :class:`OnnxroofError` when the profile was made for another model (module docstring)."""
    _check_same_model(document, analysis, source)
    kernels = {k.id: k for k in analysis.kernels}
    order = {k.id: i for i, k in enumerate(analysis.kernels)}
    ignored: list[str] = []
    found: dict[str, MeasuredKernel] = {}
    for index, row in enumerate(document["rows"]):
        ids = list(row["kernels"])
        missing = [k for k in ids if k not in kernels]
        if missing:
            ignored += missing
            continue
        here = [t for k in ids for t in kernels[k].op_types]
        if list(row["op_types"]) != here:
            raise _fail(
                source,
                f"rows[{index}].op_types",
                f"kernel(s) {'+'.join(ids)} run {'+'.join(row['op_types'])} in the profile but "
                f"{'+'.join(here)} here: the profile was made for a different model (or onnxroof version)",
            )
        found.update(_share(row, [kernels[k] for k in ids]))
    for index, item in enumerate(document.get("unmeasured_kernels") or []):
        kernel = kernels.get(item["name"])
        if kernel is None:
            ignored.append(item["name"])
        elif item["op_type"] != "+".join(kernel.op_types):
            raise _fail(
                source,
                f"unmeasured_kernels[{index}].op_type",
                f"kernel {kernel.id} runs {item['op_type']} in the profile but {'+'.join(kernel.op_types)} here: "
                "the profile was made for a different model (or onnxroof version)",
            )
    if document["rows"] and not found:
        raise _fail(
            source,
            "rows",
            f"none of its kernel ids ({_first(ignored)}...) are kernels of this analysis: the profile was made "
            "for a different model",
        )
    warnings: list[str] = []
    if ignored:
        unique = sorted(set(ignored), key=_kernel_order)
        warnings.append(
            f"{source}: {len(unique)} kernel(s) of the profile are not in this analysis and are ignored "
            f"(first: {unique[0]})"
        )
    platform = document["platform"]["name"]
    if platform != analysis.platform.name:
        warnings.append(
            f"{source}: the profile predicted for platform '{platform}'; ratios here are against this report's "
            f"platform '{analysis.platform.name}'"
        )
    end_to_end = document.get("end_to_end") or {}
    threads = document.get("threads")
    runtime = document.get("onnxruntime")
    return MeasuredOverlay(
        source=source,
        model=document["model"],
        platform=platform,
        fusion_profile=document["fusion_profile"],
        dims=dict(document["dims"]),
        threads=threads if _is_int(threads) else None,
        onnxruntime=runtime if isinstance(runtime, str) else None,
        measured_s=end_to_end.get("measured_s"),
        kernels=tuple(sorted(found.values(), key=lambda k: order[k.id])),
        unmeasured=tuple(k.id for k in analysis.kernels if k.id not in found),
        ignored=tuple(sorted(set(ignored), key=_kernel_order)),
        warnings=tuple(warnings),
    )


def load_overlay(path: str | os.PathLike[str], analysis) -> MeasuredOverlay:
    """:func:`read_profile` then :func:`measured_overlay`: the measured overlay of ``path`` for ``analysis``."""
    return measured_overlay(read_profile(path), analysis, str(path))


def _check_same_model(document: Mapping[str, Any], analysis, source: str) -> None:
    model = analysis.model
    if model.path is not None and Path(document["model"]).name != Path(model.path).name:
        raise _fail(
            source,
            "model",
            f"the profile is of '{Path(document['model']).name}', this report of '{Path(model.path).name}'",
        )
    if document["fusion_profile"] != analysis.fusion_profile:
        raise _fail(
            source,
            "fusion_profile",
            f"the profile's kernels are those of fusion profile '{document['fusion_profile']}', this report's of "
            f"'{analysis.fusion_profile}'; report with --fusion {document['fusion_profile']} (or the profile's "
            "platform)",
        )
    bound = {k: int(v) for k, v in model.dims.items()}
    if dict(document["dims"]) != bound:
        raise _fail(source, "dims", f"the profile ran with {_dims(document['dims'])}, this report has {_dims(bound)}")


def _share(row: Mapping[str, Any], members: Sequence[Any]) -> dict[str, MeasuredKernel]:
    """The row's measured time shared among its kernels in proportion to their predicted times."""
    measured = float(row["measured_s"])
    predicted = sum(k.latency_s for k in members)
    ids = tuple(k.id for k in members)
    result = {}
    for kernel in members:
        share = kernel.latency_s / predicted if predicted > 0 else 1 / len(members)
        result[kernel.id] = MeasuredKernel(
            id=kernel.id,
            measured_s=measured * share,
            predicted_s=kernel.latency_s,
            flops=kernel.flops,
            intensity=kernel.intensity,
            measured_with=tuple(k for k in ids if k != kernel.id),
            ort_nodes=tuple(row["ort_nodes"]),
            ort_op_types=tuple(row.get("ort_op_types") or ()),
        )
    return result


# ------------------------------------------------------------------------------------------------- output


def with_measured(document: dict[str, Any], overlay: MeasuredOverlay | None) -> dict[str, Any]:
    """The report's JSON document with the ``measured`` section added (unchanged without an overlay)."""
    if overlay is None:
        return document
    return {**document, "measured": overlay.to_dict()}


# ------------------------------------------------------------------------------------------------ helpers


def _fail(label: str, key: str, message: str) -> OnnxroofError:
    text = f"{label}: {key}: {message}" if key else f"{label}: {message}"
    return OnnxroofError(" ".join(text.split()))


def _expect(mapping: Mapping[str, Any], key: str, kind: type, what: str, label: str, prefix: str = "") -> Any:
    value = mapping.get(key)
    if not isinstance(value, kind):
        problem = f"missing (expected {what})" if key not in mapping else f"expected {what}, got {_show(value)}"
        raise _fail(label, f"{prefix}{key}", problem)
    return value


def _strings(values: list[Any], label: str, where: str) -> None:
    for position, value in enumerate(values):
        if not isinstance(value, str):
            raise _fail(label, f"{where}[{position}]", f"expected a string, got {_show(value)}")


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _dims(dims: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(dims.items())) or "no dims bound"


def _first(ids: Sequence[str]) -> str:
    return ", ".join(sorted(set(ids), key=_kernel_order)[:3])


def _kernel_order(kernel_id: str) -> tuple[int, str]:
    digits = kernel_id.lstrip("k")
    return (int(digits), kernel_id) if digits.isdigit() else (1 << 30, kernel_id)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
