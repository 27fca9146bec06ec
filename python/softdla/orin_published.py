"""Published Orin DLA performance figures: the data the latency model (softdla.orin_latency) is calibrated
and checked against, with the conditions each was measured under. Source tags:
  [S8 README]  github.com/NVIDIA/Deep-Learning-Accelerator-SW, README.md ("Orin DLA Performance"): Jetson AGX
               Orin 64GB, JetPack 5.1.1, 2 DLAs, INT8, images/s, per power mode, dense and 2:4 sparse, with
               trtexec --int8 --memPoolSize=dlaSRAM:1 --inputIOFormats=int8:dla_hwc4
               --outputIOFormats=int8:chw32 (scripts/prepare_models/README.md); and its peak table: 2 DLAs,
               sparse INT8 TOPS per power mode.
  [S9]         github.com/NVIDIA-AI-IOT/cuDLA-samples, README.md ("Performance"): YOLOv5s 672x672 on ONE DLA of
               a DRIVE Orin-X (DLA 1331 MHz, EMC 3200 MHz, TRT 8.6, DLA 3.14), median trtexec GPU-compute
               time, int8:hwc4 in, fp16:chw16 out. The fp16 output needs the three Detect convs
               (/model.24/m.{0,1,2}/Conv) in FP16 (--layerPrecisions in data/model/build_dla_standalone_loadable.sh);
               with int8:chw32 out the whole net is INT8 ("about 2.4 ms").
  [S8 FAQ]     the same repository's FAQ/README.md: Orin's DLA has ~9x Xavier's INT8 compute but less FP16 conv
               compute (~2x slower than Xavier), 1 MiB of SRAM per core, and shares DRAM with the GPU and CPU.
  [S5]         github.com/NVIDIA/TensorRT include/NvInfer.h: MemoryPoolType::kDLA_MANAGED_SRAM (default 1 MiB).
  [S7]         TensorRT 8.x Developer Guide, "Working with DLA" (Orin's FP16 convolution slower than Xavier's).
  [S10]        github.com/NVIDIA-AI-IOT/jetson_benchmarks (Xavier NX sample output).
  [S11]        NVIDIA technical blog, "Deploying YOLOv5 on NVIDIA Jetson Orin with cuDLA".

Each Figure says what was measured (model, input, batch, precision, sparse, DLA count, platform, power mode,
the DLA clock it ran at) and the value with its unit. `usable` is False for figures that cannot be compared
with a one-DLA latency prediction; `why` says why.
"""
from dataclasses import dataclass

# 2 DLAs, sparse INT8 peak TOPS of a Jetson AGX Orin 64GB per power mode [S8 README].
AGX_ORIN_2DLA_SPARSE_TOPS = {"MAXN": 105.0, "50W": 92.0, "30W": 90.0, "15W": 40.0}

# The DRIVE Orin-X DLA clock of the YOLOv5s figures [S9].
DRIVE_ORIN_DLA_MHZ = 1331.0

# INT8 multiply-accumulates per cycle of one Orin DLA core. 105 sparse TOPS for 2 DLAs at MAXN is
# 2 DLAs x 2 (2:4 sparsity doubles the rate) x 2 ops per MAC x MACs x clock. NVDLA's arrays are powers of two
# (nv_full: 64 x 32 = 2,048 INT8 MACs); 8,192 (4 x nv_full) gives a clock of 1.60 GHz, and [S8 README]'s note
# that DRIVE Orin's DLA TOPS equal the AGX 30 W / 50 W modes (90-92 TOPS) checks it: 1331 MHz x 8,192 x 8 =
# 87 TOPS. 4,096 would need 3.2 GHz and 16,384 0.8 GHz, neither near 1331 MHz.
ORIN_INT8_MACS_PER_CYCLE = 8192


