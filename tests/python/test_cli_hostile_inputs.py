"""The softdla command on hostile or careless input (issue 17): crafted .npy/.npz headers, devices given
as files, garbage option values. Each is exit status 1 with a message naming the file or flag and what
is wrong, never a signal, a huge allocation, or a bare library message ("stoll", "std::bad_alloc")."""
import os
import struct
import subprocess

import numpy as np
import pytest

from sdla_testkit.engine import ROOT

BUILD = os.environ.get("SOFTDLA_BUILD_DIR", os.path.join(ROOT, "build"))
SOFTDLA = os.path.join(BUILD, "softdla")
MODELS = os.path.join(ROOT, "examples", "models")
LOADABLE = os.path.join(MODELS, "bars.loadable")
ONNX = os.path.join(MODELS, "digits.onnx")


def _sanitized():
    try:
        with open(SOFTDLA, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


SANITIZED = _sanitized()


def softdla(*args, timeout=60):
    # A memory cap turns a runaway allocation into a failure of this test rather than of the machine: a
    # data-size limit (not -v: CUDA reserves address space), or under AddressSanitizer (whose shadow memory
    # needs both) its own malloc limit.
    env = dict(os.environ)
    if SANITIZED:
        env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "malloc_limit_mb=4000"]))
        cmd = [SOFTDLA, *map(str, args)]
    else:
        cmd = ["bash", "-c", 'ulimit -d 4000000; exec "$@"', "softdla", SOFTDLA, *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def rejected(r, *words):
    """Exit 1 (not a signal), and the message holds every word."""
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    for w in words:
        assert w in r.stderr, (w, r.stderr)
    for bare in ("stoll", "bad_alloc", "max_size"):
        assert bare not in r.stderr, r.stderr
    return r.stderr


def npy(path, shape, version=1, data=b""):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % shape
    lead = 10 if version == 1 else 12
    header += " " * ((64 - (lead + len(header) + 1) % 64) % 64) + "\n"
    size = struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
    path.write_bytes(b"\x93NUMPY" + bytes([version, 0]) + size + header.encode() + data)
    return path


HOSTILE_NPY = [
    ("(4611686018427387904,)", 1, "is corrupt"),        # 2^62 elements: SIGSEGV before
    ("(1073741824, 1073741824, 4)", 1, "is corrupt"),   # 2^30 x 2^30 x 4: SIGSEGV before
    ("(1, 1, 16, 16)", 9, "version 9.0"),               # accepted before
    ("(4, -1, 16, 16)", 1, "negative dimension"),       # accepted before
    ("(100000000,)", 1, "needs 400000000"),             # more data claimed than present
]


@pytest.mark.parametrize("shape,version,words", HOSTILE_NPY)
def test_run_rejects_hostile_npy(tmp_path, shape, version, words):
    f = npy(tmp_path / "x.npy", shape, version, data=b"\0" * 4096)
    rejected(softdla("run", LOADABLE, "-i", f"images={f}"), str(f), words)


@pytest.mark.parametrize("shape,version,words", HOSTILE_NPY)
def test_calib_data_rejects_hostile_npy(tmp_path, shape, version, words):
    d = tmp_path / "calib"
    d.mkdir()
    f = npy(d / "x.npy", shape, version, data=b"\0" * 4096)
    rejected(softdla("build", "--onnx", ONNX, "--saveEngine", tmp_path / "m.loadable", "--int8", "--calib-data", d),
             str(f), words)


def test_calib_data_rejects_wrapped_zip64_size(tmp_path):
    # A stored .npz entry whose zip64 sizes are near 2^64: "cannot create std::vector larger than max_size()" before.
    name = b"x.npy"
    payload = np.lib.format.magic(1, 0) + b"\x06\x00{}    "
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, 0, 0, 0xFFFFFFFF, 0xFFFFFFFF, len(name), 0) + name
    extra = struct.pack("<HHQQ", 1, 16, 2**64 - 16, 2**64 - 16)
    cd = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 0, 0, 0, 0, 0xFFFFFFFF, 0xFFFFFFFF, len(name),
                     len(extra), 0, 0, 0, 0, 0) + name + extra
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(cd), len(local + payload), 0)
    d = tmp_path / "calib"
    d.mkdir()
    (d / "x.npz").write_bytes(local + payload + cd + eocd)
    rejected(softdla("build", "--onnx", ONNX, "--saveEngine", tmp_path / "m.loadable", "--int8", "--calib-data", d),
             str(d / "x.npz"), "18446744073709551600 bytes")


