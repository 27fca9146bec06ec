"""softdla.build / check / inspect: the ONNX -> DLA loadable builder from Python (docs/BUILDER.md)."""
import builtins
import os
import sys
import warnings

from ._builder_ext import BuildError
from ._builder_ext import build as _build
from ._builder_ext import check as _check
from ._builder_ext import inspect as _inspect

__all__ = ["BuildError", "BuildWarning", "build", "check", "inspect"]


class BuildWarning(UserWarning):
    """A build that went through, but not as its arguments may suggest (layers left in FP16 for want of an
    INT8 scale, a per-layer precision that did not apply): the builder's warning lines."""


def _read(model):
    if isinstance(model, (str, os.PathLike)):
        with open(model, "rb") as f:
            return f.read()
    if hasattr(model, "SerializeToString"):  # an onnx.ModelProto
        return model.SerializeToString()
    return bytes(model)


def _progress_bar(stage, done, total):
    width = 30
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\r{stage:<28} [{'#' * filled}{' ' * (width - filled)}] {done}/{total}")
    if done == total:
        sys.stderr.write("\n")


def _interactive_terminal():
    """A person is watching: Python in interactive mode (the REPL, `python -i`, IPython) with stderr on a
    terminal. A script is not, even when started from a terminal: its stderr often ends up in a log."""
    interactive = hasattr(sys, "ps1") or bool(sys.flags.interactive) or bool(getattr(builtins, "__IPYTHON__", False))
    isatty = getattr(sys.stderr, "isatty", None)
    return interactive and callable(isatty) and bool(isatty())


def _progress_callback(progress):
    """progress=None (default): a bar only in interactive Python on a terminal, never from scripts, in logs
    or in notebooks' captured output; True: always; False: never; a callable(stage, done, total): yours."""
    if progress is None:
        progress = _interactive_terminal()
    if progress is True:
        return _progress_bar
    return progress or None


def _shape_lists(shapes):
    """{input: dims}: dims a sequence of ints, or trtexec's text ("1x3x224x224")."""
    out = {}
    for name, dims in (shapes or {}).items():
        text = dims if isinstance(dims, str) else None
        try:
            out[name] = [int(d) for d in (text.split("x") if text is not None else dims)]
        except (TypeError, ValueError):
            raise BuildError(f"shapes: input '{name}' has {dims!r}; give a list of ints such as [1, 3, 224, 224] "
                             "or trtexec's text '1x3x224x224'") from None
    return out


def build(model, *, fp16=False, int8=False, fp32_reference=False, calib_data=None, calib_cache=None,
          write_calib_cache=None, calibrator="auto", input_formats="", output_formats="", layer_precisions=None,
          precision_constraints=None, target="orin", shapes=None, save=None, progress=None,
          expose_intermediates=False) -> bytes:
    """Builds an ONNX model (path, bytes or onnx.ModelProto) into a DLA standalone loadable and returns
    its bytes (also written to `save` if given). Arguments mirror `softdla build` / trtexec:
    input_formats="int8:dla_hwc4", layer_precisions={"conv1": "fp16"}, shapes={"x": [1, 3, 224, 224]},
    precision_constraints="none" | "prefer" | "obey" (anything else raises BuildError); left out, "prefer"
    where layer_precisions are given (so they apply), else "none". (The CLI follows trtexec: there
    --layerPrecisions without --precisionConstraints=prefer|obey has no effect, with a warning.)
    calib_cache: a TensorRT calibration cache to read, or, as `softdla build --calib=FILE`, where to write
    the cache this build calibrates (with calib_data) when the file does not exist yet; write_calib_cache
    writes one wherever it is.
    progress: None (default) draws a bar on stderr only in interactive Python on a terminal; True always,
    False never, or a callable(stage, done, total).
    Raises BuildError (a ValueError) naming the node and rule when the model cannot be built."""
    opts = {"fp16": "1" if fp16 else "0", "int8": "1" if int8 else "0", "fp32_reference": "1" if fp32_reference else "0",
            "target": target, "input_formats": input_formats, "output_formats": output_formats,
            "calibrator": calibrator,
            "precision_constraints": precision_constraints or ("prefer" if layer_precisions else "none"),
            "expose_intermediates": "1" if expose_intermediates else "0"}
    if calib_cache and not write_calib_cache and not os.path.exists(calib_cache):
        write_calib_cache = calib_cache  # as the CLI's --calib: calibrated now, kept for the next build
    for key, value in (("calib_data", calib_data), ("calib_cache", calib_cache), ("write_calib_cache", write_calib_cache)):
        if value:
            opts[key] = os.fspath(value)
    loadable, _layers, _scales, notes = _build(_read(model), opts, dict(layer_precisions or {}),
                                               _shape_lists(shapes), _progress_callback(progress))
    for note in notes:  # the build went through, but not as the arguments may suggest
        warnings.warn(note, BuildWarning, stacklevel=2)
    if save:
        with open(save, "wb") as f:
            f.write(loadable)
    return loadable


def check(model, *, target="orin", shapes=None):
    """Every node with whether it runs on the DLA: a list of dicts {node, op, supported, reason}."""
    rows = _check(_read(model), target, _shape_lists(shapes))
    return [dict(node=n, op=o, supported=s, reason=r) for n, o, s, r in rows]


def inspect(loadable):
    """A loadable's (path or bytes) build info, I/O tensors and layers, as a dict. Its "layer_info" is a
    list with one dict per op in execution order: tensors, params, fused stages, precision, MACs and bytes
    (docs/PROFILING.md, "Layer information"); `softdla inspect --json` prints the same dict as JSON."""
    return _inspect(_read(loadable))
