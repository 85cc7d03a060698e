"""The fp8 forward (FlashAttention-3's contract: e4m3 q, k and v with descale factors, o bf16)
from Python on the CPU emulator as an sm_89 (a process of its own: the emulator's GPU is chosen
when it is first opened), with numpy's uint8 codes through attention() and flash_attn_func,
against a float64 reference over the dequantized inputs; and its bad arguments named on the
default sm_80 emulator; with PyTorch 2.4 or later, torch.compile(fullgraph=True) over a
float8_e4m3fn call, through its custom operator."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import flashjit

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

SCRIPT = textwrap.dedent("""
    import numpy as np
    import flashjit
    from flashjit.flash_attn_interface import flash_attn_func

    def codes(values):  # e4m3 codes, rounded to nearest (the library's rounding)
        table = np.array([flashjit_value(c) for c in range(256)])
        finite = np.array([(c & 0x7F) != 0x7F for c in range(256)])
        candidates = np.where(finite)[0]
        nearest = np.abs(values[..., None] - table[candidates]).argmin(axis=-1)
        return candidates[nearest].astype(np.uint8)

    def flashjit_value(c):
        sign = -1.0 if c & 0x80 else 1.0
        e, m = (c >> 3) & 0xF, c & 7
        return sign * (m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))

    def values(c, factors):  # codes times each (batch, kv head)'s factor, float64
        table = np.array([flashjit_value(x) for x in range(256)])
        return table[c] * factors[:, None, :, None]

    rng = np.random.default_rng(3)
    b, sq, sk, hq, hk, d = 2, 19, 40, 4, 2, 64
    q, k, v = (codes(rng.normal(size=(b, s, h, d))) for s, h in ((sq, hq), (sk, hk), (sk, hk)))
    qs, ks, vs = (rng.uniform(0.5, 2.0, size=(b, hk)).astype(np.float32) for _ in range(3))
    flashjit.warm(q, k, v, causal=True, backward=False)  # the kernel the call below runs
    o, lse = flashjit.attention(q, k, v, causal=True, q_descale=qs, k_descale=ks, v_descale=vs,
                                return_lse=True)
    o2 = flash_attn_func(q, k, v, causal=True, q_descale=qs, k_descale=ks, v_descale=vs)

    group = hq // hk
    qv = values(q, np.repeat(qs, group, axis=1))
    kv_, vv = (np.repeat(values(t, f), group, axis=2) for t, f in ((k, ks), (v, vs)))
    s = np.einsum("bihd,bjhd->bhij", qv, kv_) / np.sqrt(d)
    i, j = np.arange(sq)[:, None], np.arange(sk)[None, :]
    s = np.where(j <= i + sk - sq, s, -np.inf)
    lse_ref = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1)) + s.max(-1)
    o_ref = np.einsum("bhij,bjhd->bihd", np.exp(s - lse_ref[..., None]), vv)
    error = np.abs(o - o_ref).max() / np.abs(o_ref).max()
    print("DTYPE", o.dtype, o.shape)
    print("ERROR", error, np.abs(lse - lse_ref).max(), np.abs(o2 - o).max())
""")


def test_fp8_forward_from_numpy_on_an_emulated_sm89():
    env = dict(os.environ, FLASHJIT_EMULATED_ARCH="sm_89")
    run = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                         timeout=900, check=False)
    assert run.returncode == 0, run.stderr
    lines = {line.split(" ", 1)[0]: line.split()[1:] for line in run.stdout.splitlines()}
    assert lines["DTYPE"] == ["float32", "(2,", "19,", "4,", "64)"], run.stdout  # bf16, widened
    relative, lse_error, twin = (float(x) for x in lines["ERROR"])
    assert relative < 0.05, run.stdout  # P rounded to e4m3: about 2^-5 relative per probability
    assert lse_error < 1e-3, run.stdout
    assert twin == 0.0, run.stdout  # flash_attn_func is the same call


def test_fp8_forward_bad_arguments_are_named():
    q = np.zeros((1, 8, 2, 64), dtype=np.uint8)
    k = np.zeros((1, 8, 1, 64), dtype=np.uint8)
    with pytest.raises(ValueError, match="sm_89"):  # the default emulator is an sm_80
        flashjit.attention(q, k, k)
    with pytest.raises(ValueError, match="k_descale"):
        flashjit.attention(q, k, k, k_descale=np.ones(3, dtype=np.float32))
    with pytest.raises(ValueError, match="q_descale"):  # factors for a 16-bit call
        h = np.zeros((1, 8, 2, 64), dtype=np.float16)
        flashjit.attention(h, h, h, q_descale=np.ones(1, dtype=np.float32))
    with pytest.raises(ValueError, match="dropout_p"):
        flashjit.attention(q, k, k, dropout_p=0.1)
    with pytest.raises(ValueError, match="backward"):  # warm: the fp8 forward has no backward
        flashjit.warm(q, k, k)
    with pytest.raises(ValueError, match="sm_89"):
        flashjit.warm(q, k, k, backward=False)


COMPILE_SCRIPT = textwrap.dedent("""
    import torch
    import flashjit
    from flashjit.flash_attn_interface import flash_attn_func

    g = torch.Generator().manual_seed(5)
    def codes(*shape):  # e4m3 codes of finite values (0x7F and 0xFF are NaN)
        c = torch.randint(0, 0x7E, shape, generator=g, dtype=torch.uint8)
        sign = torch.randint(0, 2, shape, generator=g, dtype=torch.uint8) << 7
        return (c | sign).view(torch.float8_e4m3fn)

    q, k, v = codes(1, 20, 4, 64), codes(1, 30, 2, 64), codes(1, 30, 2, 64)
    qs, ks, vs = (torch.rand(1, 2, generator=g) + 0.5 for _ in range(3))
    # (opcheck's schema test multiplies the inputs, which CPU torch lacks for float8: the
    # codes as uint8, which the operator takes too)
    as_bytes = [t.view(torch.uint8) for t in (q, k, v)]
    torch.library.opcheck(torch.ops.flashjit.attention_forward_fp8.default,
                          (*as_bytes, True, -1, -1, 0.0, None, None, qs, ks, vs))
    def call(q, k, v, qs, ks, vs):
        return flash_attn_func(q, k, v, causal=True, q_descale=qs, k_descale=ks, v_descale=vs)
    eager = call(q, k, v, qs, ks, vs)
    compiled = torch.compile(call, backend="aot_eager", fullgraph=True)(q, k, v, qs, ks, vs)
    print("SAME", eager.dtype, torch.equal(eager, compiled))
""")


@pytest.mark.skipif(torch is None or not hasattr(torch.library, "custom_op") or
                    not hasattr(torch, "float8_e4m3fn"),
                    reason="PyTorch before 2.4 has no torch.library.custom_op")
def test_fp8_forward_traces_in_one_graph_on_an_emulated_sm89():
    # torch.compile(fullgraph=True) over flash_attn_func with float8_e4m3fn inputs: the call
    # goes through flashjit::attention_forward_fp8 (opcheck'd) with eager's bits.
    env = dict(os.environ, FLASHJIT_EMULATED_ARCH="sm_89")
    run = subprocess.run([sys.executable, "-c", COMPILE_SCRIPT], env=env, capture_output=True,
                         text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stderr
    assert "SAME torch.bfloat16 True" in run.stdout, run.stdout
