"""The README's example outputs, made by the code they show, so that they cannot drift (issue 24).

    python docs/readme_examples.py           # rewrite every generated block of README.md
    python docs/readme_examples.py --check   # exit 1 naming the blocks that differ (tests/test_readme_examples.py)

A generated block sits between ``<!-- example: NAME (python docs/readme_examples.py) -->`` and
``<!-- /example -->``; NAME is a key of :data:`EXAMPLES`, whose function returns the block's text. Everything is
computed offline from the bundled samples and the light models of the onnx wheel, on bundled platforms.

The screenshots stay images: ``python tests/test_html.py docs/`` retakes docs/report-resnet50.png and
docs/report-tiny-transformer.png in headless Chromium.
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SAMPLES = ROOT / "samples"
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
WIDTH = 120
BUDGET = 'schema = 1\nmax_latency = { xavier = "1 ms", default = "2 ms" }\n'
BLOCK = re.compile(
    r"(<!-- example: (?P<name>[\w-]+) \(python docs/readme_examples\.py\) -->\n)(?P<body>.*?)(<!-- /example -->)", re.S
)


def _cli(*args: str) -> str:
    """What ``onnxroof ARGS`` prints on standard output, ``WIDTH`` columns wide, trailing spaces dropped; run from
    the repository root so that paths print as given."""
    import os

    from typer.testing import CliRunner

    from onnxroof.cli.commands import app

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        done = CliRunner().invoke(app, list(args), env={"COLUMNS": str(WIDTH), "NO_COLOR": "1", "TERM": "dumb"})
    finally:
        os.chdir(here)
    if done.exit_code != 0:
        raise SystemExit(f"onnxroof {' '.join(args)}: exit {done.exit_code}: {done.stderr or done.stdout}")
    return "\n".join(line.rstrip() for line in done.stdout.splitlines()) + "\n"


def audit_table() -> str:
    """``onnxroof audit`` over the samples and two light models on xavier and xeon-8380 with a latency budget:
    a few of the table's columns as a Markdown table (figures to 4 significant digits)."""
    from onnxroof.fleet.audit import AuditOptions, audit
    from onnxroof.fleet.engine import Engine, EngineKind

    paths = [SAMPLES / f"{name}.onnx" for name in ("tiny_cnn", "tiny_lstm", "tiny_transformer")]
    paths += [LIGHT / f"{name}.onnx" for name in ("light_bvlc_alexnet", "light_squeezenet")]
    with tempfile.TemporaryDirectory() as folder:
        budget = Path(folder) / "budget.toml"
        budget.write_text(BUDGET, encoding="utf-8")
        options = AuditOptions(platforms=("xavier", "xeon-8380"), dims={"batch": 1, "seq": 16}, budget=budget)
        table = audit(paths, options, engine=Engine(EngineKind.serial, 1)).table
    columns = ["name", "platform", "status", "budget", "latency_s", "flops", "params", "weight_bytes"]
    columns += ["peak_activation_bytes", "memory_bound_share"]
    rows = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for record in table.sort_values(["name", "platform"]).to_dict("records"):
        cells = [f"{v:.4g}" if isinstance(v, float) else str(v) for v in (record[c] for c in columns)]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def explain_fusion() -> str:
    """``report --explain-fusion`` on a Conv → Relu → BatchNormalization chain on xeon-8380 (``ort-cpu``): the BN
    cannot fold, and the misses table (the report's last section) says why."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    c = 8
    weights = [
        numpy_helper.from_array(np.ones((c, 3, 3, 3), np.float32), "w"),
        *(numpy_helper.from_array(np.ones(c, np.float32), n) for n in ("scale", "bias", "mean", "var")),
    ]
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["y"], ["r"], name="relu"),
            helper.make_node("BatchNormalization", ["r", "scale", "bias", "mean", "var"], ["z"], name="bn"),
        ],
        "conv_relu_bn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, c, 32, 32])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    command = ["--platform", "xeon-8380", "--fusion", "ort-cpu", "--explain-fusion"]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "conv_relu_bn.onnx"
        onnx.save(model, path)
        text = _cli("report", str(path), *command)
    misses = text[text.index("Fusion candidates that did not fuse") :].rstrip("\n") + "\n"
    return f"```console\n$ onnxroof report conv_relu_bn.onnx {' '.join(command)}\n...\n{misses}```\n"


def llm_example() -> str:
    """``onnxroof llm`` on the GenAI int4 Llama sample, xavier, prompt 128, generate 128: its console output."""
    args = ["llm", "samples/llm/genai_llama_int4/model.onnx", "--platform", "xavier", "--prompt", "128"]
    args += ["--generate", "128"]
    return f"```console\n$ onnxroof {' '.join(args)}\n{_cli(*args)}```\n"


EXAMPLES: dict[str, Callable[[], str]] = {
    "audit-table": audit_table,
    "explain-fusion": explain_fusion,
    "llm": llm_example,
}


def blocks(readme: str) -> dict[str, str]:
    """The generated blocks README.md holds now, by name."""
    return {m["name"]: m["body"] for m in BLOCK.finditer(readme)}


def regenerate(readme: str, names: list[str] | None = None) -> str:
    """``readme`` with the named blocks (every block when None) made again."""
    wanted = set(names) if names is not None else None

    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in EXAMPLES:
            raise SystemExit(f"README.md: unknown generated block {name!r} (known: {', '.join(EXAMPLES)})")
        body = EXAMPLES[name]() if wanted is None or name in wanted else match["body"]
        return match.group(1) + body + match.group(4)

    return BLOCK.sub(replace, readme)


def main(argv: list[str]) -> int:
    readme = README.read_text(encoding="utf-8")
    made = regenerate(readme)
    if "--check" in argv:
        stale = [name for name, body in blocks(made).items() if blocks(readme).get(name) != body]
        for name in stale:
            print(f"README.md: block {name!r} is stale: run python docs/readme_examples.py", file=sys.stderr)
        return 1 if stale else 0
    README.write_text(made, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
