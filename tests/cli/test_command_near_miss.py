"""`fusebridge optimize --explain` on a real torch export names the pattern that nearly matched
and why it refused, next to the rules that fired."""

from pathlib import Path

import numpy as np
import onnxruntime as ort
from helpers.error_bounds import ONNXRUNTIME
from helpers.graph_bounds import SESSION, check_outputs, output_bounds
from test_command import run

import fusebridge

FIXTURE = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "onnx"
    / "exported_patterns"
    / "torch_linear_gru_residual.onnx"
)


def test_explain_names_the_near_miss_and_its_reason(tmp_path):
    """Linear -> GRU(batch_first) with the Linear's output added to the GRU's (a residual): the
    batch_first Transposes fold into the GRU's layout, the projection stays, and --explain says
    which pattern refused and why."""
    out_path = tmp_path / "optimized.onnx"
    out = run("optimize", str(FIXTURE), "-o", str(out_path), "--explain")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "  gru_input_layout       fired 1" in lines
    assert "  gru_layout_transposes  fired 1" in lines
    at = lines.index("  matmul_add_fusion_gru  fired 0")
    assert (
        lines[at + 1]
        .strip()
        .endswith(
            ": the projection output (after the bias) '/fc/Add_output_0' has a second consumer "
            "(Add '/Add', FusionGRU '/gru/GRU')"
        )
    )
    assert lines[at + 1].strip().startswith("refused at ")
    assert "after:  Add x2, FusionGRU x1, MatMul x1" in out.stdout
    # What it wrote runs as the original does.
    feeds = {"x": np.random.default_rng(0).standard_normal((3, 7, 6)).astype(np.float32)}
    want = ort.InferenceSession(str(FIXTURE), providers=["CPUExecutionProvider"]).run(None, feeds)
    model = fusebridge.load(str(out_path))
    bounds = output_bounds(fusebridge.load(str(FIXTURE)), feeds, (SESSION, ONNXRUNTIME))
    check_outputs(fusebridge.Session(model).run(feeds), dict(zip(["y", "hn"], want)), bounds)
