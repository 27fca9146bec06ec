"""The nine-step cuDLA inference lifecycle of NVIDIA's "native DLA inference in Python" post, written
with softdla.cudla (the same code runs with `from cuda.bindings import cudla` on a Jetson, over
NVIDIA's library). It classifies the bundled digits test images with the INT8 loadable.

    PYTHONPATH=python .venv/bin/python examples/python/nine_steps.py

Off a GPU, buffers are host memory and tasks go on stream 0, which runs them synchronously.
"""
import os
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))

import softdla  # noqa: E402
from softdla import cudla, formats  # noqa: E402

MODELS = os.path.join(ROOT, "examples", "models")


def aligned(nbytes):
    """Host memory with the DLA's 32-byte alignment."""
    raw = np.zeros(nbytes + 64, np.uint8)
    offset = (-raw.ctypes.data) % 64
    return raw[offset:offset + nbytes]


def main():
    # The loadable: the bundled trained CNN, built to INT8 with its calibration images.
    loadable = softdla.build(os.path.join(MODELS, "digits.onnx"), int8=True, fp16=True,
                             calib_data=os.path.join(MODELS, "digits_calib"), output_formats="fp16:chw16",
                             progress=False)
    images = np.load(os.path.join(MODELS, "digits_test_images.npy")).astype(np.float32)
    labels = np.load(os.path.join(MODELS, "digits_test_labels.npy"))

    # 1. CUDA initialisation: with a GPU this is cuInit/cudaSetDevice and a stream; here stream 0.
    stream = 0
    # 2. Probe and create the DLA device (hybrid mode).
    print(f"cuDLA {cudla.get_version()}, {cudla.device_get_count()} DLA core(s)")
    dev = cudla.create_device(0, cudla.Mode.CUDA_DLA)
    module, registered = None, []
    try:
        # 3. Load the loadable from memory.
        module = cudla.module_load_from_memory(dev, loadable, len(loadable), cudla.ModuleLoadFlags.MODULE_DEFAULT)
        # 4. Introspect the I/O tensors.
        (din,) = cudla.module_get_attributes(module, cudla.ModuleAttributeType.INPUT_TENSOR_DESCRIPTORS)
        (dout,) = cudla.module_get_attributes(module, cudla.ModuleAttributeType.OUTPUT_TENSOR_DESCRIPTORS)
        in_type, in_fmt, target = formats.from_descriptor(din)
        out_type, out_fmt, _ = formats.from_descriptor(dout)
        in_scale = softdla.inspect(loadable)["inputs"][0]["scale"]
        print(f"input  {din.name}: {din.n}x{din.c}x{din.h}x{din.w} {in_type.name}, {din.size_} bytes, scale {in_scale:.6f}")
        print(f"output {dout.name}: {dout.n}x{dout.c}x{dout.h}x{dout.w} {out_type.name}, {dout.size_} bytes")
        # 5. Allocate and register the buffers; tasks take the registered (DLA-side) pointers.
        in_buf, out_buf = aligned(din.size_), aligned(dout.size_)
        reg_in = cudla.mem_register(dev, in_buf.ctypes.data, din.size_, 0)
        registered.append(reg_in)
        reg_out = cudla.mem_register(dev, out_buf.ctypes.data, dout.size_, 0)
        registered.append(reg_out)
        task = cudla.Task()
        task.module_handle = module
        task.input_tensor = [reg_in]
        task.output_tensor = [reg_out]
        predictions = []
        for image in images:
            # 6. Prepare the input: quantize to int8 and lay it out in the input's DLA format.
            q = formats.quantize(image.reshape(1, 1, 8, 8), in_scale)
            in_buf[:] = np.frombuffer(formats.pack(q, in_fmt, target), np.uint8)
            # 7. Submit the task on the stream.
            cudla.submit_task(dev, task.ptr, 1, stream, 0)
            # 8. Synchronise (stream 0 ran it already), check for DLA errors, read the output.
            status = cudla.get_last_error(dev)
            if status != 0:
                raise cudla.CudlaError(status)
            probs = formats.unpack(out_buf.tobytes(), (1, 10, 1, 1), out_type, out_fmt).reshape(10)
            predictions.append(int(probs.argmax()))
        for k in range(8):
            print(f"image {k}: predicted {predictions[k]}, label {labels[k]}")
        accuracy = np.mean(np.array(predictions) == labels) * 100
        print(f"top-1 accuracy on {len(labels)} test images: {accuracy:.2f}%")
        return accuracy
    finally:
        # 9. Tear down in reverse order.
        for ptr in registered:
            cudla.mem_unregister(dev, ptr)
        if module:
            cudla.module_unload(module, 0)
        cudla.destroy_device(dev)


if __name__ == "__main__":
    main()
