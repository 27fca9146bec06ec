#!/usr/bin/env bash
# `pip install .` into a fresh virtual environment, then use the installed package from outside the
# source tree: softdla.cudla over the wheel's own libcudla.so.1, build + run, and the softdla command.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=$(mktemp -d)/venv
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check .
cd "$(mktemp -d)"
"$venv/bin/python" - "$root" <<'PY'
import os, sys
import numpy as np
import softdla
from softdla import cudla
root = sys.argv[1]
assert softdla.__file__.startswith(sys.prefix), softdla.__file__
assert cudla.library_path().startswith(os.path.dirname(softdla.__file__)), cudla.library_path()
models = os.path.join(root, "examples", "models")
lb = softdla.build(os.path.join(models, "digits.onnx"), int8=True, fp16=True,
                   calib_data=os.path.join(models, "digits_calib"), progress=False)
images = np.load(os.path.join(models, "digits_test_images.npy")).astype(np.float32)
labels = np.load(os.path.join(models, "digits_test_labels.npy"))
with softdla.Device() as dev:
    m = dev.load(lb)
    pred = np.array([m.run([im[None]])["probabilities"].argmax() for im in images])
acc = (pred == labels).mean() * 100
print(f"installed wheel: {cudla.library_path()}, digits INT8 top-1 {acc:.2f}%")
assert acc > 97
PY
"$venv/bin/softdla" inspect "$root/examples/models/bars.loadable" | head -2
echo "wheel check passed"
