"""Phase 1 of the fusion pass replayed across bindings of one model (``fuse(..., prior=)``): the decomposed-function
matches of one binding are reused by another only when every fact the matcher reads is equal, and the kernels and
misses are then exactly a fresh pass's; otherwise the functions are matched afresh."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from helpers import parse_model

import onnxroof.fusion.match as match
from onnxroof.analysis.analyze import analyze
from onnxroof.analysis.document import to_dict
from onnxroof.analysis.stages import FusedModel, bind, cost, fuse, read
from onnxroof.load.reader import ModelFile
from onnxroof.studies.llm import llm

OPTIMUM = Path(__file__).resolve().parent.parent / "samples" / "llm" / "optimum_llama" / "model.onnx"

_RMS = """
p{i} = Pow({x}, two)
v{i} = ReduceMean<axes=[-1]>(p{i})
e{i} = Add(v{i}, eps)
s{i} = Sqrt(e{i})
n{i} = Div({x}, s{i})
{y} = Mul(n{i}, gamma)
"""
TEXT = (
    '<ir_version: 8, opset_import: ["" : 17]>\n'
    "g (float[b, s, 64] x) => (float[b, s, 64] z, float[b, s, 1] s2)\n"
    f"<float two = {{2.0}}, float eps = {{1e-5}}, float[64] gamma = {{{','.join(['1.0'] * 64)}}}>\n"
    "{" + _RMS.format(i=1, x="x", y="y") + _RMS.format(i=2, x="y", y="z") + "}"
)
"""Two RMSNorms in a row: the first one kernel, the second a miss (its σ is also a graph output)."""


def _fused(file: ModelFile, dims: dict[str, object], prior: FusedModel | None = None) -> FusedModel:
    return fuse(cost(bind(file, dims)), "tensorrt", prior)


@pytest.fixture(scope="module")
def file() -> ModelFile:
    return read(parse_model(TEXT))


def test_another_binding_replays_the_matches_and_fuses_as_a_fresh_pass(
    file: ModelFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _fused(file, {"b": 2, "s": 16})
    assert first.functions is not None
    assert [m.pattern.name for m in first.functions.matches] == ["rmsnorm"]
    assert [m.pattern for m in first.misses] == ["rmsnorm"]
    fresh = _fused(file, {"b": 1, "s": 3})

    def refuse(*args: object) -> None:
        raise AssertionError("matched again though the facts are equal")

    monkeypatch.setattr(match, "_apply_function", refuse)
    replayed = _fused(file, {"b": 1, "s": 3}, first)
    assert replayed.functions is first.functions
    assert replayed.kernels == fresh.kernels and replayed.misses == fresh.misses
    assert replayed.descriptors == fresh.descriptors


def test_a_constant_that_became_a_run_time_value_is_matched_afresh() -> None:
    # the same graph but gamma a graph input: the matcher reads constness ("Mul($n, c)"), so the facts differ
    weighted = read(parse_model(TEXT))
    model = onnx.ModelProto()
    model.CopyFrom(weighted.model)
    gamma = next(t for t in model.graph.initializer if t.name == "gamma")
    model.graph.input.append(onnx.helper.make_tensor_value_info("gamma", gamma.data_type, list(gamma.dims)))
    model.graph.initializer.remove(gamma)
    first = _fused(weighted, {"b": 2, "s": 16})
    other = _fused(read(model), {"b": 2, "s": 16}, first)
    assert other.functions is not None and other.functions is not first.functions
    assert first.functions is not None
    # without a constant gamma the norm ends at its Div: a replay of the first binding's match would be wrong
    assert [len(m.members) for m in first.functions.matches] == [6]
    assert [len(m.members) for m in other.functions.matches] == [5]
    fresh = _fused(read(model), {"b": 2, "s": 16})
    assert other.kernels == fresh.kernels and other.misses == fresh.misses


def _documents(result: object) -> list[str]:
    return [json.dumps(to_dict(a), sort_keys=True, default=str) for a in result.analyses]  # type: ignore[attr-defined]


def test_llm_phases_are_what_analyze_gives_with_and_without_the_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    apply = match._apply_function
    monkeypatch.setattr(match, "_apply_function", lambda *a: calls.append(1) or apply(*a))
    replayed = llm(OPTIMUM, "a100", prompt=32, generate=8)
    matched_once = len(calls)
    assert matched_once > 0  # the decoder's RMSNorms
    calls.clear()
    monkeypatch.setattr(match, "matcher_facts", lambda *a: (object(),))  # never equal: every phase matched afresh
    afresh = llm(OPTIMUM, "a100", prompt=32, generate=8)
    assert len(calls) == 4 * matched_once  # prefill + 3 decode steps, each matched
    assert replayed == afresh and _documents(replayed) == _documents(afresh)
    monkeypatch.undo()
    cache = replayed.cache
    for phase, (new, past) in zip(replayed.analyses, [(32, 0), (1, 32), (1, 35), (1, 39)], strict=True):
        alone = analyze(OPTIMUM, "a100", cache.dims(1, new, past))
        assert json.dumps(to_dict(phase), sort_keys=True, default=str) == json.dumps(
            to_dict(alone), sort_keys=True, default=str
        )


def test_a_graph_no_function_can_start_on_builds_no_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    """No node's op type starts a function pattern (Relu, Neg): phase 1 matches nothing and builds no facts to
    replay (a single analysis would build them for nothing); the RMSNorm graph still builds them."""

    def refuse(*args: object) -> None:
        raise AssertionError("facts built for a graph no function can start on")

    text = '<ir_version: 8, opset_import: ["" : 17]>\ng (float[1, 16] x) => (float[1, 16] y)\n'
    text += "{\na = Relu(x)\ny = Neg(a)\n}"
    with monkeypatch.context() as patched:
        patched.setattr(match, "matcher_facts", refuse)
        chain = fuse(cost(bind(read(parse_model(text)))), "tensorrt")
    assert chain.functions is not None and chain.functions.facts is None and chain.functions.matches == ()
    assert [k.node_ids for k in chain.kernels] == [("0:Relu", "1:Neg")]
    rms = _fused(read(parse_model(TEXT)), {"b": 1, "s": 3})
    assert rms.functions is not None and rms.functions.facts is not None
