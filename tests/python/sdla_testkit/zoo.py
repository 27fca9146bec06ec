"""A model zoo written as ONNX graph generators (onnx.helper + NumPy, no torch): the torchvision and
ultralytics topologies as `torch.onnx.export` (opset 17, eval mode) writes them, with random weights that
give realistic activations, plus the bundled trained digits CNN.

Every generator is `fn(resolution, batch, seed) -> onnx.ModelProto` with one input `images` (NCHW float)
and the output `output` (the YOLO variant with one output per level names them `output`, `output1`,
`output2`).

Export patterns reproduced: BatchNormalization folded into the preceding Conv's weights and bias (what
the eval-mode export does); standalone BatchNormalization where the network has no Conv before it
(DenseNet's pre-activation BN); ReLU6 as Clip with min/max as constant inputs; SiLU as Sigmoid + Mul;
AdaptiveAvgPool2d(1) as GlobalAveragePool, AdaptiveAvgPool2d(k) as AveragePool(kernel = stride =
in/k) (the exporter's only form; at a resolution where in/k is not an integer the export fails, and the
generator then gives the classifier the features directly, as the model defined for that input size
would); `x.mean([2, 3])` as ReduceMean(keepdims=0); torch.flatten as Flatten; nn.Linear as Gemm(transB=1);
torch.cat as Concat (DenseNet's first dense layer with one input); chunk as Split with constant sizes;
the ShuffleNet channel shuffle as Reshape (rank 5) - Transpose - Reshape; nn.Upsample(nearest) as
Resize(X, roi = empty, scales) asymmetric/floor. Constants are initializers (the exporter's constant
folding); node names follow the exporter's `/module/path/Op` scheme.

Weights (`_make`): He-initialised kernels, then every BatchNormalization's statistics are estimated on
smooth synthetic images (`smooth_images`) - in one ONNX Runtime pass in which every BN normalizes with its
batch statistics, which is the same as estimating them one by one in topological order, each BN seeing the
normalized outputs of the BNs before it - and folded into the Conv. Networks without BN (AlexNet, VGG,
SqueezeNet, the detector heads) get a temporary BN after each conv that is estimated and folded the same
way (a data-driven initialisation of weights and biases).

Random networks made this way naively are chaotic where trained ones are not (every conv+BN+ReLU layer
amplifies a relative error by about 1.2, so FP16 storage alone costs 1-8 % and ONNX Runtime's own INT8
reaches cosines of 0.4-0.8); four choices bring their error propagation closer to a trained network's:
kernels with half their energy in their mean (`Net.conv`), BNs that keep each channel's mean offset and
floor the variance of channels that are constant on the images (`CENTERING`, `estimate_bn_statistics`),
residual branches ending in smaller BN scales (`Net.res_gamma`), and a classifier that reads the features'
principal directions (`init_classifier`), its logits centred per class with standard deviation 3.
"""
import contextlib
import os
from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from .engine import ROOT
from .onnx_models import G

MODELS_DIR = os.path.join(ROOT, "examples", "models")


# ---------------------------------------------------------------------------------------------------
# Synthetic images
# ---------------------------------------------------------------------------------------------------

def smooth_images(n, resolution, seed, channels=3):
    """n smooth NCHW float32 images: noise with natural images' 1/f^a amplitude spectrum (a in 1-1.6), a
    linear gradient and a few flat shapes with soft edges, colours correlated across channels, then a
    per-image contrast, brightness and colour cast (as photos differ); mean 0 and standard deviation 1 over
    the set, as ImageNet-normalized inputs have."""
    rng = np.random.default_rng(seed)
    h = w = int(resolution)
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.rfftfreq(w)[None, :]
    f2 = fy * fy + fx * fx
    yy, xx = np.meshgrid(np.linspace(-1, 1, h), np.linspace(-1, 1, w), indexing="ij")
    out = np.empty((n, channels, h, w), np.float32)
    for i in range(n):
        img = np.zeros((channels, h, w))
        # noise with a natural image's 1/f amplitude spectrum (steeper for some images: smoother ones), a
        # luminance field and weaker colour fields
        filt = np.sqrt(np.maximum(f2, 1.0 / (h * w))) ** -rng.uniform(1.0, 1.6)
        filt[0, 0] = 0
        lum = np.fft.irfft2(np.fft.rfft2(rng.standard_normal((h, w))) * filt, s=(h, w))
        lum /= lum.std() + 1e-12
        for c in range(channels):
            col = np.fft.irfft2(np.fft.rfft2(rng.standard_normal((h, w))) * filt, s=(h, w))
            img[c] = lum + 0.4 * col / (col.std() + 1e-12)
        # gradient
        g = rng.standard_normal(2)
        img += (g[0] * yy + g[1] * xx)[None] * rng.uniform(0.3, 1.0) * rng.uniform(0.5, 1.5, (channels, 1, 1))
        # shapes: ellipses and rectangles with a soft edge
        for _ in range(rng.integers(1, 5)):
            cy, cx = rng.uniform(-1, 1, 2)
            ry, rx = rng.uniform(0.1, 0.6, 2)
            if rng.random() < 0.5:
                d = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 - 1
            else:
                d = np.maximum(np.abs(yy - cy) / ry, np.abs(xx - cx) / rx) - 1
            mask = 1 / (1 + np.exp(np.clip(d * rng.uniform(8, 40), -50, 50)))
            colour = rng.standard_normal(channels) * 0.5 + rng.standard_normal() * 1.5
            img += mask[None] * colour[:, None, None]
        img -= img.mean()
        img /= img.std() + 1e-12
        # per-image contrast, brightness and colour cast
        img = img * rng.uniform(0.5, 1.2) + rng.standard_normal() * 0.5 + rng.standard_normal((channels, 1, 1)) * 0.25
        out[i] = img
    # E[contrast^2] + var(brightness) + var(cast) = 0.763 + 0.25 + 0.0625: the set has standard deviation 1
    return out / np.float32(np.sqrt(1.0755))


# ---------------------------------------------------------------------------------------------------
# The graph builder
# ---------------------------------------------------------------------------------------------------

