"""test_int8_pipelines_match_cpu's byte comparison in one process, for running under compute-sanitizer
(one process: the sanitizer's start-up is paid once). The pipeline is chosen by the environment as in
that test (SOFTDLA_CUDA_IGEMM, _ADD, _REQUANT, _TRIM).

    compute-sanitizer --tool memcheck python3 scripts/sanpipe.py 1,2,8 k_tile_block,wide_block,residual_tail,resnet_like
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import test_cuda_backend as t  # noqa: E402

splits, names = sys.argv[1].split(","), sys.argv[2].split(",")
nets = {n: getattr(t, n, None) or getattr(t.nets, n) for n in names}
with tempfile.TemporaryDirectory() as tmp:
    for s in splits:
        os.environ["SOFTDLA_CUDA_SPLITK"] = s
        for i, (name, net) in enumerate(nets.items()):
            d = os.path.join(tmp, s + name)
            os.makedirs(d)
            t.assert_int8_same_on_both_backends(net, 17 + i, d)
            print("same bytes", s, name, flush=True)
