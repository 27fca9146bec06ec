"""The networks of NVIDIA's published Orin DLA figures (softdla/orin_published.py) as ONNX graphs with
random weights, for the Orin latency calibration (tools/orin_latency_calibration.py) and its test. Only the
topology matters to the latency model, so the graphs are built with zoo.Net (exporter-style names, conv +
BatchNormalization + activation blocks) without estimating BN statistics, and never run.

Each generator is fn(batch) -> onnx.ModelProto at the published input size, cut where NVIDIA's preparation
scripts cut it (the DLA part: no NMS, TopK or box decoding):
  resnet50               ResNet-50 v1.5 (MLPerf resnet50_v1), 224x224, with its 1000-class FC
  ssd_mobilenet_v1       TF-OD SSD-MobileNetV1 (MLPerf), 300x300: MobileNetV1 (ReLU6), extra layers
                         19-10-5-3-2-1, 1x1 box predictors (3 anchors on the first map, 6 after; 91 classes),
                         box and class convs fused horizontally as NVIDIA's script does
  retinanet_resnext50    MLPerf RetinaNet, 800x800: ResNeXt-50 32x4d, FPN P3-P7 (256 ch; P6, P7 from P5), heads
                         of 4 x (3x3 conv 256 + ReLU) then 3x3 to 9 x 264 classes / 9 x 4 boxes, shared over levels
  resnet34_backbone      ResNet-34 body (C3, C4, C5 out), 1280x768: NVIDIA's "backbone without RetinaNet head".
                         Taken without the FPN: with it, the published 285 img/s would need 92 % of the MAC
                         array's peak, where every other network of the table runs at 60-76 % (PROFILING.md)
  retinanet_resnet34     ResNet-34 + the FPN above + RetinaNet heads (9 anchors, 3 classes: Waymo's vehicle,
                         pedestrian, cyclist)
  ssd_resnet34           MLPerf SSD-ResNet-34, 1200x1200: ResNet-34 to layer3 with layer3's stride 1 (150x150),
                         extra blocks to 75-38-19-9-7, stride-3 3x3 heads (4/6/6/6/4/4 anchors, 81 classes),
                         box and class convs fused horizontally
  yolov5s                ultralytics YOLOv5s v6/v7 (6x6 stem, C3, SPPF, PAN), 672x672, SiLU as Sigmoid + Mul,
                         cut after the three Detect 1x1 convs (/model.24/m.{0,1,2}/Conv, 255 channels)
"""
from . import zoo

Net = zoo.Net


def _finish(z, outputs):
    return z.finish(outputs)


def resnet50(batch=1, hw=(224, 224)):
    z = Net(0)
    assert hw[0] == hw[1]
    return _finish(z, zoo._resnet(z, hw[0], batch, True, [3, 4, 6, 3]))


def _dw_sep(z, x, cin, cout, stride, name):
    with z.scope(f"{name}_depthwise"):
        x = z.cbn(x, cin, cin, 3, stride, 1, groups=cin, act="relu6")
    with z.scope(f"{name}_pointwise"):
        return z.cbn(x, cin, cout, 1, 1, 0, act="relu6")


def ssd_mobilenet_v1(batch=1, hw=(300, 300), classes=91):
    z = Net(0)
    x = z.input("images", [batch, 3, hw[0], hw[1]])
    with z.scope("Conv2d_0"):
        x = z.cbn(x, 3, 32, 3, 2, 1, act="relu6")
    c = 32
    feats = []
    for i, (cout, s) in enumerate([(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1),
                                   (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1)], start=1):
        x = _dw_sep(z, x, c, cout, s, f"Conv2d_{i}")
        c = cout
        if i in (11, 13):
            feats.append((x, c))
    for i, (mid, cout) in enumerate([(256, 512), (128, 256), (128, 256), (64, 128)], start=2):
        with z.scope(f"Conv2d_13_pointwise_1_Conv2d_{i}_1x1_{mid}"):
            x = z.cbn(x, c, mid, 1, 1, 0, act="relu6")
        with z.scope(f"Conv2d_13_pointwise_2_Conv2d_{i}_3x3_s2_{cout}"):
            x = z.cbn(x, mid, cout, 3, 2, 1, act="relu6")
        c = cout
        feats.append((x, c))
    outs = []
    for i, (f, fc) in enumerate(feats):
        anchors = 3 if i == 0 else 6
        with z.scope(f"BoxPredictor_{i}"):
            outs.append(z.conv(f, fc, anchors * (4 + classes), 1, 1, 0, bias=True))
    return _finish(z, outs)