class Net(G):
    """G with exporter-style names (`/layer1.0/conv1/Conv`), conv+BN blocks that are folded after their
    statistics are estimated, and the usual torchvision building blocks."""

    def __init__(self, seed=0):
        super().__init__(seed)
        self.scopes = []
        self.used = Counter()
        self.keep_bn = set()   # standalone BatchNormalization nodes that stay in the exported graph
        self.classifier = None  # the final Gemm, whose logits are rescaled

    @contextlib.contextmanager
    def scope(self, name):
        self.scopes.append(str(name))
        try:
            yield
        finally:
            self.scopes.pop()

    def _unique(self, base):
        k = self.used[base]
        self.used[base] += 1
        return base if k == 0 else f"{base}_{k}"

    def node(self, op, inputs, n_out=1, **attrs):
        name = self._unique("/" + "/".join(self.scopes + [op]))
        outs = [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def param(self, suffix, array):
        return self.const(np.asarray(array), self._unique(".".join(self.scopes + [suffix])))

    def const(self, array, name=None):
        name = name or self._unique("/" + "/".join(self.scopes + ["Constant_output_0"]))
        return super().const(array, name)

    # --- layers -------------------------------------------------------------------------------------
    def conv(self, x, cin, cout, k=3, stride=1, pad=None, groups=1, bias=False, dilation=1):
        pad = (k // 2) * dilation if pad is None else pad
        fan_in = cin // groups * k * k
        w = self.rng.standard_normal((cout, cin // groups, k, k))
        if k > 1:
            # half of each kernel's energy in its mean (DC) component, as in trained networks, whose kernels
            # are smooth; white random kernels respond to smooth features less than to white noise and, after
            # normalization, amplify rounding errors
            dc = self.rng.standard_normal((cout, cin // groups, 1, 1))
            if cin // groups == 1:
                # depthwise: one input channel, so a kernel with a small mean would scale its channel's
                # smooth content down and the normalization would scale noise up: means of 0.5-1.5
                dc = np.sign(dc) * self.rng.uniform(0.5, 1.5, dc.shape)
            w = np.sqrt(0.5) * w + np.sqrt(0.5) * dc
        w = (w * np.sqrt(2.0 / fan_in)).astype(np.float32)
        ins = [x, self.param("weight", w)]
        if bias:
            ins.append(self.param("bias", np.zeros(cout, np.float32)))
        attrs = dict(dilations=[dilation, dilation], group=groups, kernel_shape=[k, k], pads=[pad] * 4,
                     strides=[stride, stride])
        return self.node("Conv", ins, **attrs)

    def bn(self, x, c, eps=1e-5, gamma=None, beta=None, keep=False):
        """A BatchNormalization with placeholder statistics (re-estimated later). keep=True: it stays a
        standalone node in the exported graph; otherwise it is folded into the conv before it."""
        g = gamma if gamma is not None else np.clip(1 + 0.25 * self.rng.standard_normal(c), 0.3, 2.0)
        b = beta if beta is not None else 0.2 * self.rng.standard_normal(c)
        ins = [x, self.param("bn.weight", np.broadcast_to(np.float32(g), (c,)).astype(np.float32)),
               self.param("bn.bias", np.broadcast_to(np.float32(b), (c,)).astype(np.float32)),
               self.param("bn.running_mean", np.zeros(c, np.float32)),
               self.param("bn.running_var", np.ones(c, np.float32))]
        y = self.node("BatchNormalization", ins, epsilon=eps, momentum=0.9)
        if keep:
            self.keep_bn.add(self.nodes[-1].name)
        return y

    def res_gamma(self, c):
        """BN scales of the last BN of a residual branch: smaller than elsewhere, as trained residual networks
        have them (and as zero-init-residual training starts them), so the identity path dominates."""
        return np.clip(0.35 * (1 + 0.25 * self.rng.standard_normal(c)), 0.05, 1.0)

    def act(self, x, kind):
        if kind is None:
            return x
        if kind == "relu":
            return self.node("Relu", [x])
        if kind == "relu6":
            return self.node("Clip", [x, self.const(np.float32(0.0)), self.const(np.float32(6.0))])
        if kind == "silu":
            return self.node("Mul", [x, self.node("Sigmoid", [x])])
        if kind == "sigmoid":
            return self.node("Sigmoid", [x])
        # HardSwish and HardSigmoid have no DLA layer; DLA users export them rewritten, as x * relu6(x + 3) / 6
        # and relu6(x + 3) / 6 (the builder's message for HardSwish says so).
        if kind == "hsigmoid":
            shifted = self.node("Add", [x, self.const(np.float32(3.0))])
            return self.node("Div", [self.act(shifted, "relu6"), self.const(np.float32(6.0))])
        if kind == "hswish":
            shifted = self.node("Add", [x, self.const(np.float32(3.0))])
            return self.node("Div", [self.node("Mul", [x, self.act(shifted, "relu6")]), self.const(np.float32(6.0))])
        raise ValueError(kind)

    def cbn(self, x, cin, cout, k=3, stride=1, pad=None, groups=1, act="relu", eps=1e-5, gamma=None, beta=None):
        """Conv (no bias) + BatchNormalization (folded at export) + activation."""
        return self.act(self.bn(self.conv(x, cin, cout, k, stride, pad, groups), cout, eps, gamma, beta), act)

    def conv_bias(self, x, cin, cout, k=3, stride=1, pad=None, groups=1, act=None, gamma=None, beta=None):
        """A conv with a real bias and no BN in the network: initialised through a temporary BN that is
        estimated and folded (so its output has a controlled range)."""
        return self.cbn(x, cin, cout, k, stride, pad, groups, act, gamma=gamma, beta=beta)

    def maxpool(self, x, k, s, p=0, ceil=False):
        return self.node("MaxPool", [x], ceil_mode=int(ceil), dilations=[1, 1], kernel_shape=[k, k], pads=[p] * 4,
                         strides=[s, s])

    def avgpool(self, x, k, s, p=0):
        return self.node("AveragePool", [x], ceil_mode=0, count_include_pad=1, kernel_shape=[k, k], pads=[p] * 4,
                         strides=[s, s])

    def gap(self, x):
        return self.node("GlobalAveragePool", [x])

    def flatten(self, x):
        return self.node("Flatten", [x], axis=1)

    def linear(self, x, cin, cout, final=False):
        w = (self.rng.standard_normal((cout, cin)) * np.sqrt(2.0 / cin)).astype(np.float32)
        y = self.node("Gemm", [x, self.param("weight", w), self.param("bias", np.zeros(cout, np.float32))],
                      alpha=1.0, beta=1.0, transB=1)
        if final:
            self.classifier = self.nodes[-1].name
        return y

    def concat(self, xs, axis=1):
        return self.node("Concat", list(xs), axis=axis)

    def split(self, x, sizes, axis=1):
        return self.node("Split", [x, self.const(np.array(sizes, np.int64))], n_out=len(sizes), axis=axis)

    def reshape(self, x, shape):
        return self.node("Reshape", [x, self.const(np.array(shape, np.int64))], allowzero=0)

    def resize_nearest(self, x, factor):
        return self.node("Resize", [x, self.const(np.array([], np.float32)),
                                    self.const(np.array([1, 1, factor, factor], np.float32))],
                         coordinate_transformation_mode="asymmetric", cubic_coeff_a=-0.75, mode="nearest",
                         nearest_mode="floor")

    def se(self, x, c, squeeze, act, gate="sigmoid"):
        """torchvision.ops.SqueezeExcitation: avgpool, fc1 (1x1 conv), act, fc2, the gate (sigmoid, or
        MobileNetV3's hard sigmoid), scale * input."""
        with self.scope("avgpool"):
            s = self.gap(x)
        with self.scope("fc1"):
            s = self.conv(s, c, squeeze, k=1, pad=0, bias=True)
        with self.scope("activation"):
            s = self.act(s, act)
        with self.scope("fc2"):
            s = self.conv(s, squeeze, c, k=1, pad=0, bias=True)
        # a gate of about 0.5-0.9, as trained SE blocks have
        bias = 1.0 if gate == "sigmoid" else 1.5
        self.inits[-1] = numpy_helper.from_array(np.full(c, bias, np.float32), self.inits[-1].name)
        with self.scope("scale_activation"):
            s = self.act(s, gate)
        return self.node("Mul", [s, x])

    def finish(self, outputs, opset=17):
        """The raw model (BNs with placeholder statistics, unfolded); graph outputs `output`, `output1`..."""
        outputs = outputs if isinstance(outputs, list) else [outputs]
        names = ["output"] + [f"output{i}" for i in range(1, len(outputs))]
        rename = dict(zip(outputs, names))
        for n in self.nodes:
            n.output[:] = [rename.get(o, o) for o in n.output]
            n.input[:] = [rename.get(i, i) for i in n.input]
        m = self.model(names, opset=opset)
        m.producer_name, m.producer_version = "pytorch", "2.5.0"
        return m


# ---------------------------------------------------------------------------------------------------
# BN statistics, folding, classifier scale
# ---------------------------------------------------------------------------------------------------

def _attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _session(model):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


# Random conv nets whose BNs subtract the full batch mean are chaotic: a ReLU output's mean is about a third
# of its energy, the mean subtraction discards it from the signal but not from a perturbation, so every
# conv+BN+ReLU layer amplifies a relative error by about 1.2 (FP16 storage alone then costs 2-8 % rel L2 on
# ResNet-50/GoogLeNet/RegNet, and INT8 cosines fall to 0.4-0.8 in ORT as well), where trained networks are
# robust to it. Subtracting only part of the mean keeps each channel's offset (as trained networks have:
# channels mostly off, channels mostly on) and brings the gain to about 1. The BNs are folded, so this is
# only a choice of initial weights and biases.
CENTERING = 0.0


def estimate_bn_statistics(model, images, centering=None):
    """Sets every BatchNormalization's mean and variance to the statistics of its input on `images`, each
    BN seeing the normalized outputs of the BNs before it: one ONNX Runtime pass in which every BN
    normalizes with its batch statistics (ReduceMean over N and the spatial axes) and exposes them.

    centering (default CENTERING): the fraction of each channel's batch mean the BN subtracts; its
    variance is then E[(x - centering * mean)^2]. 1 is the textbook estimate; see CENTERING."""
    alpha = CENTERING if centering is None else centering
    inferred = onnx.shape_inference.infer_shapes(model)
    ranks = {v.name: len(v.type.tensor_type.shape.dim) for v in
             list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)}
    inits = {i.name: i for i in model.graph.initializer}
    stats_model = onnx.ModelProto()
    stats_model.CopyFrom(model)
    g = stats_model.graph
    nodes, probes = [], []
    for n in model.graph.node:
        if n.op_type != "BatchNormalization":
            nodes.append(n)
            continue
        x, gamma, beta = n.input[0], n.input[1], n.input[2]
        r = ranks[x]
        axes = [0] + list(range(2, r))
        c = numpy_helper.to_array(inits[gamma]).size
        shape = [1, c] + [1] * (r - 2)
        p = n.name
        gm = numpy_helper.from_array(numpy_helper.to_array(inits[gamma]).reshape(shape), p + "/g")
        bt = numpy_helper.from_array(numpy_helper.to_array(inits[beta]).reshape(shape), p + "/b")
        ep = numpy_helper.from_array(np.array(_attr(n, "epsilon", 1e-5), np.float32), p + "/eps")
        g.initializer.extend([gm, bt, ep])
        al = numpy_helper.from_array(np.array(alpha, np.float32), p + "/alpha")
        g.initializer.extend([al, numpy_helper.from_array(np.array(0.01, np.float32), p + "/floor")])
        nodes += [helper.make_node("ReduceMean", [x], [p + "/bmean"], axes=axes, keepdims=1),
                  helper.make_node("Mul", [p + "/bmean", p + "/alpha"], [p + "/mean"]),
                  helper.make_node("Sub", [x, p + "/mean"], [p + "/d"]),
                  helper.make_node("Mul", [p + "/d", p + "/d"], [p + "/d2"]),
                  helper.make_node("ReduceMean", [p + "/d2"], [p + "/cvar"], axes=axes, keepdims=1),
                  # a channel that is (almost) constant on the images, e.g. behind a dead ReLU channel, gets
                  # the variance floor of 1 % of the layer's mean variance instead of a gain of 1/sqrt(eps)
                  helper.make_node("ReduceMean", [p + "/cvar"], [p + "/lvar"], axes=[1], keepdims=1),
                  helper.make_node("Mul", [p + "/lvar", p + "/floor"], [p + "/fvar"]),
                  helper.make_node("Max", [p + "/cvar", p + "/fvar"], [p + "/var"]),
                  helper.make_node("Add", [p + "/var", p + "/eps"], [p + "/ve"]),
                  helper.make_node("Sqrt", [p + "/ve"], [p + "/sd"]),
                  helper.make_node("Div", [p + "/d", p + "/sd"], [p + "/n"]),
                  helper.make_node("Mul", [p + "/n", p + "/g"], [p + "/ng"]),
                  helper.make_node("Add", [p + "/ng", p + "/b"], [n.output[0]])]
        probes.append((n, p + "/mean", p + "/var"))
    del g.node[:]
    g.node.extend(nodes)
    for _, m, v in probes:
        g.output.extend([helper.make_tensor_value_info(m, TensorProto.FLOAT, None),
                         helper.make_tensor_value_info(v, TensorProto.FLOAT, None)])
    sess = _session(stats_model)
    res = sess.run([name for _, m, v in probes for name in (m, v)], {model.graph.input[0].name: images})
    out = onnx.ModelProto()
    out.CopyFrom(model)
    oinits = {i.name: i for i in out.graph.initializer}
    for k, (n, _, _) in enumerate(probes):
        mean, var = res[2 * k].reshape(-1), res[2 * k + 1].reshape(-1)
        oinits[n.input[3]].CopyFrom(numpy_helper.from_array(mean.astype(np.float32), n.input[3]))
        oinits[n.input[4]].CopyFrom(numpy_helper.from_array(var.astype(np.float32), n.input[4]))
    return out


def fold_batchnorms(model, keep=()):
    """Folds every BatchNormalization that follows a Conv (its only consumer) into the Conv's weights and
    bias, as the eval-mode export does; BNs named in `keep` stay standalone."""
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    consumers = Counter(i for n in g.node for i in n.input)
    drop, renames = set(), {}
    for n in g.node:
        if n.op_type != "BatchNormalization" or n.name in keep:
            continue
        conv = producer.get(n.input[0])
        if conv is None or conv.op_type != "Conv" or consumers[n.input[0]] != 1:
            raise ValueError(f"BatchNormalization {n.name} does not follow a Conv; mark it keep=True")
        gamma, beta, mean, var = (numpy_helper.to_array(inits[i]).astype(np.float64) for i in n.input[1:5])
        s = gamma / np.sqrt(var + _attr(n, "epsilon", 1e-5))
        w = numpy_helper.to_array(inits[conv.input[1]]).astype(np.float64)
        b = numpy_helper.to_array(inits[conv.input[2]]).astype(np.float64) if len(conv.input) > 2 else 0.0
        inits[conv.input[1]].CopyFrom(numpy_helper.from_array((w * s[:, None, None, None]).astype(np.float32),
                                                              conv.input[1]))
        bias = ((b - mean) * s + beta).astype(np.float32)
        if len(conv.input) > 2:
            inits[conv.input[2]].CopyFrom(numpy_helper.from_array(bias, conv.input[2]))
        else:
            bname = conv.input[1][:-len(".weight")] + ".bias" if conv.input[1].endswith(".weight") else conv.input[1] + "_bias"
            while bname in inits:
                bname += "_"
            g.initializer.append(numpy_helper.from_array(bias, bname))
            conv.input.append(bname)
        renames[conv.output[0]] = n.output[0]
        drop.add(n.name)
        for i in n.input[1:5]:
            drop.add("init:" + i)
    nodes = [n for n in g.node if n.name not in drop]
    for n in nodes:
        n.output[:] = [renames.get(o, o) for o in n.output]
    del g.node[:]
    g.node.extend(nodes)
    kept = [i for i in g.initializer if "init:" + i.name not in drop]
    del g.initializer[:]
    g.initializer.extend(kept)
    return model


HEAD_COMPONENTS = 64


def init_classifier(model, gemm_name, images, std=3.0, components=HEAD_COMPONENTS):
    """Gives the final Gemm a head that reads what varies between images, as a trained classifier does: its
    weights are random combinations of the top principal directions of the centred features on `images`
    (a random head reads mostly image-independent feature energy and passes rounding noise from every
    direction); the logits are then centred per class and scaled to `std`."""
    g = model.graph
    node = next(n for n in g.node if n.name == gemm_name)
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    probe.graph.output.append(helper.make_tensor_value_info(node.input[0], TensorProto.FLOAT, None))
    feats = _session(probe).run([node.input[0]], {g.input[0].name: images})[0].astype(np.float64)
    feats = feats.reshape(len(feats), -1)
    inits = {i.name: i for i in g.initializer}
    w = numpy_helper.to_array(inits[node.input[1]]).astype(np.float64)
    centred = feats - feats.mean(0)
    _, sv, vt = np.linalg.svd(centred, full_matrices=False)
    k = int(min(components, np.sum(sv > sv[0] * 1e-6)))
    rng = np.random.default_rng(int(abs(w[0, 0]) * 1e9) % 2 ** 32)
    w = rng.standard_normal((w.shape[0], k)) @ vt[:k]
    logits = feats @ w.T
    mu = logits.mean(0)
    sd = (logits - mu).std() + 1e-12
    inits[node.input[1]].CopyFrom(numpy_helper.from_array((w * std / sd).astype(np.float32), node.input[1]))
    inits[node.input[2]].CopyFrom(numpy_helper.from_array((-mu * std / sd).astype(np.float32), node.input[2]))
    return model


def estimation_images(resolution):
    """How many images the BN statistics are estimated on: enough that the last stage (stride 32) sees
    about 1,000 positions per channel (fewer overfit the statistics to the sample and the activations of
    other images then grow with depth), 32 to 256."""
    return int(np.clip(1000 / max(resolution / 32, 1) ** 2, 32, 256))


def _make(build, resolution, batch, seed):
    """Builds the raw graph at the estimation batch, where the BN statistics are estimated and folded and the
    classifier initialised, then returns it at `batch`: the same graph with the batch dimension changed, or,
    for graphs that carry the batch in Reshape constants (ShuffleNet, YOLO), the graph built again with the
    same seed (same weights) receiving the same parameters."""
    def raw(b):
        z = Net(seed)
        return z, z.finish(build(z, resolution, b))

    n_est = estimation_images(resolution)
    z, est = raw(n_est)
    images = smooth_images(n_est, resolution, seed=10_000 + seed,
                           channels=est.graph.input[0].type.tensor_type.shape.dim[1].dim_value)
    est = estimate_bn_statistics(est, images)
    stats = {}
    for i in est.graph.initializer:
        stats[i.name] = onnx.TensorProto()
        stats[i.name].CopyFrom(i)
    est = fold_batchnorms(est, z.keep_bn)
    if z.classifier:
        init_classifier(est, z.classifier, images)
    if batch == n_est:
        model = est
    elif not any(n.op_type == "Reshape" for n in est.graph.node):
        # nothing in the graph carries the batch: the same model with the batch dimension changed
        model = est
        for v in list(model.graph.input) + list(model.graph.output):
            if v.type.tensor_type.shape.dim:
                v.type.tensor_type.shape.dim[0].dim_value = batch
    else:
        _, model = raw(batch)
        params = {i.name: i for i in est.graph.initializer if i.data_type == TensorProto.FLOAT}
        bn_stats = [i for n in model.graph.node if n.op_type == "BatchNormalization" for i in n.input[3:5]]
        inits = {i.name: i for i in model.graph.initializer}
        for name in bn_stats:
            inits[name].CopyFrom(stats[name])
        model = fold_batchnorms(model, z.keep_bn)
        for i in model.graph.initializer:
            if i.data_type == TensorProto.FLOAT and i.name in params and list(i.dims) == list(params[i.name].dims):
                i.CopyFrom(params[i.name])
    _declare_output_shapes(model)
    onnx.checker.check_model(model)
    return model


def _declare_output_shapes(model):
    """Graph outputs with their static shapes, as the exporter declares them."""
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    types = {v.name: v.type for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    for o in model.graph.output:
        o.type.CopyFrom(types[o.name])


def _zoo(build):
    """Turns a graph body build(z, resolution, batch) -> outputs into a generator
    (resolution, batch, seed) -> onnx.ModelProto."""
    def make(resolution=224, batch=1, seed=0):
        return _make(build, resolution, batch, seed)
    make.__name__, make.__doc__ = build.__name__, build.__doc__
    return make


# ---------------------------------------------------------------------------------------------------
# Architectures
# ---------------------------------------------------------------------------------------------------

def _input(z, batch, resolution, channels=3):
    return z.input("images", [batch, channels, resolution, resolution])


def _basic_block(z, x, cin, cout, stride):
    with z.scope("conv1"):
        y = z.cbn(x, cin, cout, 3, stride)
    with z.scope("conv2"):
        y = z.cbn(y, cout, cout, 3, 1, act=None, gamma=z.res_gamma(cout))
    if stride != 1 or cin != cout:
        with z.scope("downsample"):
            x = z.cbn(x, cin, cout, 1, stride, 0, act=None)
    return z.node("Relu", [z.node("Add", [y, x])])


def _bottleneck(z, x, cin, width, stride):
    cout = width * 4
    with z.scope("conv1"):
        y = z.cbn(x, cin, width, 1, 1, 0)
    with z.scope("conv2"):
        y = z.cbn(y, width, width, 3, stride)
    with z.scope("conv3"):
        y = z.cbn(y, width, cout, 1, 1, 0, act=None, gamma=z.res_gamma(cout))
    if stride != 1 or cin != cout:
        with z.scope("downsample"):
            x = z.cbn(x, cin, cout, 1, stride, 0, act=None)
    return z.node("Relu", [z.node("Add", [y, x])])


def _gap_fc_head(z, x, c):
    """torchvision's classifier head: adaptive average pool to 1x1, flatten, Linear to 1000 classes."""
    with z.scope("avgpool"):
        x = z.gap(x)
    x = z.flatten(x)
    with z.scope("fc"):
        return z.linear(x, c, 1000, final=True)


def _resnet(z, resolution, batch, bottleneck, layers):
    x = _input(z, batch, resolution)
    with z.scope("conv1"):
        x = z.cbn(x, 3, 64, 7, 2, 3)
    with z.scope("maxpool"):
        x = z.maxpool(x, 3, 2, 1)
    c = 64
    for li, (n, width) in enumerate(zip(layers, [64, 128, 256, 512])):
        for bi in range(n):
            stride = 2 if (li > 0 and bi == 0) else 1
            with z.scope(f"layer{li + 1}.{bi}"):
                if bottleneck:
                    x = _bottleneck(z, x, c, width, stride)
                    c = width * 4
                else:
                    x = _basic_block(z, x, c, width, stride)
                    c = width
    return _gap_fc_head(z, x, c)


@_zoo
def resnet18(z, resolution, batch):
    return _resnet(z, resolution, batch, False, [2, 2, 2, 2])


@_zoo
def resnet50(z, resolution, batch):
    return _resnet(z, resolution, batch, True, [3, 4, 6, 3])


@_zoo
def googlenet(z, resolution, batch):
    """torchvision GoogLeNet (aux_logits=False, transform_input=False): BasicConv2d = conv + BN(eps 1e-3)
    + ReLU; ceil-mode max pools; Inception branch3 with a 3x3 conv as torchvision has it."""

    def basic(x, cin, cout, k, s=1, p=None):
        return z.cbn(x, cin, cout, k, s, p, eps=1e-3)

    def inception(x, cin, c1, c3r, c3, c5r, c5, pp):
        with z.scope("branch1"):
            b1 = basic(x, cin, c1, 1, 1, 0)
        with z.scope("branch2"):
            with z.scope("0"):
                b2 = basic(x, cin, c3r, 1, 1, 0)
            with z.scope("1"):
                b2 = basic(b2, c3r, c3, 3)
        with z.scope("branch3"):
            with z.scope("0"):
                b3 = basic(x, cin, c5r, 1, 1, 0)
            with z.scope("1"):
                b3 = basic(b3, c5r, c5, 3)
        with z.scope("branch4"):
            with z.scope("0"):
                b4 = z.maxpool(x, 3, 1, 1, ceil=True)
            with z.scope("1"):
                b4 = basic(b4, cin, pp, 1, 1, 0)
        return z.concat([b1, b2, b3, b4]), c1 + c3 + c5 + pp

    x = _input(z, batch, resolution)
    with z.scope("conv1"):
        x = basic(x, 3, 64, 7, 2, 3)
    with z.scope("maxpool1"):
        x = z.maxpool(x, 3, 2, 0, ceil=True)
    with z.scope("conv2"):
        x = basic(x, 64, 64, 1, 1, 0)
    with z.scope("conv3"):
        x = basic(x, 64, 192, 3)
    with z.scope("maxpool2"):
        x = z.maxpool(x, 3, 2, 0, ceil=True)
    c = 192
    cfg = {"3a": (64, 96, 128, 16, 32, 32), "3b": (128, 128, 192, 32, 96, 64), "maxpool3": None,
           "4a": (192, 96, 208, 16, 48, 64), "4b": (160, 112, 224, 24, 64, 64), "4c": (128, 128, 256, 24, 64, 64),
           "4d": (112, 144, 288, 32, 64, 64), "4e": (256, 160, 320, 32, 128, 128), "maxpool4": None,
           "5a": (256, 160, 320, 32, 128, 128), "5b": (384, 192, 384, 48, 128, 128)}
    for name, p in cfg.items():
        with z.scope(name if p is None else "inception" + name):
            if p is None:
                x = z.maxpool(x, 3 if name == "maxpool3" else 2, 2, 0, ceil=True)
            else:
                x, c = inception(x, c, *p)
    return _gap_fc_head(z, x, c)


@_zoo
def regnet_y_400mf(z, resolution, batch):
    """torchvision regnet_y_400mf: widths 48/104/208/440, depths 1/3/6/6, group width 8, bottleneck 1,
    SE ratio 0.25 of the block's input width, ReLU everywhere."""
    x = _input(z, batch, resolution)
    with z.scope("stem"):
        x = z.cbn(x, 3, 32, 3, 2)
    c = 32
    for si, (w, d) in enumerate(zip([48, 104, 208, 440], [1, 3, 6, 6])):
        for bi in range(d):
            stride = 2 if bi == 0 else 1
            with z.scope(f"trunk_output.block{si + 1}.block{si + 1}-{bi}"):
                skip = x
                if stride != 1 or c != w:
                    with z.scope("proj"):
                        skip = z.cbn(x, c, w, 1, stride, 0, act=None)
                with z.scope("f.a"):
                    y = z.cbn(x, c, w, 1, 1, 0)
                with z.scope("f.b"):
                    y = z.cbn(y, w, w, 3, stride, 1, groups=w // 8)
                with z.scope("f.se"):
                    y = z.se(y, w, int(round(0.25 * c)), "relu")
                with z.scope("f.c"):
                    y = z.cbn(y, w, w, 1, 1, 0, act=None, gamma=z.res_gamma(w))
                x = z.node("Relu", [z.node("Add", [skip, y])])
            c = w
    return _gap_fc_head(z, x, c)


@_zoo
def mnasnet1_0(z, resolution, batch):
    """torchvision mnasnet1_0: stem, depthwise-separable first block, six stacks of inverted residuals
    (ReLU), 1x1 to 1280, x.mean([2, 3]) (ReduceMean keepdims=0), Linear."""
    x = _input(z, batch, resolution)
    with z.scope("layers"):
        with z.scope("0"):
            x = z.cbn(x, 3, 32, 3, 2)
        with z.scope("3"):
            x = z.cbn(x, 32, 32, 3, 1, groups=32)
        with z.scope("6"):
            x = z.cbn(x, 32, 16, 1, 1, 0, act=None)
        c = 16
        for si, (cout, k, s, e, r) in enumerate([(24, 3, 2, 3, 3), (40, 5, 2, 3, 3), (80, 5, 2, 6, 3),
                                                (96, 3, 1, 6, 2), (192, 5, 2, 6, 4), (320, 3, 1, 6, 1)]):
            for bi in range(r):
                stride = s if bi == 0 else 1
                with z.scope(f"{8 + si}.{bi}.layers"):
                    mid = c * e
                    y = z.cbn(x, c, mid, 1, 1, 0)
                    y = z.cbn(y, mid, mid, k, stride, k // 2, groups=mid)
                    res = stride == 1 and c == cout
                    y = z.cbn(y, mid, cout, 1, 1, 0, act=None, gamma=z.res_gamma(cout) if res else None)
                x = z.node("Add", [y, x]) if res else y
                c = cout
        with z.scope("14"):
            x = z.cbn(x, c, 1280, 1, 1, 0)
    x = z.node("ReduceMean", [x], axes=[2, 3], keepdims=0)
    with z.scope("classifier.1"):
        x = z.linear(x, 1280, 1000, final=True)
    return x


@_zoo
def mobilenet_v2(z, resolution, batch):
    """torchvision mobilenet_v2: ReLU6 as Clip(x, 0, 6) with constant min/max inputs."""
    x = _input(z, batch, resolution)
    with z.scope("features.0"):
        x = z.cbn(x, 3, 32, 3, 2, act="relu6")
    c, idx = 32, 1
    for t, cout, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                          (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            stride = s if i == 0 else 1
            with z.scope(f"features.{idx}.conv"):
                hidden = c * t
                y = x
                if t != 1:
                    y = z.cbn(y, c, hidden, 1, 1, 0, act="relu6")
                y = z.cbn(y, hidden, hidden, 3, stride, 1, groups=hidden, act="relu6")
                res = stride == 1 and c == cout
                y = z.cbn(y, hidden, cout, 1, 1, 0, act=None, gamma=z.res_gamma(cout) if res else None)
            x = z.node("Add", [x, y]) if res else y
            c, idx = cout, idx + 1
    with z.scope("features.18"):
        x = z.cbn(x, c, 1280, 1, 1, 0, act="relu6")
    x = z.gap(x)
    x = z.flatten(x)
    with z.scope("classifier.1"):
        x = z.linear(x, 1280, 1000, final=True)
    return x


def _make_divisible(v, divisor=8):
    """torchvision's channel rounding: to a multiple of divisor, never below 90 % of v."""
    n = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return n + divisor if n < 0.9 * v else n


@_zoo
def mobilenet_v3_large(z, resolution, batch):
    """torchvision mobilenet_v3_large, with HardSwish and HardSigmoid as DLA users export them (x * relu6(x +
    3) / 6 and relu6(x + 3) / 6: the DLA has neither); BN eps 1e-3, squeeze-excite gates on hard sigmoids,
    5 x 5 depthwise convolutions, a Linear + HardSwish head."""
    x = _input(z, batch, resolution)
    with z.scope("features.0"):
        x = z.cbn(x, 3, 16, 3, 2, act="hswish", eps=1e-3)
    blocks = [(16, 3, 16, 16, False, "relu", 1), (16, 3, 64, 24, False, "relu", 2), (24, 3, 72, 24, False, "relu", 1),
              (24, 5, 72, 40, True, "relu", 2), (40, 5, 120, 40, True, "relu", 1), (40, 5, 120, 40, True, "relu", 1),
              (40, 3, 240, 80, False, "hswish", 2), (80, 3, 200, 80, False, "hswish", 1),
              (80, 3, 184, 80, False, "hswish", 1), (80, 3, 184, 80, False, "hswish", 1),
              (80, 3, 480, 112, True, "hswish", 1), (112, 3, 672, 112, True, "hswish", 1),
              (112, 5, 672, 160, True, "hswish", 2), (160, 5, 960, 160, True, "hswish", 1),
              (160, 5, 960, 160, True, "hswish", 1)]
    for i, (cin, k, mid, cout, use_se, act, stride) in enumerate(blocks):
        with z.scope(f"features.{i + 1}.block"):
            y, j = x, 0
            if mid != cin:
                with z.scope(str(j)):
                    y = z.cbn(y, cin, mid, 1, 1, 0, act=act, eps=1e-3)
                j += 1
            with z.scope(str(j)):
                y = z.cbn(y, mid, mid, k, stride, k // 2, groups=mid, act=act, eps=1e-3)
            j += 1
            if use_se:
                with z.scope(str(j)):
                    y = z.se(y, mid, _make_divisible(mid // 4), "relu", gate="hsigmoid")
                j += 1
            res = stride == 1 and cin == cout
            with z.scope(str(j)):
                y = z.cbn(y, mid, cout, 1, 1, 0, act=None, eps=1e-3, gamma=z.res_gamma(cout) if res else None)
        x = z.node("Add", [y, x]) if res else y
    with z.scope("features.16"):
        x = z.cbn(x, 160, 960, 1, 1, 0, act="hswish", eps=1e-3)
    with z.scope("avgpool"):
        x = z.gap(x)
    x = z.flatten(x)
    with z.scope("classifier.0"):
        x = z.act(z.linear(x, 960, 1280), "hswish")
    with z.scope("classifier.3"):
        x = z.linear(x, 1280, 1000, final=True)
    return x


@_zoo
def efficientnet_b0(z, resolution, batch):
    """torchvision efficientnet_b0: SiLU as x * Sigmoid(x), MBConv with SE (squeeze = input channels / 4,
    SiLU), BN eps 1e-3, stochastic depth (identity in eval)."""
    x = _input(z, batch, resolution)
    with z.scope("features.0"):
        x = z.cbn(x, 3, 32, 3, 2, act="silu", eps=1e-3)
    c = 32
    for si, (e, k, s, cout, n) in enumerate([(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
                                            (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]):
        for bi in range(n):
            stride = s if bi == 0 else 1
            with z.scope(f"features.{si + 1}.{bi}.block"):
                mid = c * e
                y = x
                if e != 1:
                    with z.scope("0"):
                        y = z.cbn(y, c, mid, 1, 1, 0, act="silu", eps=1e-3)
                with z.scope("1" if e != 1 else "0"):
                    y = z.cbn(y, mid, mid, k, stride, k // 2, groups=mid, act="silu", eps=1e-3)
                with z.scope("2" if e != 1 else "1"):
                    y = z.se(y, mid, max(1, c // 4), "silu")
                with z.scope("3" if e != 1 else "2"):
                    res = stride == 1 and c == cout
                    y = z.cbn(y, mid, cout, 1, 1, 0, act=None, eps=1e-3, gamma=z.res_gamma(cout) if res else None)
            x = z.node("Add", [y, x]) if res else y
            c = cout
    with z.scope("features.8"):
        x = z.cbn(x, c, 1280, 1, 1, 0, act="silu", eps=1e-3)
    with z.scope("avgpool"):
        x = z.gap(x)
    x = z.flatten(x)
    with z.scope("classifier.1"):
        x = z.linear(x, 1280, 1000, final=True)
    return x


def _adaptive_avgpool(z, x, size, out):
    """AdaptiveAvgPool2d((out, out)) as the exporter writes it: AveragePool(kernel = stride = size/out) when
    out divides size. Otherwise the export fails; the classifier then takes the size x size features."""
    if size % out == 0:
        k = size // out
        return z.node("AveragePool", [x], kernel_shape=[k, k], strides=[k, k]), out
    return x, size


@_zoo
def vgg11(z, resolution, batch):
    """torchvision vgg11 (configuration A, no BN): conv+bias+ReLU, 2x2 max pools, adaptive avg-pool to
    7x7, Flatten of 25,088, three Linear layers."""
    x = _input(z, batch, resolution)
    c, size, i = 3, resolution, 0
    with z.scope("features"):
        for v in [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]:
            with z.scope(str(i)):
                if v == "M":
                    x = z.maxpool(x, 2, 2)
                    size //= 2
                    i += 1
                else:
                    x = z.conv_bias(x, c, v, 3, act="relu")
                    c = v
                    i += 2
    with z.scope("avgpool"):
        x, size = _adaptive_avgpool(z, x, size, 7)
    x = z.flatten(x)
    with z.scope("classifier"):
        with z.scope("0"):
            x = z.node("Relu", [z.linear(x, c * size * size, 4096)])
        with z.scope("3"):
            x = z.node("Relu", [z.linear(x, 4096, 4096)])
        with z.scope("6"):
            x = z.linear(x, 4096, 1000, final=True)
    return x


@_zoo
def alexnet(z, resolution, batch):
    """torchvision alexnet: five convs with bias + ReLU, three 3x3/2 max pools, adaptive avg-pool to 6x6
    (AveragePool 1x1/1 at 224), Flatten of 9,216, three Linear layers."""
    x = _input(z, batch, resolution)
    with z.scope("features"):
        with z.scope("0"):
            x = z.conv_bias(x, 3, 64, 11, 4, 2, act="relu")
        with z.scope("2"):
            x = z.maxpool(x, 3, 2)
        with z.scope("3"):
            x = z.conv_bias(x, 64, 192, 5, 1, 2, act="relu")
        with z.scope("5"):
            x = z.maxpool(x, 3, 2)
        with z.scope("6"):
            x = z.conv_bias(x, 192, 384, 3, 1, 1, act="relu")
        with z.scope("8"):
            x = z.conv_bias(x, 384, 256, 3, 1, 1, act="relu")
        with z.scope("10"):
            x = z.conv_bias(x, 256, 256, 3, 1, 1, act="relu")
        with z.scope("12"):
            x = z.maxpool(x, 3, 2)
    size = resolution
    for k, s, p in [(11, 4, 2), (3, 2, 0), (3, 2, 0), (3, 2, 0)]:
        size = (size + 2 * p - k) // s + 1
    with z.scope("avgpool"):
        x, size = _adaptive_avgpool(z, x, size, 6)
    x = z.flatten(x)
    with z.scope("classifier"):
        with z.scope("1"):
            x = z.node("Relu", [z.linear(x, 256 * size * size, 4096)])
        with z.scope("4"):
            x = z.node("Relu", [z.linear(x, 4096, 4096)])
        with z.scope("6"):
            x = z.linear(x, 4096, 1000, final=True)
    return x


@_zoo
def densenet121(z, resolution, batch):
    """torchvision densenet121: growth 32, blocks 6/12/24/16, bn_size 4. Each dense layer concatenates all
    earlier features (the first layer: a one-input Concat), then standalone BN (pre-activation) + ReLU +
    1x1 conv (its BN folded) + ReLU + 3x3 conv without bias; transitions BN + ReLU + 1x1 conv + 2x2 average
    pool; norm5 + ReLU + GlobalAveragePool + Linear."""
    x = _input(z, batch, resolution)
    with z.scope("features"):
        with z.scope("conv0"):
            x = z.cbn(x, 3, 64, 7, 2, 3)
        with z.scope("pool0"):
            x = z.maxpool(x, 3, 2, 1)
        c = 64
        for bi, n in enumerate([6, 12, 24, 16]):
            feats = [x]
            for li in range(n):
                with z.scope(f"denseblock{bi + 1}/denselayer{li + 1}"):
                    cat = z.concat(feats)
                    cin = c + 32 * li
                    with z.scope("norm1"):
                        y = z.node("Relu", [z.bn(cat, cin, keep=True)])
                    with z.scope("conv1"):
                        y = z.cbn(y, cin, 128, 1, 1, 0)
                    with z.scope("conv2"):
                        y = z.conv(y, 128, 32, 3, 1, 1)
                    feats.append(y)
            with z.scope(f"denseblock{bi + 1}"):
                x = z.concat(feats)
            c = c + 32 * n
            if bi < 3:
                with z.scope(f"transition{bi + 1}"):
                    y = z.node("Relu", [z.bn(x, c, keep=True)])
                    y = z.conv(y, c, c // 2, 1, 1, 0)
                    x = z.avgpool(y, 2, 2)
                c //= 2
        with z.scope("norm5"):
            x = z.bn(x, c, keep=True)
    x = z.node("Relu", [x])
    x = z.gap(x)
    x = z.flatten(x)
    with z.scope("classifier"):
        x = z.linear(x, c, 1000, final=True)
    return x


@_zoo
def squeezenet1_1(z, resolution, batch):
    """torchvision squeezenet1_1: no BN; Fire modules (squeeze 1x1, expand 1x1 and 3x3, Concat), ceil-mode
    max pools, a 1x1 conv classifier with ReLU, GlobalAveragePool, Flatten."""
    x = _input(z, batch, resolution)

    def fire(x, cin, sq, e1, e3):
        with z.scope("squeeze"):
            s = z.conv_bias(x, cin, sq, 1, 1, 0, act="relu")
        with z.scope("expand1x1"):
            a = z.conv_bias(s, sq, e1, 1, 1, 0, act="relu")
        with z.scope("expand3x3"):
            b = z.conv_bias(s, sq, e3, 3, 1, 1, act="relu")
        return z.concat([a, b]), e1 + e3

    with z.scope("features"):
        with z.scope("0"):
            x = z.conv_bias(x, 3, 64, 3, 2, 0, act="relu")
        c = 64
        for i, p in [(2, None), (3, (16, 64, 64)), (4, (16, 64, 64)), (5, None), (6, (32, 128, 128)),
                     (7, (32, 128, 128)), (8, None), (9, (48, 192, 192)), (10, (48, 192, 192)),
                     (11, (64, 256, 256)), (12, (64, 256, 256))]:
            with z.scope(str(i)):
                if p is None:
                    x = z.maxpool(x, 3, 2, 0, ceil=True)
                else:
                    x, c = fire(x, c, *p)
    with z.scope("classifier"):
        with z.scope("1"):
            # trained SqueezeNet class maps are sparse: a negative shift before the ReLU
            x = z.conv_bias(x, c, 1000, 1, 1, 0, act="relu", gamma=1.0, beta=-1.0)
        with z.scope("3"):
            x = z.gap(x)
    x = z.flatten(x)
    return x


@_zoo
def shufflenet_v2_x1_0(z, resolution, batch):
    """torchvision shufflenet_v2_x1_0: channels 24/116/232/464/1024, repeats 4/8/4; stride-1 units split
    the input with chunk (Split), every unit ends in Concat + the rank-5 channel shuffle (Reshape to
    N x 2 x C/2 x H x W, Transpose(0, 2, 1, 3, 4), Reshape back); x.mean([2, 3]); Linear."""
    x = _input(z, batch, resolution)
    with z.scope("conv1"):
        x = z.cbn(x, 3, 24, 3, 2)
    with z.scope("maxpool"):
        x = z.maxpool(x, 3, 2, 1)
    size = (resolution + 1) // 2
    size = (size + 1) // 2
    c = 24
    for si, (cout, reps) in enumerate(zip([116, 232, 464], [4, 8, 4])):
        for ui in range(reps):
            stride = 2 if ui == 0 else 1
            bf = cout // 2
            with z.scope(f"stage{si + 2}/stage{si + 2}.{ui}"):
                if stride == 1:
                    x1, x2 = z.split(x, [bf, bf])
                    inp = bf
                else:
                    x1 = x2 = x
                    inp = c
                    with z.scope("branch1"):
                        x1 = z.cbn(x1, c, c, 3, 2, 1, groups=c, act=None)
                        x1 = z.cbn(x1, c, bf, 1, 1, 0)
                with z.scope("branch2"):
                    y = z.cbn(x2, inp, bf, 1, 1, 0)
                    y = z.cbn(y, bf, bf, 3, stride, 1, groups=bf, act=None)
                    y = z.cbn(y, bf, bf, 1, 1, 0)
                out = z.concat([x1, y])
                if stride == 2:
                    size = (size + 1) // 2
                # channel_shuffle(out, 2)
                t = z.reshape(out, [batch, 2, cout // 2, size, size])
                t = z.node("Transpose", [t], perm=[0, 2, 1, 3, 4])
                x = z.reshape(t, [batch, -1, size, size])
            c = cout
    with z.scope("conv5"):
        x = z.cbn(x, c, 1024, 1, 1, 0)
    x = z.node("ReduceMean", [x], axes=[2, 3], keepdims=0)
    with z.scope("fc"):
        x = z.linear(x, 1024, 1000, final=True)
    return x


def _yolov8n(z, resolution, batch, levels):
    """ultralytics YOLOv8n (depth 0.33, width 0.25) cut before the decode: Conv = conv + BN(eps 1e-3) +
    SiLU; C2f: cv1, chunk(2) as Split, n Bottlenecks on the last chunk, Concat, cv2; SPPF: cv1, three
    5x5/1 max pools, Concat, cv2; FPN/PAN with nearest x2 Resize and Concat; Detect heads cv2 (box: 3x3,
    3x3, 1x1 to 64) and cv3 (classes: 3x3, 3x3, 1x1 to 80) concatenated per level (144 channels).
    levels=False: the first step of the decode, each level viewed as N x 144 x HW and concatenated on the
    last axis (N x 144 x 8400 at 640); levels=True: the three per-level maps as outputs."""
    x = _input(z, batch, resolution)

    def conv(x, cin, cout, k=1, s=1, gamma=None):
        with z.scope("conv"):
            return z.cbn(x, cin, cout, k, s, k // 2, act="silu", eps=1e-3, gamma=gamma)

    def c2f(x, cin, cout, n, shortcut):
        h = cout // 2
        with z.scope("cv1"):
            y = conv(x, cin, 2 * h)
        ys = list(z.split(y, [h, h]))
        for i in range(n):
            with z.scope(f"m.{i}"):
                with z.scope("cv1"):
                    t = conv(ys[-1], h, h, 3)
                with z.scope("cv2"):
                    t = conv(t, h, h, 3, gamma=z.res_gamma(h) if shortcut else None)
                ys.append(z.node("Add", [ys[-1], t]) if shortcut else t)
        with z.scope("cv2"):
            return conv(z.concat(ys), (2 + n) * h, cout)

    def sppf(x, cin, cout):
        h = cin // 2
        with z.scope("cv1"):
            y = [conv(x, cin, h)]
        with z.scope("m"):
            for _ in range(3):
                y.append(z.maxpool(y[-1], 5, 1, 2))
        with z.scope("cv2"):
            return conv(z.concat(y), 4 * h, cout)

    layers = {}
    with z.scope("model.0"):
        x = conv(x, 3, 16, 3, 2)
    with z.scope("model.1"):
        x = conv(x, 16, 32, 3, 2)
    with z.scope("model.2"):
        x = c2f(x, 32, 32, 1, True)
    with z.scope("model.3"):
        x = conv(x, 32, 64, 3, 2)
    with z.scope("model.4"):
        x = layers[4] = c2f(x, 64, 64, 2, True)
    with z.scope("model.5"):
        x = conv(x, 64, 128, 3, 2)
    with z.scope("model.6"):
        x = layers[6] = c2f(x, 128, 128, 2, True)
    with z.scope("model.7"):
        x = conv(x, 128, 256, 3, 2)
    with z.scope("model.8"):
        x = c2f(x, 256, 256, 1, True)
    with z.scope("model.9"):
        x = layers[9] = sppf(x, 256, 256)
    with z.scope("model.10"):
        x = z.resize_nearest(x, 2)
    with z.scope("model.11"):
        x = z.concat([x, layers[6]])
    with z.scope("model.12"):
        x = layers[12] = c2f(x, 384, 128, 1, False)
    with z.scope("model.13"):
        x = z.resize_nearest(x, 2)
    with z.scope("model.14"):
        x = z.concat([x, layers[4]])
    with z.scope("model.15"):
        p3 = x = c2f(x, 192, 64, 1, False)
    with z.scope("model.16"):
        x = conv(x, 64, 64, 3, 2)
    with z.scope("model.17"):
        x = z.concat([x, layers[12]])
    with z.scope("model.18"):
        p4 = x = c2f(x, 192, 128, 1, False)
    with z.scope("model.19"):
        x = conv(x, 128, 128, 3, 2)
    with z.scope("model.20"):
        x = z.concat([x, layers[9]])
    with z.scope("model.21"):
        p5 = c2f(x, 384, 256, 1, False)
    outs = []
    with z.scope("model.22"):
        for i, (p, ch) in enumerate([(p3, 64), (p4, 128), (p5, 256)]):
            with z.scope(f"cv2.{i}"):
                with z.scope("0"):
                    b = conv(p, ch, 64, 3)
                with z.scope("1"):
                    b = conv(b, 64, 64, 3)
                with z.scope("2"):
                    b = z.conv_bias(b, 64, 64, 1, 1, 0, gamma=2.0, beta=0.0)
            with z.scope(f"cv3.{i}"):
                with z.scope("0"):
                    k = conv(p, ch, 80, 3)
                with z.scope("1"):
                    k = conv(k, 80, 80, 3)
                with z.scope("2"):
                    k = z.conv_bias(k, 80, 80, 1, 1, 0, gamma=2.0, beta=-3.0)
            outs.append(z.concat([b, k]))
        if not levels:
            flat = []
            for i, o in enumerate(outs):
                s = resolution // (8 << i)
                flat.append(z.reshape(o, [batch, 144, s * s]))
            outs = z.concat(flat, axis=2)
    return outs


@_zoo
def yolov8n(z, resolution, batch):
    return _yolov8n(z, resolution, batch, levels=False)


@_zoo
def yolov8n_levels(z, resolution, batch):
    return _yolov8n(z, resolution, batch, levels=True)


def digits(resolution=8, batch=1, seed=0):
    """The bundled trained CNN (examples/models/digits.onnx) with its input renamed to `images` and its
    output to `output`; resolution and seed are ignored (8x8 grey images, pixel values 0-16)."""
    m = onnx.load(os.path.join(MODELS_DIR, "digits.onnx"))
    g = m.graph
    old_in, old_out = g.input[0].name, g.output[0].name
    for n in g.node:
        n.input[:] = ["images" if i == old_in else i for i in n.input]
        n.output[:] = ["output" if o == old_out else o for o in n.output]
    g.input[0].name, g.output[0].name = "images", "output"
    g.input[0].type.tensor_type.shape.dim[0].dim_value = batch
    if g.output[0].type.tensor_type.shape.dim:
        g.output[0].type.tensor_type.shape.dim[0].dim_value = batch
    return m


def digits_data(kind, n):
    """Real data for the digits model: kind 'calib' (training images) or 'test' (the test split)."""
    if kind == "calib":
        return np.load(os.path.join(MODELS_DIR, "digits_calib", "train_200.npy"))[:n].astype(np.float32)
    return np.load(os.path.join(MODELS_DIR, "digits_test_images.npy"))[:n].astype(np.float32)


# name -> (generator, full resolution, reduced (CI) resolution)
ZOO = {
    "resnet18": (resnet18, 224, 64),
    "resnet50": (resnet50, 224, 64),
    "googlenet": (googlenet, 224, 64),
    "regnet_y_400mf": (regnet_y_400mf, 224, 64),
    "mnasnet1_0": (mnasnet1_0, 224, 64),
    "mobilenet_v2": (mobilenet_v2, 224, 64),
    "efficientnet_b0": (efficientnet_b0, 224, 64),
    "mobilenet_v3_large": (mobilenet_v3_large, 224, 64),
    "vgg11": (vgg11, 224, 64),
    "alexnet": (alexnet, 224, 224),
    "densenet121": (densenet121, 224, 64),
    "squeezenet1_1": (squeezenet1_1, 224, 64),
    "shufflenet_v2_x1_0": (shufflenet_v2_x1_0, 224, 64),
    "yolov8n": (yolov8n, 640, 96),
    "yolov8n_levels": (yolov8n_levels, 640, 96),
    "digits": (digits, 8, 8),
}
