"""softdla's CPU engine against ONNX Runtime (CPU) on ResNet-50-sized convolutions, in the same run.

softdla INT8 vs ORT QLinearConv (uint8 activations, int8 per-channel weights) and softdla FP16 / FP32
vs ORT FP32 Conv (ORT's CPU provider has no FP16 convolution), each with bias + ReLU. Both use all
cores (ORT intra-op threads = os.cpu_count(), worker spinning off so the two do not fight for cores). Prints median milliseconds over repeated runs after a
warm-up, GOPS and the ratio ORT time / softdla time (> 1: softdla faster).

    .venv/bin/python bench/conv_vs_onnxruntime.py [--repeat 30] [--set resnet50|mobilenet_v2] [--threads N]

--set picks the layer list (ResNet-50's, or MobileNetV2's dense 1x1 layers); --threads sets both sides'
threads (SOFTDLA_THREADS and ORT's intra-op threads; default: all cores).
"""
import argparse
import os
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
from sdla_testkit import writer  # noqa: E402
from sdla_testkit.engine import Engine  # noqa: E402

LAYER_SETS = {
    "resnet50": [("res2_3x3_64", 64, 64, 56, 3), ("res3_1x1_512to128", 512, 128, 28, 1),
                 ("res4_3x3_256", 256, 256, 14, 3), ("res5_1x1_512to2048", 512, 2048, 7, 1),
                 ("res2_1x1_64to256", 64, 256, 56, 1), ("res2_1x1_256to64", 256, 64, 56, 1)],
    "mobilenet_v2": [("mbv2_1x1_16to96_112", 16, 96, 112, 1), ("mbv2_1x1_24to144_56", 24, 144, 56, 1),
                     ("mbv2_1x1_144to24_56", 144, 24, 56, 1), ("mbv2_1x1_32to192_28", 32, 192, 28, 1),
                     ("mbv2_1x1_576to96_14", 576, 96, 14, 1), ("mbv2_1x1_160to960_7", 160, 960, 7, 1)],
}
THREADS = os.cpu_count()


def median_ms(fn, repeat):
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times))


def softdla_conv(c, k, hw, r, dtype):
    g = writer.Graph()
    x = g.input("x", (1, c, hw, hw), dtype, 0.05)
    y = g.tensor("y", (1, k, hw, hw), dtype, 0.05)
    rng = np.random.default_rng(0)
    if dtype == np.int8:
        w = rng.integers(-128, 128, (k, c, r, r))
        post = writer.sdp([writer.sdp_step("bias", ivalues=np.full(k, 1000)), writer.sdp_step("relu")],
                          multiplier=[12345], shift=[24])
    else:
        w = rng.standard_normal((k, c, r, r)) * 0.05
        post = writer.sdp([writer.sdp_step("bias", fvalues=np.full(k, 0.1)), writer.sdp_step("relu")])
    g.op("Conv", [x], y, g.conv_params(g.constant(w, dtype), pads=(r // 2,) * 4, post=post))
    g.output(y)
    eng = Engine(g.serialize())
    xin = (rng.integers(-128, 128, (1, c, hw, hw)) if dtype == np.int8 else rng.standard_normal((1, c, hw, hw)))
    run, _ = eng.prepare([np.ascontiguousarray(xin.astype(dtype)).tobytes()], 1)
    return lambda: (eng, run())  # eng stays alive with the closure


def ort_session(model):
    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # ORT's workers otherwise spin after each run and take the cores from whatever runs next in this
    # process (softdla's measurement); with 2 cores that halves softdla's speed.
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def ort_runner(sess, x, y):
    """Runs with preallocated input and output (I/O binding), as the softdla side reuses its buffers."""
    binding = sess.io_binding()
    binding.bind_ortvalue_input("x", x)
    binding.bind_ortvalue_output("y", y)
    return lambda: sess.run_with_iobinding(binding)


def ort_conv_fp32(c, k, hw, r):
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, (k, c, r, r), (rng.standard_normal((k, c, r, r)) * 0.05).astype(np.float32).ravel())
    b = helper.make_tensor("b", TensorProto.FLOAT, (k,), np.full(k, 0.1, np.float32))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[r // 2] * 4),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, c, hw, hw))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, k, hw, hw))], [w, b])
    sess = ort_session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    x = ort.OrtValue.ortvalue_from_numpy(rng.standard_normal((1, c, hw, hw)).astype(np.float32))
    y = ort.OrtValue.ortvalue_from_shape_and_type((1, k, hw, hw), np.float32)
    return ort_runner(sess, x, y)


def ort_conv_int8(c, k, hw, r):
    rng = np.random.default_rng(0)
    init = [
        helper.make_tensor("xs", TensorProto.FLOAT, (), [0.05]), helper.make_tensor("xz", TensorProto.UINT8, (), [128]),
        helper.make_tensor("w", TensorProto.INT8, (k, c, r, r), rng.integers(-127, 128, (k, c, r, r)).astype(np.int8).ravel()),
        helper.make_tensor("ws", TensorProto.FLOAT, (k,), np.full(k, 0.01, np.float32)),
        helper.make_tensor("wz", TensorProto.INT8, (k,), np.zeros(k, np.int8)),
        helper.make_tensor("ys", TensorProto.FLOAT, (), [0.05]), helper.make_tensor("yz", TensorProto.UINT8, (), [0]),
        helper.make_tensor("b", TensorProto.INT32, (k,), np.full(k, 1000, np.int32)),
    ]
    # Output zero point 0 with uint8 makes the requantize clamp at 0: that is the fused ReLU.
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], pads=[r // 2] * 4)
    graph = helper.make_graph([node], "qconv", [helper.make_tensor_value_info("x", TensorProto.UINT8, (1, c, hw, hw))],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, (1, k, hw, hw))], init)
    sess = ort_session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    x = ort.OrtValue.ortvalue_from_numpy(rng.integers(0, 256, (1, c, hw, hw)).astype(np.uint8))
    y = ort.OrtValue.ortvalue_from_shape_and_type((1, k, hw, hw), np.uint8)
    return ort_runner(sess, x, y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--set", choices=sorted(LAYER_SETS), default="resnet50", help="which layers (default resnet50)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads on both sides (default: all)")
    args = ap.parse_args()
    global THREADS
    THREADS = args.threads
    os.environ["SOFTDLA_THREADS"] = str(args.threads)  # read when the engine's thread pool starts
    print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, {os.cpu_count()} cores, {THREADS} thread(s)")
    print(f"{'layer':22} {'precision':10} {'softdla ms':>11} {'ORT ms':>9} {'softdla GOPS':>13} {'ORT/softdla':>12}")
    for name, c, k, hw, r in LAYER_SETS[args.set]:
        gop = 2 * k * hw * hw * c * r * r / 1e9
        for label, ours, theirs in [("int8", softdla_conv(c, k, hw, r, np.int8), ort_conv_int8(c, k, hw, r)),
                                    ("fp16", softdla_conv(c, k, hw, r, np.float16), ort_conv_fp32(c, k, hw, r)),
                                    ("fp32", softdla_conv(c, k, hw, r, np.float32), ort_conv_fp32(c, k, hw, r))]:
            a, b = median_ms(ours, args.repeat), median_ms(theirs, args.repeat)
            print(f"{name:22} {label:10} {a:11.3f} {b:9.3f} {gop / a * 1e3:13.1f} {b / a:12.2f}")


if __name__ == "__main__":
    main()
