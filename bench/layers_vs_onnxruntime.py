#!/usr/bin/env python3
"""Layer by layer against ONNX Runtime: softdla's layer-wise statistics (through softdla.cudla) beside ORT's
per-node profile of the same model, in one process.

    .venv/bin/python bench/layers_vs_onnxruntime.py /tmp/cm/resnet50_224px/b8 --precision int8
    .venv/bin/python bench/layers_vs_onnxruntime.py /tmp/cm/resnet50_224px/b1 --precision fp16 --runs 10

DIR is a directory `bench/cpu_models.py --workdir` leaves (input.npy, softdla_<precision>.loadable and the ORT
models). The ORT model: ort_qdq_u8s8.onnx for int8 (ORT's QDQ graph with U8 activations), model.onnx (FP32)
for fp16, or --ort-model. ORT runs with SOFTDLA_THREADS' count of intra-op threads (default 2), spinning on,
all graph optimisations. Each softdla layer is matched to the ORT nodes whose names start with the layer's
ONNX node path (ORT renames fused nodes after their outputs, so `/layer1.0/conv1/` matches both); the
residual adds softdla fuses into a convolution show 0 ms on the softdla side and are listed for ORT.

Both sides' timers add overhead (softdla's statistics close each layer; ORT's profiler records each node), so
compare layers with each other, not the sums with a plain run. Prints a Markdown table: median ms over --runs
tasks per layer and the ratio softdla / ORT (above 1: softdla slower).
"""
import argparse
import collections
import json
import os
import re
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import cpu_models  # noqa: E402


def ort_node_ms(model, x, threads, runs):
    """Median kernel time per node (ms) and each node's op type, from ORT's profiler."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "1")
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: x}
    for _ in range(runs + 2):
        sess.run(None, feed)
    with open(sess.end_profiling()) as f:
        events = json.load(f)
    times, kinds = collections.defaultdict(list), {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            name = e["name"][: -len("_kernel_time")]
            times[name].append(e["dur"] / 1000.0)
            kinds[name] = e["args"].get("op_name", "")
    return {k: (float(np.median(v)), kinds[k]) for k, v in times.items()}


def tensor_layers(model_path, layer_names):
    """{tensor: layer name} for each tensor a named layer produces, directly or through one-input ops after it
    (Clip, Relu, BatchNormalization, ...: what ORT fuses into the convolution)."""
    import onnx
    graph = onnx.load(model_path, load_external_data=False).graph
    producer = {o: n for n in graph.node for o in n.output}
    out = {}
    for tensor, node in producer.items():
        while node.name not in layer_names and len(node.input) >= 1 and node.input[0] in producer and \
                node.op_type in ("Clip", "Relu", "BatchNormalization", "Sigmoid", "Mul", "HardSigmoid"):
            node = producer[node.input[0]]
        if node.name in layer_names:
            out[tensor] = node.name
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--precision", choices=["int8", "fp16"], default="int8")
    ap.add_argument("--ort-model", help="the ORT model in DIR (default: by precision)")
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    threads = int(os.environ.get("SOFTDLA_THREADS", "2"))
    x = np.load(os.path.join(args.dir, "input.npy")).astype(np.float32)
    _, blob, raw = cpu_models.softdla_runner(os.path.join(args.dir, f"softdla_{args.precision}.loadable"), x)
    cpu_models.TOP_LAYERS = 1 << 30  # every layer, not the slowest 15
    stats = cpu_models.layer_statistics(blob, raw, args.runs)
    ort_model = args.ort_model or ("ort_qdq_u8s8.onnx" if args.precision == "int8" else "model.onnx")
    ort = ort_node_ms(os.path.join(args.dir, ort_model), x, threads, args.runs)
    print(f"{args.dir}, softdla {args.precision} against ORT {ort_model}, {threads} threads, median of {args.runs} "
          f"tasks; softdla task {stats['task_ms']:.2f} ms, ORT nodes {sum(v[0] for v in ort.values()):.2f} ms\n")
    print("| # | layer | softdla ms | ORT nodes | ORT ms | softdla / ORT |\n|---|---|---|---|---|---|")
    # ORT keeps a fused QDQ node's name with a suffix (`/features.2.conv/Conv_1_token_13`), and names a fused
    # FP32 convolution after its chain's output tensor (`/features.2.conv/Clip_1_output_0_nchwc`): a node whose
    # name, suffix removed, is a softdla layer's name, or a tensor that layer's chain of one-input ops
    # produces, belongs to that layer only; the prefix rule below takes the rest.
    layer_names = {row["name"] for row in stats["top"]}
    chain_end = tensor_layers(os.path.join(args.dir, ort_model), layer_names)

    def base_name(k):
        k = re.sub(r"(_token_\d+|_quant|_nchwc)$", "", k)
        return chain_end.get(k, re.sub(r"_output_0$", "", k))
    used = {k for k in ort if base_name(k) in layer_names}
    for row in sorted(stats["top"], key=lambda r: r["index"]):
        prefix = row["name"].rsplit("/", 1)[0] + "/"
        nodes = [k for k in ort if base_name(k) == row["name"]]
        if prefix != "/":
            nodes += [k for k in ort if k not in used and (k.startswith(row["name"]) or k.startswith(prefix))]
        used.update(nodes)
        ms = sum(ort[k][0] for k in nodes)
        ratio = f"{row['ms'] / ms:.2f}" if ms > 0 and row["ms"] > 0 else "—"
        kinds = ", ".join(sorted({ort[k][1] for k in nodes}))
        print(f"| {row['index']} | {row['name']} | {row['ms']:.3f} | {kinds} | {ms:.3f} | {ratio} |")
    rest = sum(v[0] for k, v in ort.items() if k not in used)
    print(f"\nORT nodes matching no softdla layer (its layout changes, input quantization): {rest:.3f} ms")


if __name__ == "__main__":
    main()