def _resnext_bottleneck(z, x, cin, planes, stride, groups=32, width_per_group=4):
    width = planes * width_per_group // 64 * groups
    cout = planes * 4
    with z.scope("conv1"):
        y = z.cbn(x, cin, width, 1, 1, 0)
    with z.scope("conv2"):
        y = z.cbn(y, width, width, 3, stride, 1, groups=groups)
    with z.scope("conv3"):
        y = z.cbn(y, width, cout, 1, 1, 0, act=None)
    if stride != 1 or cin != cout:
        with z.scope("downsample"):
            x = z.cbn(x, cin, cout, 1, stride, 0, act=None)
    return z.node("Relu", [z.node("Add", [y, x])])


def _body(z, x, kind, layer3_stride=2, stages=4):
    """A ResNet/ResNeXt body; returns the outputs of layer2..layer{stages} and their channels."""
    with z.scope("conv1"):
        x = z.cbn(x, 3, 64, 7, 2, 3)
    with z.scope("maxpool"):
        x = z.maxpool(x, 3, 2, 1)
    c = 64
    feats = []
    blocks = [3, 4, 6, 3]
    for li, width in enumerate([64, 128, 256, 512][:stages]):
        for bi in range(blocks[li]):
            stride = 2 if (li > 0 and bi == 0) else 1
            if li == 2 and bi == 0:
                stride = layer3_stride
            with z.scope(f"layer{li + 1}.{bi}"):
                if kind == "resnext50":
                    x = _resnext_bottleneck(z, x, c, width, stride)
                    c = width * 4
                else:
                    x = zoo._basic_block(z, x, c, width, stride)
                    c = width
        if li >= 1:
            feats.append((x, c))
    return feats


def _fpn(z, feats, out=256):
    """torchvision FeaturePyramidNetwork on C3-C5 + LastLevelP6P7 from P5; returns P3..P7."""
    laterals = []
    for i, (f, c) in enumerate(feats):
        with z.scope(f"fpn.inner_blocks.{i}"):
            laterals.append(z.conv(f, c, out, 1, 1, 0, bias=True))
    tops = [laterals[-1]]
    for lat in reversed(laterals[:-1]):
        tops.insert(0, z.node("Add", [lat, z.resize_nearest(tops[0], 2)]))
    ps = []
    for i, t in enumerate(tops):
        with z.scope(f"fpn.layer_blocks.{i}"):
            ps.append(z.conv(t, out, out, 3, 1, 1, bias=True))
    with z.scope("fpn.extra_blocks.p6"):
        p6 = z.conv(ps[-1], out, out, 3, 2, 1, bias=True)
    with z.scope("fpn.extra_blocks.p7"):
        p7 = z.conv(z.node("Relu", [p6]), out, out, 3, 2, 1, bias=True)
    return ps + [p6, p7]


def _retina_head(z, levels, classes, anchors=9, c=256):
    outs = []
    for name, n_out in (("classification_head", anchors * classes), ("regression_head", anchors * 4)):
        for li, p in enumerate(levels):
            x = p
            with z.scope(f"head.{name}.level{li}"):
                for i in range(4):
                    with z.scope(f"conv.{i}"):
                        x = z.conv_bias(x, c, c, 3, 1, 1, act="relu")
                with z.scope("out"):
                    outs.append(z.conv(x, c, n_out, 3, 1, 1, bias=True))
    return outs


def retinanet_resnext50(batch=1, hw=(800, 800), classes=264):
    z = Net(0)
    x = z.input("images", [batch, 3, hw[0], hw[1]])
    with z.scope("backbone.body"):
        feats = _body(z, x, "resnext50")
    return _finish(z, _retina_head(z, _fpn(z, feats), classes))


def resnet34_backbone(batch=1, hw=(768, 1280)):
    z = Net(0)
    x = z.input("images", [batch, 3, hw[0], hw[1]])
    with z.scope("backbone.body"):
        feats = _body(z, x, "resnet34")
    return _finish(z, [f for f, _ in feats])


def retinanet_resnet34(batch=1, hw=(768, 1280), classes=3):
    z = Net(0)
    x = z.input("images", [batch, 3, hw[0], hw[1]])
    with z.scope("backbone.body"):
        feats = _body(z, x, "resnet34")
    return _finish(z, _retina_head(z, _fpn(z, feats), classes))