def agx_orin_dla_clock_mhz(power_mode):
    """The DLA clock of a Jetson AGX Orin 64GB power mode, from its published 2-DLA sparse TOPS: TOPS is
    proportional to the clock at a fixed array (MAXN: 1602 MHz, 50W: 1404, 30W: 1373, 15W: 610). The TOPS are
    rounded to whole numbers, so the clocks are good to +-0.5 TOPS (0.5 % at MAXN, 1.3 % at 15 W)."""
    tops = AGX_ORIN_2DLA_SPARSE_TOPS[power_mode]
    return tops * 1e12 / (2 * 2 * 2 * ORIN_INT8_MACS_PER_CYCLE) / 1e6


@dataclass(frozen=True)
class Figure:
    key: str                 # a short unique id, e.g. "resnet50/MAXN"
    model: str               # network name as the source gives it
    net: str                 # the generator in tests/python/sdla_testkit/orin_nets.py that rebuilds it
    input_hw: tuple          # (H, W) of the input
    batch: int
    precision: str           # "int8" (all published DLA figures are INT8)
    sparse: bool             # 2:4 structured sparsity (--sparsity=force)
    dlas: int                # how many DLA cores the figure covers (img/s of 2 DLAs = 2 x one DLA)
    platform: str
    power_mode: str          # MAXN / 50W / 30W / 15W (AGX Orin) or "DRIVE"
    dla_clock_mhz: float
    value: float
    unit: str                # "img/s" (throughput of all `dlas` cores) or "ms" (latency of one batch)
    source: str              # source tag (module docstring)
    note: str = ""
    fp16_layers: tuple = ()  # ONNX node names that run in FP16 in the measured build
    usable: bool = True
    why: str = ""            # why a figure is not usable


_S8_NETS = [
    # model, net generator, (H, W), batch, dense figures MAXN/50W/30W/15W, sparse figures or None
    ("RetinaNet ResNeXt-50", "retinanet_resnext50", (800, 800), 1, (78, 72, 71, 36), (102, 96, 95, 51)),
    ("ResNet-34 backbone", "resnet34_backbone", (768, 1280), 1, (285, 260, 255, 121), (384, 360, 354, 176)),
    ("RetinaNet ResNet-34", "retinanet_resnet34", (768, 1280), 1, (108, 98, 96, 45), (143, 133, 131, 66)),
    ("SSD-ResNet-34", "ssd_resnet34", (1200, 1200), 1, (83, 76, 74, 36), (103, 97, 95, 49)),
    ("ResNet-50", "resnet50", (224, 224), 2, (2037, 1948, 1928, 1072), None),
    ("SSD-MobileNetV1", "ssd_mobilenet_v1", (300, 300), 2, (2664, 2506, 2472, 1313), None),
]

# The YOLOv5s Detect convs that the fp16:chw16-output build runs in FP16 [S9].
YOLOV5_FP16_HEAD = ("/model.24/m.0/Conv", "/model.24/m.1/Conv", "/model.24/m.2/Conv")


