"""The Orin DLA latency estimate (softdla.orin_latency, issue 16 item 5): its equations on hand-made layers with
the expected times worked out here from the documented constants, the ONNX layer derivation, the published
figures it is calibrated against, and the command line."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from softdla import onnx_layers, orin_latency, orin_published

from sdla_testkit.engine import ROOT
from sdla_testkit.onnx_models import G

# Parameters that isolate one term: no overhead, no memory cost, or a plain roofline.
NO_MEM = {"dram_gbps": 1e9, "op_overhead_cycles": 0.0, "overlap": 1.0}
NO_COMPUTE = {"conv_efficiency": 1.0, "sdp_elems_per_cycle": 1e12, "op_overhead_cycles": 0.0, "overlap": 1.0}


def tensor(name, shape, dtype="int8"):
    return {"name": name, "shape": list(shape), "dtype": dtype, "scale": 1.0}


def conv_layer(n=1, c=64, k=64, hw=56, kernel=3, groups=1, precision="int8", name="conv", src="x", dst="y",
               weight_bytes=None):
    macs = n * k * hw * hw * (c // groups) * kernel * kernel
    return {"index": 0, "name": name, "op": "conv", "precision": precision,
            "inputs": [tensor(src, [n, c, hw, hw], precision)], "outputs": [tensor(dst, [n, k, hw, hw], precision)],
            "params": {"kernel": [kernel, kernel], "stride": [1, 1], "pad": [1, 1, 1, 1], "dilation": [1, 1],
                       "groups": groups, "out_channels": k},
            "fused": ["bias", "relu"], "weight_bytes": k * (c // groups) * kernel * kernel if weight_bytes is None
            else weight_bytes, "macs": macs, "input_bytes": n * c * hw * hw, "output_bytes": n * k * hw * hw}


def sdp_layer(ins, out, op="add", name="add"):
    elems = math.prod(out["shape"])
    return {"index": 0, "name": name, "op": "sdp", "precision": "int8", "inputs": ins, "outputs": [out],
            "params": {"operation": op}, "fused": [], "weight_bytes": 0, "macs": elems,
            "input_bytes": sum(math.prod(t["shape"]) for t in ins), "output_bytes": elems}


# --- the equations -------------------------------------------------------------------------------------

def test_compute_bound_conv_is_macs_over_array_clock_and_efficiency():
    layer = conv_layer()  # 64 -> 64 channels: whole atoms (64 input channels x 32 kernels), full utilization
    r = orin_latency.estimate([layer], clock_mhz=1000, params={**NO_MEM, "conv_efficiency": 0.5})
    macs = 56 * 56 * 64 * 64 * 9
    assert r["layers"][0]["macs"] == macs
    expected_ms = macs / (8192 * 0.5 * 1000e6) * 1e3  # 8,192 INT8 MACs per cycle
    assert r["total_ms"] == pytest.approx(expected_ms, rel=1e-9)
    assert r["layers"][0]["bound"] == "compute"
    assert r["layers"][0]["utilization"] == 1.0
    assert r["fps"] == pytest.approx(1 / (expected_ms / 1e3))


def test_partial_atoms_lower_the_utilization():
    # 32 input channels fill half of a 64-channel atom; 16 kernels half of a 32-kernel group
    r32 = orin_latency.estimate([conv_layer(c=32)], clock_mhz=1000, params=NO_MEM)
    r16 = orin_latency.estimate([conv_layer(k=16)], clock_mhz=1000, params=NO_MEM)
    eff = orin_latency.FITTED["conv_efficiency"]
    assert r32["layers"][0]["utilization"] == 0.5
    assert r32["total_ms"] == pytest.approx(56 * 56 * 64 * 32 * 9 / (8192 * 0.5 * eff * 1e9) * 1e3)
    assert r16["layers"][0]["utilization"] == 0.5
    # 3-channel image, 7x7 kernel: channel extension packs 4 x 7 = 28 lanes into one 64-channel atom,
    # of which 3 x 7 = 21 carry data
    assert orin_latency.conv_utilization(3, 64, 1, 7, 64, 32) == pytest.approx(21 / 64)
    # depthwise: each kernel reads one channel, so a 64-channel x 32-kernel tile does 32 useful MACs of 2,048
    assert orin_latency.conv_utilization(256, 256, 256, 3, 64, 32) == pytest.approx(32 / 2048)
    # ResNeXt's 32 groups of 4 channels: 8 groups share a 32-kernel group -> 8 x 4 x 4 of 2,048
    assert orin_latency.conv_utilization(128, 128, 32, 3, 64, 32) == pytest.approx(8 * 16 / 2048)


def test_memory_bound_layer_is_bytes_over_bandwidth():
    a, b = tensor("a", [1, 64, 56, 56]), tensor("b", [1, 64, 56, 56])
    layer = sdp_layer([a, b], tensor("c", [1, 64, 56, 56]))
    r = orin_latency.estimate([layer], clock_mhz=1000,
                              params={"dram_gbps": 10.0, "op_overhead_cycles": 0.0, "overlap": 1.0})
    nbytes = 3 * 64 * 56 * 56  # two INT8 inputs read, one output written (network I/O: DRAM)
    assert r["layers"][0]["bytes"] == nbytes
    assert r["layers"][0]["bound"] == "memory"
    assert r["total_ms"] == pytest.approx(nbytes / 10e9 * 1e3, rel=1e-9)
    # the SDP streams (reads, computes, writes in one pass): its time is the larger term whatever `overlap`,
    # which applies to convolutions only
    r0 = orin_latency.estimate([layer], clock_mhz=1000,
                               params={"dram_gbps": 10.0, "op_overhead_cycles": 0.0, "overlap": 0.0})
    assert r0["total_ms"] == pytest.approx(r["total_ms"], rel=1e-12)
    # two DLAs at once share the bandwidth
    r2 = orin_latency.estimate([layer], clock_mhz=1000, dlas=2,
                               params={"dram_gbps": 10.0, "op_overhead_cycles": 0.0, "overlap": 1.0})
    assert r2["total_ms"] == pytest.approx(2 * r["total_ms"])


def test_conv_overlap_hides_part_of_the_shorter_term():
    layer = conv_layer()  # 64 -> 64, 3x3 on 56x56: network input and output in DRAM
    macs, nbytes = 56 * 56 * 64 * 64 * 9, 2 * 64 * 56 * 56 + 64 * 64 * 9
    t_c, t_m = macs / (8192 * 1e9), nbytes / 10e9  # efficiency 1, 1 GHz, 10 GB/s
    for overlap in (0.0, 0.25, 1.0):
        r = orin_latency.estimate([layer], clock_mhz=1000, params={
            "dram_gbps": 10.0, "op_overhead_cycles": 0.0, "overlap": overlap, "conv_efficiency": 1.0})
        assert r["layers"][0]["bytes"] == nbytes
        assert r["total_ms"] == pytest.approx((max(t_c, t_m) + (1 - overlap) * min(t_c, t_m)) * 1e3, rel=1e-9)


def test_channels_are_padded_to_32_byte_atoms():
    t = tensor("a", [1, 40, 10, 10])
    r = orin_latency.estimate([sdp_layer([t], tensor("b", [1, 40, 10, 10]), op="relu")], params=NO_COMPUTE)
    assert r["layers"][0]["bytes"] == 2 * 64 * 10 * 10  # 40 INT8 channels -> 2 atoms of 32
    t16 = tensor("a", [1, 40, 10, 10], "fp16")
    r16 = orin_latency.estimate([sdp_layer([t16], tensor("b", [1, 40, 10, 10], "fp16"), op="relu")],
                                params=NO_COMPUTE)
    assert r16["layers"][0]["bytes"] == 2 * 48 * 10 * 10 * 2  # 40 FP16 channels -> 3 atoms of 16


def test_overhead_floor():
    layer = sdp_layer([tensor("a", [1, 1, 1, 1])], tensor("b", [1, 1, 1, 1]), op="relu")
    r = orin_latency.estimate([layer], clock_mhz=1250, params={"op_overhead_cycles": 5000.0})
    assert r["layers"][0]["bound"] == "overhead"
    assert r["layers"][0]["overhead_ms"] == pytest.approx(5000 / 1250e6 * 1e3)
    assert r["total_ms"] == pytest.approx(4e-3, rel=1e-3)  # 4 us, plus nanoseconds of data
    assert r["total_ms"] >= 4e-3


def test_fp16_is_slower_than_int8_for_the_same_conv():
    layer = conv_layer()
    i8 = orin_latency.estimate([layer], params=NO_MEM)
    f16 = orin_latency.estimate([layer], precision="fp16", params=NO_MEM)
    # 64 -> 64 channels fill the FP16 atoms too (32 channels x 16 kernels): the ratio is 8,192 / 512 MACs
    assert f16["layers"][0]["precision"] == "fp16"
    assert f16["total_ms"] / i8["total_ms"] == pytest.approx(16.0)
    # with memory, FP16 also moves twice the bytes
    assert orin_latency.estimate([layer], precision="fp16")["layers"][0]["bytes"] > \
        orin_latency.estimate([layer])["layers"][0]["bytes"]


def test_batch_scales_every_term_linearly():
    one = orin_latency.estimate([conv_layer(n=1)])
    four = orin_latency.estimate([conv_layer(n=4)])
    assert four["batch"] == 4
    assert four["total_ms"] == pytest.approx(4 * one["total_ms"], rel=1e-12)
    assert four["fps"] == pytest.approx(one["fps"])


def test_sparsity_doubles_the_rate_of_wide_int8_convs_only():
    wide, narrow = conv_layer(c=128, k=128), conv_layer(c=64, k=64)
    for layer, factor in ((wide, 2.0), (narrow, 1.0)):
        dense = orin_latency.estimate([layer], params=NO_MEM)["total_ms"]
        sparse = orin_latency.estimate([layer], sparse=True, params=NO_MEM)["total_ms"]
        assert dense / sparse == pytest.approx(factor)
    # FP16 convolutions are never sparse
    dense = orin_latency.estimate([wide], precision="fp16", params=NO_MEM)["total_ms"]
    assert orin_latency.estimate([wide], precision="fp16", sparse=True, params=NO_MEM)["total_ms"] == dense
    # 2 of every 4 channels per kernel: a pass takes 128 dense channels, so 192 fill 3 of 4 such atoms
    # (dense: 3 whole 64-channel atoms) and the gain is 2 x 0.75
    odd = conv_layer(c=192, k=128)
    dense = orin_latency.estimate([odd], params=NO_MEM)
    sparse = orin_latency.estimate([odd], sparse=True, params=NO_MEM)
    assert (dense["layers"][0]["utilization"], sparse["layers"][0]["utilization"]) == (1.0, 0.75)
    assert dense["total_ms"] / sparse["total_ms"] == pytest.approx(1.5)


def test_sparsity_compresses_the_weights_but_not_the_activations():
    layer = conv_layer(c=128, k=128, hw=8)  # 147,456 weight bytes and 8 KiB maps: fits the conv buffer
    dense = orin_latency.estimate([layer], params=NO_COMPUTE)["layers"][0]
    sparse = orin_latency.estimate([layer], sparse=True, params=NO_COMPUTE)["layers"][0]
    acts = 2 * 128 * 8 * 8
    assert dense["bytes"] == acts + 128 * 128 * 9
    assert sparse["bytes"] == acts + 128 * 128 * 9 * 5 // 8  # half the values + 1 mask bit per weight
    # compressed weights also fit the conv buffer in fewer tiles: 600,000 dense bytes take 3 tiles of
    # 256 KiB (the 2 MiB input read twice more), 375,000 compressed ones 2 (read once more)
    big = conv_layer(c=256, k=64, hw=90, weight_bytes=600_000)
    big["inputs"][0]["shape"] = [1, 256, 64, 128]
    x = 256 * 64 * 128
    d = orin_latency.estimate([big], params=NO_COMPUTE)["layers"][0]["bytes"]
    s = orin_latency.estimate([big], sparse=True, params=NO_COMPUTE)["layers"][0]["bytes"]
    assert d - s == (600_000 - 375_000) + x


def test_intermediate_tensors_that_fit_stay_in_sram():
    x, mid, y = tensor("x", [1, 64, 32, 32]), tensor("mid", [1, 64, 32, 32]), tensor("y", [1, 64, 32, 32])
    first = sdp_layer([x], mid, op="relu", name="first")
    second = sdp_layer([mid], y, op="relu", name="second")
    r = orin_latency.estimate([first, second], params=NO_COMPUTE)
    assert [l["bytes"] for l in r["layers"]] == [64 * 32 * 32, 64 * 32 * 32]  # 64 KiB intermediate: SRAM
    big = [tensor("x", [1, 64, 160, 160]), tensor("mid", [1, 64, 160, 160]), tensor("y", [1, 64, 160, 160])]
    r = orin_latency.estimate([sdp_layer([big[0]], big[1], op="relu"), sdp_layer([big[1]], big[2], op="relu")],
                              params=NO_COMPUTE)
    assert [l["bytes"] for l in r["layers"]] == [2 * 64 * 160 * 160] * 2  # 1.6 MB > 1 MiB: DRAM both ways


def test_conv_that_overflows_the_conv_buffer_rereads_its_input():
    # 600,000 weight bytes and a 2 MiB input against the 512 KiB buffer, tiles of 256 KiB: weights in 3 tiles
    # (input read 2 more times) or input in 8 (weights read 7 more times); the cheaper is 2 x 2 MiB
    layer = conv_layer(c=256, k=64, hw=90, weight_bytes=600_000)
    layer["inputs"][0]["shape"] = [1, 256, 64, 128]
    x = 256 * 64 * 128
    extra = min(2 * x, 7 * 600_000)
    r = orin_latency.estimate([layer], params=NO_COMPUTE)
    assert r["layers"][0]["bytes"] == x + 64 * 90 * 90 + 600_000 + extra


def pool_layer(src, dst, n=1, c=64, hw=56, kernel=3, stride=2, name="pool"):
    out = (hw + 2 - kernel) // stride + 1
    return {"index": 0, "name": name, "op": "pool", "precision": "int8",
            "inputs": [tensor(src, [n, c, hw, hw])], "outputs": [tensor(dst, [n, c, out, out])],
            "params": {"type": "max", "kernel": [kernel, kernel], "stride": [stride, stride], "pad": [1, 1, 1, 1]},
            "fused": [], "weight_bytes": 0, "macs": n * c * out * out,
            "input_bytes": n * c * hw * hw, "output_bytes": n * c * out * out}


def test_a_pool_after_a_conv_runs_on_the_fly():
    conv = conv_layer(hw=56, name="conv", src="x", dst="y")
    big = dict(conv, inputs=[tensor("x", [1, 64, 224, 224])], outputs=[tensor("y", [1, 64, 224, 224])])
    r = orin_latency.estimate([big, pool_layer("y", "z", hw=224)], params=NO_COMPUTE)
    # the conv's 3.2 MB output goes straight to the PDP; the fused op writes the 112 x 112 pooled map
    assert [l["bytes"] for l in r["layers"]] == [64 * 224 * 224 + 64 * 112 * 112 + 64 * 64 * 9, 0]
    assert r["layers"][1]["ms"] == 0.0 and r["layers"][1]["fused_into"] == 0
    assert r["layers"][0]["fused_into"] is None
    # the pool's overhead goes with it
    o = orin_latency.estimate([big, pool_layer("y", "z", hw=224)], params={"op_overhead_cycles": 1e6})
    assert o["layers"][1]["overhead_ms"] == 0.0 and o["layers"][0]["overhead_ms"] > 0.0
    # not fused: a window wider than the PDP's 8, a conv output that another op also reads
    wide = orin_latency.estimate([big, pool_layer("y", "z", hw=224, kernel=9)], params=NO_COMPUTE)
    assert wide["layers"][1]["fused_into"] is None and wide["layers"][1]["bytes"] > 0
    add = sdp_layer([tensor("y", [1, 64, 224, 224])], tensor("w", [1, 64, 224, 224]), op="relu")
    shared = orin_latency.estimate([big, pool_layer("y", "z", hw=224), add], params=NO_COMPUTE)
    assert shared["layers"][1]["fused_into"] is None


def test_concat_is_free_and_bad_input_is_an_error():
    a, b, c = tensor("a", [1, 32, 8, 8]), tensor("b", [1, 32, 8, 8]), tensor("c", [1, 64, 8, 8])
    concat = {"index": 0, "name": "cat", "op": "concat", "precision": "int8", "inputs": [a, b], "outputs": [c],
              "params": {}, "fused": [], "weight_bytes": 0, "macs": 0, "input_bytes": 4096, "output_bytes": 4096}
    assert orin_latency.estimate([concat])["total_ms"] == 0.0
    with pytest.raises(ValueError, match="no layers"):
        orin_latency.estimate([])
    with pytest.raises(ValueError, match="missing key 'outputs'"):
        orin_latency.estimate([{"op": "conv", "precision": "int8", "inputs": []}])
    with pytest.raises(ValueError, match="precision"):
        orin_latency.estimate([conv_layer()], precision="int4")
    with pytest.raises(ValueError, match="unknown parameter"):
        orin_latency.estimate([conv_layer()], params={"mac_count": 1})
    with pytest.raises(ValueError, match="dlas"):
        orin_latency.estimate([conv_layer()], dlas=3)


def test_clocks_derived_from_published_tops():
    # 105 sparse TOPS = 2 DLAs x 2 (sparsity) x 2 ops x 8,192 MACs x f
    assert orin_published.agx_orin_dla_clock_mhz("MAXN") == pytest.approx(105e12 / (8 * 8192) / 1e6)
    assert orin_published.agx_orin_dla_clock_mhz("15W") == pytest.approx(40e12 / (8 * 8192) / 1e6)
    assert orin_latency.CONSTANTS["clock_mhz"] == pytest.approx(1602.17, abs=0.01)


# --- layers from ONNX ----------------------------------------------------------------------------------

def residual_net():
    g = G(seed=0)
    x = g.input("x", [2, 16, 8, 8])
    a = g.node("Relu", [g.bn(g.conv(x, 16, 32, bias=False), 32)])
    b = g.node("Relu", [g.node("Add", [g.conv(a, 32, 32), a])])
    p = g.node("MaxPool", [b], kernel_shape=[2, 2], strides=[2, 2])
    f = g.node("Flatten", [g.node("GlobalAveragePool", [p])])
    return g.model([g.node("Gemm", [f, g.weight(10, 32), g.weight(10)], transB=1)])


def test_onnx_layers_fuse_the_sdp_chain_and_count_macs():
    layers = onnx_layers.layers_from_onnx(residual_net())
    assert [l["op"] for l in layers] == ["conv", "conv", "pool", "pool", "conv"]
    first, second = layers[0], layers[1]
    assert first["fused"] == ["batchnorm", "relu"]
    assert first["macs"] == 2 * 32 * 8 * 8 * 16 * 9
    assert second["fused"] == ["bias", "add", "relu"]  # the residual Add reads the first conv's output
    assert [t["name"] for t in second["inputs"]] == [first["outputs"][0]["name"]] * 2
    assert layers[4]["macs"] == 2 * 10 * 32  # Gemm as a 1x1 conv over the flattened features
    assert layers[4]["weight_bytes"] == 10 * 32 + 4 * 10
    assert layers[3]["params"]["kernel"] == [4, 4]  # global pool over the 4x4 map
    assert all(l["precision"] == "int8" for l in layers)
    r = orin_latency.estimate(layers)
    assert r["batch"] == 2 and len(r["layers"]) == 5


def test_onnx_layer_precisions_add_reformats():
    model = residual_net()
    gemm = [n.name for n in model.graph.node if n.op_type == "Gemm"][0]
    layers = onnx_layers.layers_from_onnx(model, layer_precisions={gemm: "fp16"})
    assert [l["op"] for l in layers][-2:] == ["convert", "conv"]
    assert layers[-1]["precision"] == "fp16" and layers[-1]["inputs"][0]["dtype"] == "fp16"
    assert layers[-2]["inputs"][0]["dtype"] == "int8"
    # trtexec's patterns, read as the builder reads them: "*" every layer, an exact name first.
    every = onnx_layers.layers_from_onnx(model, layer_precisions={"*": "fp16", gemm: "int8"})
    assert all(l["precision"] == "fp16" for l in every[:-1] if l["op"] != "convert") and every[-1]["precision"] == "int8"
    assert [l["precision"] for l in onnx_layers.layers_from_onnx(model, layer_precisions={gemm[:2] + "*": "fp16"})][-1] == "fp16"


def test_onnx_unsupported_op_is_named():
    g = G()
    x = g.input("x", [1, 4, 8, 8])
    model = g.model([g.node("TopK", [g.conv(x, 4, 4), g.const(np.array([2], np.int64))], n_out=2)[0]])
    with pytest.raises(ValueError, match="TopK"):
        onnx_layers.layers_from_onnx(model)


# --- the published figures -----------------------------------------------------------------------------

def _published_errors(keys):
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import orin_latency_calibration as cal
    cache = {}
    out = {}
    for key in keys:
        fig = orin_published.BY_KEY[key]
        value, _ = cal.predict(fig, cal.figure_layers(fig, cache))
        out[key] = cal.error_pct(value, fig.value)
    return out


def test_held_out_resnet50_mobilenet_yolo_figures_within_20_percent():
    keys = [f.key for f in orin_published.usable() if f.key not in orin_published.FIT_KEYS
            and f.net in ("resnet50", "ssd_mobilenet_v1", "yolov5s")]
    assert len(keys) == 12
    errors = _published_errors(keys)
    assert all(abs(e) <= 20.0 for e in errors.values()), errors


@pytest.mark.zoo
def test_every_published_figure_as_documented():
    """The whole table of docs/PROFILING.md: the held-out figures outside 20 % are the four named there."""
    errors = _published_errors([f.key for f in orin_published.usable()])
    misses = {k for k, e in errors.items() if abs(e) > 20.0 and k not in orin_published.FIT_KEYS}
    assert misses == {"ssd_resnet34/MAXN/sparse", "ssd_resnet34/50W/sparse", "ssd_resnet34/30W/sparse",
                      "ssd_resnet34/15W/sparse"}, errors
    assert all(abs(errors[k]) <= 11.0 for k in orin_published.FIT_KEYS), errors


# --- command line --------------------------------------------------------------------------------------

def run_cli(*args):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    return subprocess.run([sys.executable, "-m", "softdla.orin_latency", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_cli_json_of_a_loadable_and_an_onnx_model(tmp_path):
    loadable = os.path.join(ROOT, "examples", "models", "bars.loadable")
    r = run_cli(loadable, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    import softdla
    assert len(doc["layers"]) == len(softdla.inspect(loadable)["layer_info"])
    assert doc["total_ms"] == pytest.approx(sum(l["ms"] for l in doc["layers"]))
    assert {l["bound"] for l in doc["layers"]} <= {"compute", "memory", "overhead"}
    model = tmp_path / "net.onnx"
    model.write_bytes(residual_net().SerializeToString())
    r = run_cli(str(model), "--json", "--clock-mhz", "1331", "--precision", "fp16")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["parameters"]["clock_mhz"] == 1331.0
    assert {l["precision"] for l in doc["layers"]} == {"fp16"}
    table = run_cli(str(model))
    assert table.returncode == 0 and "total" in table.stdout and "images/s" in table.stdout


def test_cli_errors(tmp_path):
    r = run_cli(str(tmp_path / "missing.onnx"))
    assert r.returncode == 2 and "error" in r.stderr
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"\x00\x01not a model")
    r = run_cli(str(bad))
    assert r.returncode == 1 and "error: bad.bin" in r.stderr
