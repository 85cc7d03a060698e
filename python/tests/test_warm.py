"""flashjit.warm: the kernels of a call and of its backward made ready before the first call,
so that the call compiles nothing; without it, a differentiable call's first forward makes its
backward's kernels ready with its own (both seen in the library's compile notices on the
emulator, whose kernels with modifiers are compiled on first use); bad arguments named before
anything compiles."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import flashjit

SCRIPT = textwrap.dedent("""
    import logging
    import torch
    import flashjit

    compiled = []
    class Notices(logging.Handler):
        def emit(self, record):
            if "compiling" in record.getMessage():
                compiled.append(record.getMessage().split()[1])
    logging.getLogger("flashjit").addHandler(Notices())
    logging.getLogger("flashjit").setLevel(logging.INFO)

    q, k, v = (torch.randn(1, 40, 2, 32).to(torch.bfloat16).requires_grad_() for _ in range(3))
    flashjit.warm(q, k, v, causal=True, score_mod=lambda s, b, h, i, j: s * 0.625)
    print("WARMED", sorted(compiled))
    compiled.clear()
    o = flashjit.attention(q, k, v, causal=True, score_mod=lambda s, b, h, i, j: s * 0.625)
    o.float().sum().backward()
    print("CALLED", sorted(compiled))

    # Without warm: a differentiable call's first forward makes its backward's kernels ready
    # with its own, so the backward compiles nothing.
    compiled.clear()
    o = flashjit.attention(q, k, v, score_mod=lambda s, b, h, i, j: s * 0.5)
    print("FORWARD", sorted(compiled))
    compiled.clear()
    o.float().sum().backward()
    print("BACKWARD", sorted(compiled))

    # Dropout's kernels: warmed for any seed (the mask is not compiled in).
    flashjit.warm(q, k, v, dropout_p=0.1)
    compiled.clear()
    o = flashjit.attention(q, k, v, dropout_p=0.1, dropout_seed=3)
    o.float().sum().backward()
    print("DROPOUT", sorted(compiled))
""")


def test_warm_and_a_first_forward_make_the_backward_s_kernels_ready(tmp_path):
    env = dict(os.environ, FLASHJIT_CACHE_DIR=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                         timeout=900, check=False)
    assert run.returncode == 0, run.stderr
    lines = {line.split(" ", 1)[0]: line for line in run.stdout.splitlines()}
    warmed = lines["WARMED"]
    assert "attention_forward" in warmed and "attention_backward" in warmed, warmed
    assert lines["CALLED"] == "CALLED []", run.stdout  # the call and its backward compiled nothing
    assert "attention_backward" in lines["FORWARD"], run.stdout
    assert lines["BACKWARD"] == "BACKWARD []", run.stdout
    assert lines["DROPOUT"] == "DROPOUT []", run.stdout


def test_warm_names_bad_arguments():
    q = np.zeros((1, 8, 2, 32), dtype=np.float32)
    with pytest.raises(ValueError, match="'q' must be float16 or bfloat16"):
        flashjit.warm(q, q, q)
    q = q.astype(np.float16)
    with pytest.raises(ValueError, match="window"):
        flashjit.warm(q, q, q, window=(-3, 0))
    with pytest.raises(ValueError, match="'dropout_p' must be in"):
        flashjit.warm(q, q, q, dropout_p=1.0)
