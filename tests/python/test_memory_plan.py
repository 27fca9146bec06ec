"""softdla.inspect()["memory_plan"]: where each intermediate tensor lives in the arena and for which ops.
The expected tensors, sizes and lifetimes are computed here from the op list (layer_info), not read back."""
import numpy as np

import softdla
from sdla_testkit.onnx_models import G

ELEMENT_SIZE = {"fp32": 4, "fp16": 2, "int8": 1, "int32": 4}


def branchy_model():
    """A chain with a residual add and a concat, so tensors die at different times and space is reused."""
    g = G(seed=3)
    x = g.input("x", [1, 8, 16, 16])
    a = g.node("Relu", [g.conv(x, 8, 8)])
    b = g.node("Relu", [g.conv(a, 8, 8)])
    c = g.node("Add", [a, g.conv(b, 8, 8)])
    d = g.node("Relu", [g.conv(c, 8, 16, stride=2)])
    e = g.conv(d, 16, 8)
    f = g.node("Concat", [e, g.conv(d, 16, 8, k=1)], axis=1)
    return g.model([g.node("Relu", [g.conv(f, 16, 4)])])


def expected_plan(info):
    """{tensor: (bytes, first_op, last_op)} for every tensor an op writes that is not a loadable output."""
    io = {t["name"] for t in info["inputs"] + info["outputs"]}
    out = {}
    for layer in info["layer_info"]:
        for t in layer["outputs"]:
            if t["name"] not in io:
                out[t["name"]] = [int(np.prod(t["shape"])) * ELEMENT_SIZE[t["dtype"]], layer["index"], layer["index"]]
    for layer in info["layer_info"]:
        for t in layer["inputs"]:
            if t["name"] in out:
                out[t["name"]][2] = max(out[t["name"]][2], layer["index"])
    return {k: tuple(v) for k, v in out.items()}


def test_memory_plan_lists_every_intermediate_with_its_lifetime():
    for precision in ({"fp16": True}, {"fp16": True, "fp32_reference": True}):
        info = softdla.inspect(softdla.build(branchy_model(), **precision))
        plan = info["memory_plan"]
        assert [list(e) for e in plan] == [["tensor", "offset", "bytes", "first_op", "last_op"]] * len(plan)
        got = {e["tensor"]: (e["bytes"], e["first_op"], e["last_op"]) for e in plan}
        assert len(got) == len(plan)  # each tensor once
        assert got == expected_plan(info)
        assert len(plan) >= 8


def test_memory_plan_never_shares_bytes_between_live_tensors():
    info = softdla.inspect(softdla.build(branchy_model(), fp16=True))
    plan = info["memory_plan"]
    shared = 0
    for i, a in enumerate(plan):
        assert a["offset"] % 64 == 0 and a["offset"] + a["bytes"] <= info["arena_bytes"]
        for b in plan[i + 1:]:
            bytes_overlap = a["offset"] < b["offset"] + b["bytes"] and b["offset"] < a["offset"] + a["bytes"]
            alive_together = a["first_op"] <= b["last_op"] and b["first_op"] <= a["last_op"]
            assert not (bytes_overlap and alive_together), (a, b)
            shared += bytes_overlap
    assert shared > 0  # the plan does reuse space, so the check above had something to catch
    assert info["arena_bytes"] < sum(e["bytes"] for e in plan)
