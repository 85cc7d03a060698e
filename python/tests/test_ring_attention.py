"""flashjit.distributed.ring_attention with 2 and 4 gloo processes on the CPU emulator: each
rank's output chunk and gradients against one-process attention over the whole sequence."""

import os
import socket
import tempfile

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import flashjit
import flashjit.distributed

BATCH, SEQLEN, HEADS_Q, HEADS_KV, HEAD_DIM = 1, 96, 4, 2, 64


def full_inputs(dtype):
    g = torch.Generator().manual_seed(21)
    shape_q = (BATCH, SEQLEN, HEADS_Q, HEAD_DIM)
    shape_kv = (BATCH, SEQLEN, HEADS_KV, HEAD_DIM)
    return (torch.randn(shape_q, generator=g).to(dtype), torch.randn(shape_kv, generator=g).to(dtype),
            torch.randn(shape_kv, generator=g).to(dtype), torch.randn(shape_q, generator=g).to(dtype))


def worker(rank, world, port, dtype, causal, out_dir):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        q, k, v, dout = full_inputs(dtype)
        chunk = SEQLEN // world
        rows = slice(rank * chunk, (rank + 1) * chunk)
        leaves = [t[:, rows].clone().requires_grad_() for t in (q, k, v)]
        o = flashjit.distributed.ring_attention(*leaves, causal=causal)
        o.backward(dout[:, rows])
        torch.save({"o": o.detach(), "grads": [t.grad for t in leaves]},
                   os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("causal", [False, True])
def test_ring_attention_matches_one_process(world, causal):
    dtype = torch.bfloat16 if world == 4 else torch.float16
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(worker, args=(world, free_port(), dtype, causal, out_dir), nprocs=world)
        results = [torch.load(os.path.join(out_dir, f"rank{r}.pt")) for r in range(world)]
    q, k, v, dout = full_inputs(dtype)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    o = flashjit.attention(*leaves, causal=causal)
    o.backward(dout)
    ring_o = torch.cat([r["o"] for r in results], dim=1)
    bar = 2e-2 if dtype == torch.bfloat16 else 4e-3
    def close(a, b):
        a, b = a.double(), b.double()
        return float((a - b).norm() / b.norm()) < bar
    assert ring_o.dtype == dtype and close(ring_o, o.detach())
    for i, leaf in enumerate(leaves):
        ring_grad = torch.cat([r["grads"][i] for r in results], dim=1)
        assert close(ring_grad, leaf.grad), ("dq", "dk", "dv")[i]


def test_ring_attention_needs_an_initialized_group():
    q = torch.zeros(1, 16, 2, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="'group'"):
        flashjit.distributed.ring_attention(q, q, q)