@pytest.mark.parametrize("args,kind", [
    (["run", "/dev/zero"], "loadable"),
    (["inspect", "/dev/zero"], "loadable"),
    (["run", LOADABLE, "-i", "images=/dev/zero"], "input file"),
    (["build", "--onnx", "/dev/zero", "--saveEngine", "/dev/null", "--fp16"], "ONNX model"),
    (["check", "/dev/zero"], "ONNX model"),
    (["build", "--onnx", ONNX, "--saveEngine", "/dev/null", "--int8", "--calib", "/dev/zero"], "calibration cache"),
])
def test_devices_are_refused_before_reading(args, kind):
    # /dev/zero allocated 1 GB and more, then failed with "std::bad_alloc".
    rejected(softdla(*args, timeout=30), f"{kind} '/dev/zero' is not a regular file")


@pytest.mark.parametrize("shapes,words", [
    ("input:1xabc", "'abc' is not a whole number"),
    ("input:99999999999999999999", "out of range"),
    ("input:1x3x", "dimension 2"),
    ("input:0x3", "out of range (1 to"),
    ("input:-1x3", "out of range (1 to"),
    ("1x3x8x8", "no ':'"),
    (":1x3", "name is empty"),
    ("a:1,a:2", "given twice"),
])
def test_shapes_garbage_says_the_syntax(tmp_path, shapes, words):
    for cmd in (["check", ONNX], ["build", "--onnx", ONNX, "--saveEngine", tmp_path / "m.loadable", "--fp16"]):
        rejected(softdla(*cmd, "--shapes", shapes), "--shapes takes name:DIMxDIMx", "input:1x3x224x224", words)


@pytest.mark.parametrize("args,words", [
    (["run", LOADABLE, "--repeat", "abc"], "--repeat: 'abc' is not a whole number"),
    (["run", LOADABLE, "--repeat", "0"], "--repeat: '0' is out of range (1 to 1000000)"),
    (["run", LOADABLE, "--repeat", "1e9"], "--repeat: '1e9' is not a whole number"),
    (["build", "--onnx", ONNX, "--saveEngine", "/dev/null", "--fp16", "--percentile", "nan"], "--percentile: 'nan' is not a number"),
    (["build", "--onnx", ONNX, "--saveEngine", "/dev/null", "--fp16", "--percentile", "101"], "out of range"),
    (["build", "--onnx", ONNX, "--saveEngine", "/dev/null", "--fp16", "--useDLACore", "-1"], "--useDLACore: '-1' is out of range"),
])
def test_numeric_flags_say_what_they_take(args, words):
    r = softdla(*args)
    assert r.returncode != 0 and r.returncode < 128, (r.returncode, r.stderr)
    assert words in r.stderr, r.stderr


@pytest.mark.parametrize("args", [
    ["build", "--onnx", ONNX, "--saveEngine", "/dev/null", "--fp16", "--layerPrecisions=", "--verbose"],
    ["build", "--onnx", ONNX, "--saveEngine", "/dev/null", "--fp16", "--shapes=", "--verbose"],
    ["check", "--shapes=", ONNX],
    ["run", LOADABLE, "--output-dir=", "--repeat", "2"],
])
def test_empty_option_value_is_refused_not_taken_from_the_next_argument(args):
    """'--flag=' (a script's empty variable): CLI11 alone took the next argument as the value, so
    '--layerPrecisions= --verbose' was read as the spec '--verbose'."""
    r = softdla(*args)
    flag = next(a for a in args if str(a).endswith("="))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert f"{flag} gives the option an empty value" in r.stderr, r.stderr


