"""ONNX's node conformance cases (issue 12, item 6) through the builder and the engine: every case of an op
the builder lowers, and of the CNN ops it must reject, either matches ONNX's expected outputs in FP16 (rel L2
<= 1e-3, or off only by the FP16 rounding of its inputs) or is rejected with a message that names the node.
Never a wrong result, never a crash. The cases, the variant with constant operands and the classification
are in tools/onnx_node_suite.py (which also prints the table published in docs/ACCURACY.md)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import onnx_node_suite as suite  # noqa: E402

CASES = {c.name: c for c in suite.generate_cases(suite.LOWERED_OPS + suite.REJECTED_OPS)}


@pytest.fixture(scope="module")
def results(request):
    """Runs the selected cases once, in a child process, so that a crash of the native code fails one case
    instead of the session."""
    selected = [item.callspec.params["name"] for item in request.session.items
                if item.module.__name__ == __name__ and hasattr(item, "callspec")]
    return suite.run_suite([CASES[name] for name in selected])


@pytest.mark.parametrize("name", list(CASES))
def test_onnx_node_case(name, results):
    r = results[name]
    ok, why = suite.acceptable(r)
    assert ok, f"{r.op} {r.name} (opset {r.opset}): {r.result}: {why}\n{r.detail}"
