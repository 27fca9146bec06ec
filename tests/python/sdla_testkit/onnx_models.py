"""Small ONNX graphs for the builder tests (onnx.helper), and helpers to build them with `softdla build`,
run them through the engine and compare with ONNX Runtime."""
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from .engine import ROOT, Engine

BUILD = os.environ.get("SOFTDLA_BUILD_DIR", os.path.join(ROOT, "build"))
SOFTDLA = os.path.join(BUILD, "softdla")


class G:
    """A tiny graph builder: g.node(op, inputs, **attrs) returns the output name."""

    def __init__(self, seed=0):
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self.rng = np.random.default_rng(seed)
        self.k = 0

    def input(self, name, shape):
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
        return name

    def const(self, array, name=None):
        name = name or f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, *shape, scale=None):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        s = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
        return self.const((self.rng.standard_normal(shape) * s).astype(np.float32))

    def node(self, op, inputs, n_out=1, **attrs):
        self.k += 1
        outs = [f"{op.lower()}{self.k}_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=f"{op}_{self.k}", **attrs))
        return outs[0] if n_out == 1 else outs

    def conv(self, x, cin, cout, k=3, stride=1, pad=None, groups=1, bias=True, **attrs):
        pad = k // 2 if pad is None else pad
        ins = [x, self.weight(cout, cin // groups, k, k)] + ([self.weight(cout, scale=0.1)] if bias else [])
        return self.node("Conv", ins, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4, group=groups, **attrs)

    def bn(self, x, c):
        return self.node("BatchNormalization", [x, self.const((self.rng.random(c) + 0.5).astype(np.float32)),
                                                self.const((self.rng.standard_normal(c) * 0.1).astype(np.float32)),
                                                self.const((self.rng.standard_normal(c) * 0.1).astype(np.float32)),
                                                self.const((self.rng.random(c) + 0.5).astype(np.float32))])

    def model(self, outputs, opset=17):
        for o in outputs if isinstance(outputs, list) else [outputs]:
            self.outputs.append(helper.make_tensor_value_info(o, TensorProto.FLOAT, None))
        graph = helper.make_graph(self.nodes, "g", self.inputs, self.outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return m


def ort_run(model, *arrays):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), arrays)})


def softdla_build(model, tmp_path, *flags, calib=None, check=True):
    """Builds with the softdla command; calib: list of calibration input arrays (single-input models)."""
    src = os.path.join(tmp_path, "model.onnx")
    onnx.save(model, src)
    out = os.path.join(tmp_path, "model.loadable")
    args = [SOFTDLA, "build", f"--onnx={src}", f"--saveEngine={out}", *flags]
    if calib is not None:
        d = os.path.join(tmp_path, "calib")
        os.makedirs(d, exist_ok=True)
        if isinstance(calib, dict):
            np.savez(os.path.join(d, "data.npz"), **calib)
        else:
            np.save(os.path.join(d, "data.npy"), calib)
        args.append(f"--calib-data={d}")
    r = subprocess.run(args, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"softdla build failed:\n{r.stderr}")
    return (open(out, "rb").read() if r.returncode == 0 else None), r


def run_loadable(loadable, *arrays):
    return Engine(loadable).run_float(*arrays)


def built_output_vs_ort(model, tmp_path, x, int8=False, calib_samples=8, seed=0):
    """Builds `model` (one input) with the softdla command, FP16 or INT8 (calibrated on random samples of x's
    shape), runs it on x and returns (output 0, ONNX Runtime's output 0 for x)."""
    calib = (np.random.default_rng(seed + 1).standard_normal((calib_samples,) + x.shape[1:]).astype(np.float32)
             if int8 else None)
    blob, _ = softdla_build(model, tmp_path, *(["--int8", "--fp16"] if int8 else ["--fp16"]), calib=calib)
    ref = ort_run(model, x)[0]
    return run_loadable(blob, x)[0].reshape(ref.shape), ref


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


def cosine(a, b):
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-30))