def test_good_inputs_still_run(tmp_path):
    r = softdla("run", LOADABLE, "-i", f"images={os.path.join(MODELS, 'bars_images.npy')}", "--repeat", "3")
    assert r.returncode == 0, r.stderr
    r = softdla("check", ONNX, "--shapes", "'pixels':1x1x8x8")
    assert r.returncode == 0, r.stderr


def test_build_never_destroys_its_model_nor_claims_a_write_that_failed(tmp_path):
    """--saveEngine equal to --onnx wrote the loadable over the model; a write to a full device printed
    'built' and exited 0."""
    victim = tmp_path / "m.onnx"
    victim.write_bytes(open(ONNX, "rb").read())
    rejected(softdla("build", f"--onnx={victim}", f"--saveEngine={victim}", "--fp16"), "is the ONNX model itself")
    assert victim.read_bytes() == open(ONNX, "rb").read()
    rejected(softdla("build", f"--onnx={ONNX}", f"--saveEngine={tmp_path / 'no' / 'm.loadable'}", "--fp16"),
             "does not exist")
    if os.path.exists("/dev/full"):
        rejected(softdla("build", f"--onnx={ONNX}", "--saveEngine=/dev/full", "--fp16"), "failed writing '/dev/full'")


def test_run_output_files_never_overwrite_each_other(tmp_path):
    """Outputs whose names clean up to one file name ('out:a' and 'out_a') were written over each other."""
    import onnx
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 4, 4]) for n in ("out:a", "out_a")]
    nodes = [helper.make_node("Relu", ["x"], ["out:a"], name="r"),
             helper.make_node("Mul", ["x", "two"], ["out_a"], name="m")]
    two = helper.make_tensor("two", TensorProto.FLOAT, [1], [2.0])
    m = helper.make_model(helper.make_graph(nodes, "g", [x], outs, [two]), opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(m, tmp_path / "m.onnx")
    r = softdla("build", f"--onnx={tmp_path / 'm.onnx'}", "--fp16", f"--saveEngine={tmp_path / 'm.loadable'}")
    assert r.returncode == 0, r.stderr
    xs = np.random.default_rng(0).standard_normal((1, 2, 4, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", xs)
    r = softdla("run", tmp_path / "m.loadable", "-i", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    assert "wrote output 'out:a' to" in r.stdout and "out_a_2.npy" in r.stdout, r.stdout
    assert np.allclose(np.load(tmp_path / "o" / "out_a.npy"), np.maximum(xs, 0), atol=1e-3)
    assert np.allclose(np.load(tmp_path / "o" / "out_a_2.npy"), 2 * xs, atol=1e-2)
    (tmp_path / "afile").write_text("")
    rejected(softdla("run", tmp_path / "m.loadable", "-i", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "afile"),
             "cannot be made a directory")


def test_labels_take_numpys_default_integers(tmp_path):
    """--labels refused int64 (NumPy's default integer, what argmax returns), naming int8/uint8 instead."""
    labels = tmp_path / "labels.npy"
    np.save(labels, np.zeros(np.load(os.path.join(MODELS, "bars_images.npy")).shape[0], np.int64))
    r = softdla("run", LOADABLE, "-i", f"images={os.path.join(MODELS, 'bars_images.npy')}", "--labels", labels)
    assert r.returncode == 0 and "top-1 accuracy" in r.stdout, r.stderr


@pytest.mark.parametrize("args", [["run"], ["run", "--bogus", "x"], ["build", "--onnx"], ["inspect"]])
def test_usage_errors_read_as_every_other_error(args):
    """Usage errors exited with CLI11's 105-109 and no 'softdla: error:' prefix, unlike every other error."""
    r = softdla(*args)
    assert r.returncode == 2 and r.stderr.startswith("softdla: error: ") and f"softdla {args[0]} --help" in r.stderr, (
        r.returncode, r.stderr)
