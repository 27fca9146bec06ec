"""NumPy reference implementations of softdla's op numerics (docs/NUMERICS.md).

Float references compute in float64 from the values the engine sees (fp16 inputs and weights are
already rounded to fp16). INT8 references implement the integer rules directly with int64 arrays."""
import numpy as np

I32_MIN, I32_MAX = -(2 ** 31), 2 ** 31 - 1


# ---------------------------------------------------------------- integer primitives
def sat32(v):
    return np.clip(v, I32_MIN, I32_MAX).astype(np.int64)


def sat8(v):
    return np.clip(v, -128, 127).astype(np.int8)


def rshift_rhaz(v, s):
    """Arithmetic right shift with round half away from zero (s may be an array)."""
    v = np.asarray(v, dtype=np.int64)
    s = np.asarray(s, dtype=np.int64)
    half = np.where(s > 0, np.left_shift(np.int64(1), np.maximum(s - 1, 0)), 0)
    pos = np.right_shift(v + half, s)
    neg = -np.right_shift(-v + half, s)
    return np.where(v >= 0, pos, neg)


def rescale32(v, m, s):
    return sat32(rshift_rhaz(np.asarray(v, np.int64) * np.asarray(m, np.int64), s))


def round_half_away(x):
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def quantize(x, scale):
    """float -> int8: x / scale in fp32, round half away from zero, saturate, NaN -> 0."""
    q = np.float32(x) / np.float32(scale) if np.isscalar(x) else np.asarray(x, np.float32) / np.float32(scale)
    q = np.asarray(q, np.float64)
    q = np.where(np.isnan(q), 0.0, q)
    return np.clip(round_half_away(q), -128, 127).astype(np.int8)


def q16_reciprocal(k):
    return (2 * 65536 + k) // (2 * k)


def activation_lut(kind, in_scale, out_scale):
    q = np.arange(-128, 128)
    x = (q.astype(np.float32) * np.float32(in_scale)).astype(np.float16).astype(np.float64)
    y = 1.0 / (1.0 + np.exp(-x)) if kind == "sigmoid" else np.tanh(x)
    h = y.astype(np.float16).astype(np.float64)
    return np.clip(round_half_away(h / np.float64(np.float32(out_scale))), -128, 127).astype(np.int8)


# ---------------------------------------------------------------- convolution family
def _per_channel(values, k):
    v = np.asarray(values)
    return (v if v.size > 1 else np.repeat(v.reshape(1), k)).reshape(1, k, 1, 1)


def conv_acc(x, w, stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), groups=1, exact=False):
    """Raw convolution sums: int64 when exact (INT8), float64 otherwise. pads = top, left, bottom, right."""
    dt = np.int64 if exact else np.float64
    x = np.asarray(x).astype(dt)
    w = np.asarray(w).astype(dt)
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    pt, pl, pb, pr = pads
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr), dt)
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    oh = (h + pt + pb - ((r - 1) * dilation[0] + 1)) // stride[0] + 1
    ow = (wd + pl + pr - ((s - 1) * dilation[1] + 1)) // stride[1] + 1
    kg = k // groups
    out = np.zeros((n, k, oh, ow), dt)
    for g in range(groups):
        xg = xp[:, g * cg:(g + 1) * cg]
        wg = w[g * kg:(g + 1) * kg]
        for i in range(r):
            for j in range(s):
                hs, ws = i * dilation[0], j * dilation[1]
                patch = xg[:, :, hs:hs + (oh - 1) * stride[0] + 1:stride[0], ws:ws + (ow - 1) * stride[1] + 1:stride[1]]
                out[:, g * kg:(g + 1) * kg] += np.einsum("nchw,kc->nkhw", patch, wg[:, :, i, j])
    return out


def deconv_acc(x, w, stride=(1, 1), exact=False):
    """ConvTranspose sums, weights [C, K, R, S], no padding."""
    dt = np.int64 if exact else np.float64
    x = np.asarray(x).astype(dt)
    w = np.asarray(w).astype(dt)
    n, c, h, wd = x.shape
    _, k, r, s = w.shape
    out = np.zeros((n, k, (h - 1) * stride[0] + r, (wd - 1) * stride[1] + s), dt)
    for i in range(r):
        for j in range(s):
            out[:, :, i:i + (h - 1) * stride[0] + 1:stride[0], j:j + (wd - 1) * stride[1] + 1:stride[1]] += \
                np.einsum("nchw,ck->nkhw", x, w[:, :, i, j])
    return out


# ---------------------------------------------------------------- SDP chain
def sdp_float(v, steps, operands=()):
    """steps: list of (kind, dict). operands: float arrays broadcastable to v (by step 'operand' index)."""
    v = np.asarray(v, np.float64).copy()
    k = v.shape[1]
    for kind, p in steps:
        if kind == "bias":
            v = v + _per_channel(p["values"], k)
        elif kind == "scale":
            v = v * _per_channel(p["values"], k)
        elif kind == "prelu":
            v = np.where(v < 0, v * _per_channel(p["values"], k), v)
        elif kind == "relu":
            v = np.maximum(v, 0)
        elif kind == "clip":
            v = np.clip(v, p["lo"], p["hi"])
        elif kind == "sigmoid":
            v = 1 / (1 + np.exp(-v))
        elif kind == "tanh":
            v = np.tanh(v)
        else:
            e = np.asarray(operands[p["operand"]], np.float64)
            v = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum,
                 "min": np.minimum}[kind](v, e)
    return v