def _figures():
    out = []
    for model, net, hw, batch, dense, sparse in _S8_NETS:
        for kind, values in (("dense", dense), ("sparse", sparse)):
            if values is None:
                continue
            for mode, v in zip(("MAXN", "50W", "30W", "15W"), values):
                out.append(Figure(
                    key=f"{net}/{mode}" + ("/sparse" if kind == "sparse" else ""), model=model, net=net,
                    input_hw=hw, batch=batch, precision="int8", sparse=kind == "sparse", dlas=2,
                    platform="Jetson AGX Orin 64GB, JetPack 5.1.1", power_mode=mode,
                    dla_clock_mhz=agx_orin_dla_clock_mhz(mode), value=float(v), unit="img/s", source="[S8 README]",
                    note="int8:dla_hwc4 in, int8:chw32 out, dlaSRAM 1 MiB"))
    for batch, ms in ((1, 3.82), (2, 7.68), (4, 15.17), (8, 30.92), (16, 62.54)):
        out.append(Figure(
            key=f"yolov5s/bs{batch}/fp16-head", model="YOLOv5s", net="yolov5s", input_hw=(672, 672), batch=batch,
            precision="int8", sparse=False, dlas=1, platform="DRIVE Orin-X, TRT 8.6, DLA 3.14", power_mode="DRIVE",
            dla_clock_mhz=DRIVE_ORIN_DLA_MHZ, value=ms, unit="ms", source="[S9]",
            note="int8:hwc4 in, fp16:chw16 out: the 3 Detect convs in FP16", fp16_layers=YOLOV5_FP16_HEAD))
    out.append(Figure(
        key="yolov5s/bs1/int8", model="YOLOv5s", net="yolov5s", input_hw=(672, 672), batch=1, precision="int8",
        sparse=False, dlas=1, platform="DRIVE Orin-X, TRT 8.6, DLA 3.14", power_mode="DRIVE",
        dla_clock_mhz=DRIVE_ORIN_DLA_MHZ, value=2.4, unit="ms", source="[S9]",
        note="int8:hwc4 in, int8:chw32 out (all INT8); 'about 2.4 ms'"))
    # Published, but not comparable with a one-DLA latency:
    out.append(Figure(
        key="yolov5s/bs1/blog", model="YOLOv5s", net="yolov5s", input_hw=(672, 672), batch=1, precision="int8",
        sparse=False, dlas=1, platform="Orin (blog)", power_mode="?", dla_clock_mhz=0.0, value=2.5, unit="ms",
        source="[S11]", note="'>400 FPS on a single Orin DLA'", usable=False,
        why="a lower bound on FPS with no clock or batch; the 2.4 ms [S9] figure covers it"))
    out.append(Figure(
        key="yolov5s/bs1/fp16-head-v2", model="YOLOv5s", net="yolov5s", input_hw=(672, 672), batch=1,
        precision="int8", sparse=False, dlas=1, platform="DRIVE Orin-X", power_mode="DRIVE",
        dla_clock_mhz=DRIVE_ORIN_DLA_MHZ, value=4.46, unit="ms", source="[S9][S11]",
        note="last 4 head layers in FP16, '4.0 ms -> 4.46 ms'", usable=False,
        why="its 4.0 ms baseline disagrees with the 3.82 ms of the same build in the [S9] table"))
    out.append(Figure(
        key="xavier-nx/jetson_benchmarks", model="ResNet-50 etc.", net="", input_hw=(224, 224), batch=0,
        precision="int8", sparse=False, dlas=2, platform="Xavier NX", power_mode="?", dla_clock_mhz=0.0,
        value=824.02, unit="img/s", source="[S10]", usable=False,
        why="Xavier (DLA 1.0), and GPU + 2 DLAs combined"))
    return tuple(out)


FIGURES = _figures()
BY_KEY = {f.key: f for f in FIGURES}
assert len(BY_KEY) == len(FIGURES)

# The figures whose values the calibration fits (tools/orin_latency_calibration.py): one operating point per
# network of the [S8] table, dense at MAXN. Held out: the same networks at 50 W, 30 W and 15 W and with 2:4
# sparsity, and YOLOv5s on a DRIVE Orin (another network, platform, clock, batch sizes and FP16 layers).
FIT_KEYS = ("resnet50/MAXN", "ssd_mobilenet_v1/MAXN", "resnet34_backbone/MAXN", "retinanet_resnet34/MAXN",
            "ssd_resnet34/MAXN", "retinanet_resnext50/MAXN")
assert all(k in BY_KEY for k in FIT_KEYS)


def usable():
    return tuple(f for f in FIGURES if f.usable)


def predicted_value(fig, latency_ms):
    """The figure's quantity from a predicted one-DLA latency of one batch of `fig.batch` images: img/s of
    `fig.dlas` cores running side by side, or the latency itself."""
    if fig.unit == "img/s":
        return fig.dlas * fig.batch / (latency_ms / 1e3)
    if fig.unit == "ms":
        return latency_ms
    raise ValueError(f"unknown unit {fig.unit!r}")
