"""Trains the bundled example CNN on scikit-learn's digits (8x8 grayscale, 10 classes) with plain NumPy
and writes examples/models/digits.onnx, its test split and calibration samples.

    python tools/train_digits.py            # about a minute on 2 cores; deterministic (seed 0)

Network (input: pixel values 0..16, batch 1):
  Div 16 -> Conv 3x3 1->16 + BN + ReLU -> Conv 3x3 16->32 stride 2 + ReLU -> MaxPool 2x2
  -> Flatten -> Gemm 128->10 -> Softmax
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

OUT = os.path.join(os.path.dirname(__file__), "..", "examples", "models")


def im2col(x, k, stride, pad):
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    cols = np.empty((n, c, k, k, oh, ow), x.dtype)
    for i in range(k):
        for j in range(k):
            cols[:, :, i, j] = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
    return cols.reshape(n, c * k * k, oh * ow), oh, ow


def col2im(cols, shape, k, stride, pad, oh, ow):
    n, c, h, w = shape
    cols = cols.reshape(n, c, k, k, oh, ow)
    xp = np.zeros((n, c, h + 2 * pad, w + 2 * pad), cols.dtype)
    for i in range(k):
        for j in range(k):
            xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride] += cols[:, :, i, j]
    return xp[:, :, pad:pad + h, pad:pad + w]


class Conv:
    def __init__(self, rng, cin, cout, k, stride, pad):
        self.w = rng.standard_normal((cout, cin * k * k)) * np.sqrt(2 / (cin * k * k))
        self.b = np.zeros(cout)
        self.k, self.stride, self.pad = k, stride, pad

    def forward(self, x):
        self.shape = x.shape
        self.cols, oh, ow = im2col(x, self.k, self.stride, self.pad)
        self.oh, self.ow = oh, ow
        y = np.einsum("ok,nkp->nop", self.w, self.cols) + self.b[None, :, None]
        return y.reshape(x.shape[0], -1, oh, ow)

    def backward(self, g):
        g = g.reshape(g.shape[0], g.shape[1], -1)
        self.gw = np.einsum("nop,nkp->ok", g, self.cols)
        self.gb = g.sum(axis=(0, 2))
        gcols = np.einsum("ok,nop->nkp", self.w, g)
        return col2im(gcols, self.shape, self.k, self.stride, self.pad, self.oh, self.ow)


def main():
    digits = load_digits()
    x = digits.images.astype(np.float32)[:, None]  # 0..16
    y = digits.target
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)
    rng = np.random.default_rng(0)
    c1, c2 = Conv(rng, 1, 16, 3, 1, 1), Conv(rng, 16, 32, 3, 2, 1)
    fc_w = rng.standard_normal((10, 128)) * np.sqrt(1 / 128)
    fc_b = np.zeros(10)
    params = [c1.w, c1.b, c2.w, c2.b, fc_w, fc_b]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    lr, t = 2e-3, 0
    for epoch in range(25):
        order = rng.permutation(len(x_train))
        for s in range(0, len(order), 32):
            idx = order[s:s + 32]
            xb = x_train[idx] / 16.0
            a1 = c1.forward(xb)
            r1 = np.maximum(a1, 0)
            a2 = c2.forward(r1)
            r2 = np.maximum(a2, 0)  # [n, 32, 4, 4]
            n = len(idx)
            p = r2.reshape(n, 32, 2, 2, 2, 2).max(axis=(3, 5))  # 2x2 max pool -> [n, 32, 2, 2]
            mask = r2.reshape(n, 32, 2, 2, 2, 2) == p[:, :, :, None, :, None]
            flat = p.reshape(n, -1)
            logits = flat @ fc_w.T + fc_b
            e = np.exp(logits - logits.max(1, keepdims=True))
            prob = e / e.sum(1, keepdims=True)
            gl = prob.copy()
            gl[np.arange(n), y_train[idx]] -= 1
            gl /= n
            g_fc_w, g_fc_b = gl.T @ flat, gl.sum(0)
            gp = (gl @ fc_w).reshape(p.shape)
            gr2 = (mask * gp[:, :, :, None, :, None]).reshape(r2.shape)
            gr1 = c2.backward(gr2 * (a2 > 0))
            c1.backward(gr1 * (a1 > 0))
            grads = [c1.gw, c1.gb, c2.gw, c2.gb, g_fc_w, g_fc_b]
            t += 1
            for i, (pp, gg) in enumerate(zip(params, grads)):
                m[i] = 0.9 * m[i] + 0.1 * gg
                v[i] = 0.999 * v[i] + 0.001 * gg * gg
                pp -= lr * (m[i] / (1 - 0.9 ** t)) / (np.sqrt(v[i] / (1 - 0.999 ** t)) + 1e-8)

    def predict(xs):
        r1 = np.maximum(c1.forward(xs / 16.0), 0)
        r2 = np.maximum(c2.forward(r1), 0)
        p = r2.reshape(len(xs), 32, 2, 2, 2, 2).max(axis=(3, 5))
        return (p.reshape(len(xs), -1) @ fc_w.T + fc_b).argmax(1)

    acc = (predict(x_test) == y_test).mean()
    print(f"numpy test accuracy: {acc * 100:.2f}% ({len(y_test)} images)")

    # Export. BN after conv1 is the identity here (gamma 1, beta 0, mean 0, var 1 - eps) so the model
    # also exercises BN folding without changing what was trained.
    f32 = np.float32
    inits = [
        numpy_helper.from_array(np.array(16.0, f32), "sixteen"),
        numpy_helper.from_array(c1.w.reshape(16, 1, 3, 3).astype(f32), "conv1.weight"),
        numpy_helper.from_array(c1.b.astype(f32), "conv1.bias"),
        numpy_helper.from_array(np.ones(16, f32), "bn1.gamma"), numpy_helper.from_array(np.zeros(16, f32), "bn1.beta"),
        numpy_helper.from_array(np.zeros(16, f32), "bn1.mean"),
        numpy_helper.from_array(np.full(16, 1 - 1e-5, f32), "bn1.var"),
        numpy_helper.from_array(c2.w.reshape(32, 16, 3, 3).astype(f32), "conv2.weight"),
        numpy_helper.from_array(c2.b.astype(f32), "conv2.bias"),
        numpy_helper.from_array(fc_w.astype(f32), "fc.weight"), numpy_helper.from_array(fc_b.astype(f32), "fc.bias"),
    ]
    nodes = [
        helper.make_node("Div", ["pixels", "sixteen"], ["x"], name="normalize"),
        helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn1.gamma", "bn1.beta", "bn1.mean", "bn1.var"], ["b1"], name="bn1"),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "conv2.weight", "conv2.bias"], ["c2"], name="conv2", kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(nodes, "digits_cnn", [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, [1, 1, 8, 8])],
                              [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="softdla tools/train_digits.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(OUT, "digits.onnx"))
    np.save(os.path.join(OUT, "digits_test_images.npy"), x_test.astype(np.uint8))
    np.save(os.path.join(OUT, "digits_test_labels.npy"), y_test.astype(np.uint8))
    calib = os.path.join(OUT, "digits_calib")
    os.makedirs(calib, exist_ok=True)
    np.save(os.path.join(calib, "train_200.npy"), x_train[:200].astype(np.uint8))
    print("wrote digits.onnx, digits_test_images.npy, digits_test_labels.npy, digits_calib/train_200.npy")


if __name__ == "__main__":
    main()
