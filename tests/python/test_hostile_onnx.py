"""Hand-made hostile ONNX models (issue 17): each one used to crash the builder (ASan/UBSan: overflow,
out-of-range index, NaN-to-int conversion). Each must now be a BuildError naming the node or tensor and
the rule, from both `build` and `check`, and never a crash."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import softdla

BIG = 1 << 31


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "hostile", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def fin(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def i64(name, values):
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def hostile_models():
    x4 = fin("x", [1, 2, 4, 4])
    y = fin("y", None)
    yield "input dims overflow", model([helper.make_node("Relu", ["x"], ["y"])], [fin("x", [BIG, BIG, BIG, 4])], [y]), \
        "input .x."
    big_init = TensorProto()
    big_init.name, big_init.data_type = "w", TensorProto.FLOAT
    big_init.dims.extend([1 << 40, 1 << 40])
    yield "initializer dims overflow", model([helper.make_node("Add", ["x", "w"], ["y"])], [x4], [y], [big_init]), \
        "tensor 'w' has dimension"
    yield "reshape shape overflow", model([helper.make_node("Reshape", ["x", "s"], ["y"], name="r")], [x4], [y],
                                          [i64("s", [1 << 62, 4, 1 << 62, 2])]), "node 'r'"
    yield "concat axis 5 on rank 2", model([helper.make_node("Concat", ["x", "x"], ["y"], name="c", axis=5)],
                                           [fin("x", [2, 3])], [y]), "node 'c'.*axis"
    yield "softmax axis 7", model([helper.make_node("Softmax", ["x"], ["y"], name="s", axis=7)], [x4], [y]), \
        "node 's'.*axis"
    yield "transpose short perm", model([helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[0, 1])], [x4], [y]), \
        "node 't'.*permutation"
    yield "transpose repeated perm", model([helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[0, 0, 1, 2])],
                                           [x4], [y]), "node 't'.*permutation"
    yield "unsqueeze duplicate axes", model([helper.make_node("Unsqueeze", ["x", "a"], ["y"], name="u")],
                                            [fin("x", [2, 3])], [y], [i64("a", [0, 0])]), "node 'u'.*twice"
    yield "unsqueeze duplicate axes (attribute)", model([helper.make_node("Unsqueeze", ["x"], ["y"], name="u", axes=[1, 1])],
                                                        [fin("x", [2, 3])], [y], opset=11), "node 'u'.*twice"
    nan_starts = numpy_helper.from_array(np.array([np.nan], np.float32), "st")
    yield "slice NaN starts", model([helper.make_node("Cast", ["st"], ["sti"], to=TensorProto.INT64),
                                     helper.make_node("Slice", ["x", "sti", "en"], ["y"], name="sl")],
                                    [x4], [y], [nan_starts, i64("en", [2])]), "not a finite number"
    yield "empty Range as a shape", model(
        [helper.make_node("Range", ["a", "b", "d"], ["r"], name="range"),
         helper.make_node("Reshape", ["x", "r"], ["y"], name="r2")], [x4], [y],
        [i64("a", 0), i64("b", 0), i64("d", 1)]), "node 'r2'"
    yield "pool kernel of the wrong length", model(
        [helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[2, 2, 2])], [x4], [y]), "node 'p'.*kernel_shape"
    yield "conv pads negative", model(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="cv", pads=[-5, 0, 0, 0])], [x4], [y],
        [numpy_helper.from_array(np.ones((2, 2, 3, 3), np.float32), "w")]), "node 'cv'.*pads"
    yield "batchnorm missing inputs", model([helper.make_node("BatchNormalization", ["x", "s"], ["y"], name="bn")], [x4], [y],
                                            [numpy_helper.from_array(np.ones(2, np.float32), "s")]), "node 'bn'.*missing"
    yield "attribute of the wrong type", model([helper.make_node("Softmax", ["x"], ["y"], name="s", axis=[1])], [x4], [y]), \
        "node 's'.*must be an int"
    yield "NaN LeakyRelu alpha", model([helper.make_node("LeakyRelu", ["x"], ["y"], name="lr", alpha=float("nan"))], [x4], [y]), \
        "node 'lr'.*finite"


CASES = list(hostile_models())


@pytest.mark.parametrize("name,m,match", CASES, ids=[c[0] for c in CASES])
def test_build_rejects(name, m, match):
    with pytest.raises(softdla.BuildError, match=match):
        softdla.build(m, fp16=True, progress=False)


@pytest.mark.parametrize("name,m,match", CASES, ids=[c[0] for c in CASES])
def test_check_never_crashes(name, m, match):
    try:
        rows = softdla.check(m)
    except softdla.BuildError:
        return  # a model-level problem (an input, an initializer) is an error for check too
    assert any(not r["supported"] for r in rows), rows