def divide32(v, e, s):
    """(v << s) / e rounded half away from zero, saturated to int32; e = 0 gives the bound with v's sign."""
    v, e = np.broadcast_arrays(sat32(np.asarray(v, np.int64)), np.asarray(e, np.int64))
    out = np.where(v > 0, 2 ** 31 - 1, np.where(v < 0, -(2 ** 31), 0)).astype(np.int64)
    nz = e != 0
    a, b = np.abs(v[nz] * (1 << s)), np.abs(e[nz])
    q = (2 * a + b) // (2 * b)
    out[nz] = np.where((v[nz] < 0) != (e[nz] < 0), -q, q)
    return sat32(out)


def sdp_int8(v, steps, multiplier, shift, operands=(), lut=None):
    """INT8 chain on int64 values v (int32 range): steps then the output converter, then the LUT."""
    v = np.asarray(v, np.int64).copy()
    k = v.shape[1]
    for kind, p in steps:
        if kind == "bias":
            v = sat32(v + _per_channel(p["values"], k))
        elif kind == "scale":
            v = rescale32(v, _per_channel(p["values"], k), p.get("shift", 0))
        elif kind == "prelu":
            v = np.where(v < 0, rescale32(v, _per_channel(p["values"], k), p.get("shift", 0)), v)
        elif kind == "relu":
            v = np.maximum(v, 0)
        elif kind == "clip":
            v = np.clip(v, p["lo"], p["hi"])
        else:
            e = rescale32(np.asarray(operands[p["operand"]], np.int64), p.get("tm", 1), p.get("ts", 0))
            if kind == "add":
                v = sat32(v + e)
            elif kind == "sub":
                v = sat32(v - e)
            elif kind == "mul":
                v = rescale32(v, e, p.get("shift", 0))
            elif kind == "div":
                v = divide32(v, e, p.get("shift", 0))
            elif kind == "max":
                v = np.maximum(v, e)
            else:
                v = np.minimum(v, e)
    q = sat8(rshift_rhaz(v * _per_channel(multiplier, k), _per_channel(shift, k)))
    if lut is not None:
        q = lut[q.astype(np.int64) + 128]
    return q


# ---------------------------------------------------------------- other ops
def pool(x, kind, kernel, stride, pads, exclude_padding=False, int8=False):
    n, c, h, w = x.shape
    pt, pl, pb, pr = pads
    oh = (h + pt + pb - kernel[0]) // stride[0] + 1
    ow = (w + pl + pr - kernel[1]) // stride[1] + 1
    out = np.zeros((n, c, oh, ow), np.int64 if int8 else np.float64)
    xv = x.astype(np.int64 if int8 else np.float64)
    for i in range(oh):
        h0 = i * stride[0] - pt
        hb, he = max(h0, 0), min(h0 + kernel[0], h)
        for j in range(ow):
            w0 = j * stride[1] - pl
            wb, we = max(w0, 0), min(w0 + kernel[1], w)
            win = xv[:, :, hb:he, wb:we]
            if kind == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
                continue
            kh = he - hb if exclude_padding else kernel[0]
            kw = we - wb if exclude_padding else kernel[1]
            s = win.sum(axis=(2, 3))
            if int8:
                s = rshift_rhaz(s * q16_reciprocal(kw), 16)
                out[:, :, i, j] = rshift_rhaz(s * q16_reciprocal(kh), 16)
            else:
                out[:, :, i, j] = s / (kh * kw)
    return sat8(out) if int8 else out


def lrn(x, size, alpha, beta, bias):
    x = x.astype(np.float64)
    c = x.shape[1]
    sq = np.zeros_like(x)
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    for i in range(c):
        sq[:, i] = (x[:, max(0, i - before):min(c, i + after + 1)] ** 2).sum(axis=1)
    return x / (bias + alpha / size * sq) ** beta


def _nearest_index(o, s, n, rule):
    if rule == 0:
        src = o // s
    elif rule == 1:
        src = -((-(2 * o + 1 - 2 * s)) // (2 * s))  # ceil
    else:
        src = (2 * o + 1) // (2 * s)
    return np.clip(src, 0, n - 1)


def resize(x, mode, scale, rule=0, int8=False):
    n, c, h, w = x.shape
    sh, sw = scale
    oh, ow = h * sh, w * sw
    if mode == "nearest":
        hi = _nearest_index(np.arange(oh), sh, h, rule)
        wi = _nearest_index(np.arange(ow), sw, w, rule)
        return x[:, :, hi][:, :, :, wi]

    def taps(o, s, size):
        den = 2 * s
        num = np.maximum(2 * o + 1 - s, 0)
        x0, frac = num // den, num % den
        last = x0 >= size - 1
        x0 = np.where(last, size - 1, x0)
        frac = np.where(last, 0, frac)
        return x0, np.minimum(x0 + 1, size - 1), frac, den

    h0, h1, fh, dh = taps(np.arange(oh), sh, h)
    w0, w1, fw, dw = taps(np.arange(ow), sw, w)
    xv = x.astype(np.int64 if int8 else np.float64)
    wy0, wy1 = (dh - fh)[:, None], fh[:, None]
    wx0, wx1 = (dw - fw)[None, :], fw[None, :]
    acc = (wy0 * wx0 * xv[:, :, h0][:, :, :, w0] + wy0 * wx1 * xv[:, :, h0][:, :, :, w1] +
           wy1 * wx0 * xv[:, :, h1][:, :, :, w0] + wy1 * wx1 * xv[:, :, h1][:, :, :, w1])
    if int8:
        d = dh * dw
        return sat8(np.where(acc >= 0, (2 * acc + d) // (2 * d), -((-2 * acc + d) // (2 * d))))
    return acc / (dh * dw)


def softmax(x, axis):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# ---------------------------------------------------------------- comparisons
def rel_err(got, ref):
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    return np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30)


def rel_l2(got, ref):
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    return np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)