def ssd_resnet34(batch=1, hw=(1200, 1200), classes=81):
    z = Net(0)
    x = z.input("images", [batch, 3, hw[0], hw[1]])
    with z.scope("model"):
        feats = _body(z, x, "resnet34", layer3_stride=1, stages=3)
    x, c = feats[-1]
    srcs = [(x, c)]
    for i, (mid, cout, stride, pad) in enumerate([(256, 512, 2, 1), (256, 512, 2, 1), (128, 256, 2, 1),
                                                  (128, 256, 2, 0), (128, 256, 1, 0)]):
        with z.scope(f"additional_blocks.{i}"):
            with z.scope("0"):
                x = z.conv_bias(x, c, mid, 1, 1, 0, act="relu")
            with z.scope("2"):
                x = z.conv_bias(x, mid, cout, 3, stride, pad, act="relu")
        c = cout
        srcs.append((x, c))
    outs = []
    for i, ((f, fc), nd) in enumerate(zip(srcs, [4, 6, 6, 6, 4, 4])):
        with z.scope(f"loc_conf.{i}"):
            outs.append(z.conv(f, fc, nd * (4 + classes), 3, 3, 1, bias=True))
    return _finish(z, outs)


def yolov5s(batch=1, hw=(672, 672)):
    z = Net(0)
    x = z.input("images", [batch, 3, hw[0], hw[1]])

    def conv(x, cin, cout, k=1, s=1, p=None):
        with z.scope("conv"):
            return z.cbn(x, cin, cout, k, s, k // 2 if p is None else p, act="silu", eps=1e-3)

    def c3(x, cin, cout, n, shortcut=True):
        h = cout // 2
        with z.scope("cv1"):
            y = conv(x, cin, h)
        with z.scope("cv2"):
            y2 = conv(x, cin, h)
        for i in range(n):
            with z.scope(f"m.{i}"):
                with z.scope("cv1"):
                    t = conv(y, h, h)
                with z.scope("cv2"):
                    t = conv(t, h, h, 3)
                y = z.node("Add", [y, t]) if shortcut else t
        with z.scope("cv3"):
            return conv(z.concat([y, y2]), 2 * h, cout)

    layers = {}

    def at(i, fn):
        with z.scope(f"model.{i}"):
            layers[i] = fn()
        return layers[i]

    x = at(0, lambda: conv(x, 3, 32, 6, 2, 2))
    x = at(1, lambda: conv(x, 32, 64, 3, 2))
    x = at(2, lambda: c3(x, 64, 64, 1))
    x = at(3, lambda: conv(x, 64, 128, 3, 2))
    x = at(4, lambda: c3(x, 128, 128, 2))
    x = at(5, lambda: conv(x, 128, 256, 3, 2))
    x = at(6, lambda: c3(x, 256, 256, 3))
    x = at(7, lambda: conv(x, 256, 512, 3, 2))
    x = at(8, lambda: c3(x, 512, 512, 1))

    def sppf(x):
        with z.scope("cv1"):
            y = conv(x, 512, 256)
        ys = [y]
        with z.scope("m"):
            for _ in range(3):
                ys.append(z.maxpool(ys[-1], 5, 1, 2))
        with z.scope("cv2"):
            return conv(z.concat(ys), 1024, 512)

    x = at(9, lambda: sppf(x))
    x = at(10, lambda: conv(x, 512, 256))
    x = at(11, lambda: z.resize_nearest(x, 2))
    x = at(12, lambda: z.concat([x, layers[6]]))
    x = at(13, lambda: c3(x, 512, 256, 1, False))
    x = at(14, lambda: conv(x, 256, 128))
    x = at(15, lambda: z.resize_nearest(x, 2))
    x = at(16, lambda: z.concat([x, layers[4]]))
    p3 = at(17, lambda: c3(x, 256, 128, 1, False))
    x = at(18, lambda: conv(p3, 128, 128, 3, 2))
    x = at(19, lambda: z.concat([x, layers[14]]))
    p4 = at(20, lambda: c3(x, 256, 256, 1, False))
    x = at(21, lambda: conv(p4, 256, 256, 3, 2))
    x = at(22, lambda: z.concat([x, layers[10]]))
    p5 = at(23, lambda: c3(x, 512, 512, 1, False))
    outs = []
    with z.scope("model.24"):
        for i, (p, c) in enumerate(((p3, 128), (p4, 256), (p5, 512))):
            with z.scope(f"m.{i}"):
                outs.append(z.conv(p, c, 255, 1, 1, 0, bias=True))
    return _finish(z, outs)


NETS = {f.__name__: f for f in (resnet50, ssd_mobilenet_v1, retinanet_resnext50, resnet34_backbone,
                                retinanet_resnet34, ssd_resnet34, yolov5s)}


def build(name, batch=1, hw=None):
    fn = NETS[name]
    return fn(batch) if hw is None else fn(batch, tuple(hw))


