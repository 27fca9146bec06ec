"""Hybrid mode end to end on one CUDA stream, nothing through the host between the steps:

    PyTorch preprocessing on the GPU (scale, quantize to int8, pack into the DLA's HWC4 layout)
      -> a cuDLA task (softdla's CUDA backend) on the same stream
      -> PyTorch postprocessing on the GPU (unpack CHW16 fp16, argmax)

The model is the bundled examples/models/bars.loadable (4 images of 16x16 bars -> 4 classes). The
cuDLA calls are NVIDIA's API: softdla.cudla, or NVIDIA's own cuda.bindings.cudla over softdla's
libcudla.so.1 where softdla's extension is not built for this Python. Needs a CUDA GPU and PyTorch.

    python examples/python/hybrid_pipeline.py [--build-dir build]
"""
import argparse
import ctypes
import os
import sys

import numpy as np
import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


sys.path.insert(0, os.path.join(ROOT, "python"))
from softdla import formats  # noqa: E402  (pure Python: the DLA layouts)


def load_cudla(build_dir):
    try:
        from softdla import cudla
        return cudla
    except ImportError:
        ctypes.CDLL(os.path.join(build_dir, "libcudla.so.1"), mode=os.RTLD_GLOBAL)
        from cuda.bindings import cudla
        return cudla


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    cudla = load_cudla(args.build_dir)
    loadable = open(os.path.join(ROOT, "examples", "models", "bars.loadable"), "rb").read()
    images = torch.from_numpy(np.load(os.path.join(ROOT, "examples", "models", "bars_images.npy")))  # 4x1x16x16

    dev = cudla.create_device(0, cudla.Mode.CUDA_DLA)
    module = cudla.module_load_from_memory(dev, loadable, len(loadable), cudla.ModuleLoadFlags.MODULE_DEFAULT)
    (ind,) = cudla.module_get_attributes(module, cudla.ModuleAttributeType.INPUT_TENSOR_DESCRIPTORS)
    (outd,) = cudla.module_get_attributes(module, cudla.ModuleAttributeType.OUTPUT_TENSOR_DESCRIPTORS)
    stream = torch.cuda.Stream()
    # Device buffers owned by PyTorch, registered with cuDLA (32-byte aligned: the caching allocator's
    # blocks are 512-byte aligned).
    dla_in = torch.zeros(ind.size_, dtype=torch.uint8, device="cuda")
    dla_out = torch.zeros(outd.size_, dtype=torch.uint8, device="cuda")
    in_reg = cudla.mem_register(dev, dla_in.data_ptr(), ind.size_, 0)
    out_reg = cudla.mem_register(dev, dla_out.data_ptr(), outd.size_, 0)
    task = cudla.Task()
    task.module_handle = module
    task.input_tensor = [in_reg]
    task.output_tensor = [out_reg]

    n, c, h, w = int(ind.n), int(ind.c), int(ind.h), int(ind.w)
    size, s0, line, _, batch, cpg = formats.layout((n, c, h, w), np.int8, formats.DLA_HWC4)
    assert size == ind.size_ and c <= cpg
    with torch.cuda.stream(stream):
        # 1. preprocessing: [0, 1] floats -> int8 with the input scale (1/127), then DLA HWC4: pixels
        #    s0 bytes apart (channels interleaved inside), rows `line` bytes, images `batch` bytes apart.
        x = images.to("cuda", non_blocking=True)
        q = torch.clamp(torch.round(x * 127.0), -128, 127).to(torch.int8)
        packed = dla_in.view(torch.int8).as_strided((n, h, w, c), (batch, line, s0, 1))
        packed.copy_(q.permute(0, 2, 3, 1))
        # 2. the DLA task, ordered after the copy above on the same stream
        cudla.submit_task(dev, task.ptr, 1, stream.cuda_stream, 0)
        # 3. postprocessing: CHW16 fp16 (channel c at byte 2c of each 32-byte pixel) -> argmax
        k = int(outd.c)
        out_batch = formats.layout((int(outd.n), k, 1, 1), np.float16, formats.CHW16)[4]
        probs = dla_out.view(torch.float16).as_strided((int(outd.n), k), (out_batch // 2, 1)).float()
        classes = probs.argmax(dim=1)
    stream.synchronize()
    status = cudla.get_last_error(dev)
    print("probabilities:\n", probs.cpu().numpy().round(3))
    print("classes:", classes.tolist(), "(expected [0, 1, 2, 3])", "cudla status", int(status))
    for r in (in_reg, out_reg):
        cudla.mem_unregister(dev, r)
    cudla.module_unload(module, 0)
    cudla.destroy_device(dev)
    if classes.tolist() != [0, 1, 2, 3] or int(status) != 0:
        raise SystemExit("unexpected result")


if __name__ == "__main__":
    main()
