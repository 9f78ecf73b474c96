"""Cost rules: recurrent layers (LSTM, GRU, RNN), scaling with sequence length.

Shared notation: T = sequence length, Bt = batch, I = input size, H = hidden size, D = directions
(2 when ``direction="bidirectional"``). X is ``[T, Bt, I]`` (``layout=0``) or ``[Bt, T, I]`` (``layout=1``).
Elementwise operations follow the ONNX equations, with the activation costs of the elementwise rules:
Sigmoid 4, Tanh 1 FLOPs per element.
"""

from __future__ import annotations

from onnxroof.core.cost import FLOPS_PER_MAC, Cost
from onnxroof.core.ir import OpView
from onnxroof.core.registry import Family
from onnxroof.core.states import OpClass
from onnxroof.rules._common import inputs_bytes, outputs_bytes, required_input, shape_with_rank

FAMILY = Family("recurrent", OpClass.RECURRENT)
rule = FAMILY.rule

SIGMOID_FLOPS = 4  # 1 / (1 + exp(-x)): neg, exp, add, div
TANH_FLOPS = 1


def _dims(op: OpView) -> tuple[int, int, int, int, int]:
    x = shape_with_rank(op, required_input(op, 0), 3, "input X")
    seq, batch = (x[1], x[0]) if op.attrs.get("layout", 0) else (x[0], x[1])
    directions, _, input_size = shape_with_rank(op, required_input(op, 1), 3, "weight W")
    hidden = shape_with_rank(op, required_input(op, 2), 3, "recurrence R")[2]
    return seq, batch, input_size, hidden, directions


def _recurrent(op: OpView, gates: int, elementwise_per_hidden: int) -> Cost:
    seq, batch, input_size, hidden, directions = _dims(op)
    steps = seq * batch * directions
    macs = steps * gates * hidden * (input_size + hidden)
    flops = FLOPS_PER_MAC * macs + steps * hidden * elementwise_per_hidden
    return Cost(flops=flops, macs=macs, bytes_read=inputs_bytes(op, skip=(4,)), bytes_written=outputs_bytes(op))


@rule("LSTM", config_inputs=(4,))
def lstm(op: OpView) -> Cost:
    """Long short-term memory: 4 gates (i, o, f, c) per step.

    Formula: MACs = T·Bt·D · 4H·(I + H) (X·Wᵀ and H·Rᵀ); FLOPs = 2·MACs + T·Bt·D·H·e with
    e = 4 (adding the two products) + 8 [B given] (Wb + Rb) + 3·4 (three sigmoids) + 2·1 (two tanh)
    + 3 (f⊙C + i⊙c̃) + 1 (o⊙tanh(C)) + 6 [P given] (three peephole mul-adds).
    Bytes: read X, W, R, B, initial_h, initial_c and P once (weights assumed to stay on chip across
    steps), write Y, Y_h, Y_c.
    Assumptions: every sequence runs the full T steps (``sequence_lens``, a config input, is ignored: an
    upper bound); default activations.
    Reference: ONNX LSTM spec.
    """
    e = 4 + 3 * SIGMOID_FLOPS + 2 * TANH_FLOPS + 3 + 1
    if op.input(3) is not None:
        e += 8
    if op.input(7) is not None:
        e += 6
    return _recurrent(op, 4, e)


@rule("GRU", config_inputs=(4,))
def gru(op: OpView) -> Cost:
    """Gated recurrent unit: 3 gates (z, r, h) per step.

    Formula: MACs = T·Bt·D · 3H·(I + H); FLOPs = 2·MACs + T·Bt·D·H·e with e = 3 (adding the two
    products) + 6 [B given] + 2·4 (two sigmoids) + 1 (tanh) + 1 (r⊙(H·Rh)) + 4 ((1−z)⊙h̃ + z⊙H).
    Bytes: read X, W, R, B, initial_h once, write Y, Y_h.
    Assumptions: full T steps for every sequence (``sequence_lens`` ignored); default activations.
    Reference: ONNX GRU spec.
    """
    e = 3 + 2 * SIGMOID_FLOPS + TANH_FLOPS + 1 + 4
    if op.input(3) is not None:
        e += 6
    return _recurrent(op, 3, e)


@rule("RNN", config_inputs=(4,))
def rnn(op: OpView) -> Cost:
    """Simple recurrent layer ``H_t = f(X_t·Wᵀ + H_{t−1}·Rᵀ + Wb + Rb)``.

    Formula: MACs = T·Bt·D · H·(I + H); FLOPs = 2·MACs + T·Bt·D·H·e with e = 1 (adding the products)
    + 2 [B given] + 1 (the activation, Tanh by default, counted as one operation).
    Bytes: read X, W, R, B, initial_h once, write Y, Y_h.
    Assumptions: full T steps for every sequence (``sequence_lens`` ignored).
    Reference: ONNX RNN spec.
    """
    e = 1 + 1 + (2 if op.input(3) is not None else 0)
    return _recurrent(op, 1, e)
