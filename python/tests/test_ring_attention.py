"""flashjit.distributed.ring_attention with 2 and 4 gloo processes on the CPU emulator (and with
NCCL on up to 4 GPUs where a machine has 2 or more), in contiguous and zigzag chunks: each
rank's output chunk and gradients against one-process attention over the whole sequence."""

import os
import tempfile

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


def worker(rank, world, dtype, causal, zigzag, out_dir, backend="gloo"):
    """One rank: its chunks through ring_attention, in host memory on gloo or on GPU `rank`
    with NCCL; saves its output and gradients (in host memory) for the test to compare."""
    device = "cpu"
    if backend == "nccl":
        device = f"cuda:{rank}"
        torch.cuda.set_device(rank)
    # A file store, not TCP: PyTorch 2.4 and later default the TCP store to libuv, which
    # Debian's builds lack.
    dist.init_process_group(backend, init_method=f"file://{out_dir}/store", rank=rank,
                            world_size=world)
    try:
        q, k, v, dout = full_inputs(dtype)
        mine = lambda t: flashjit.distributed.shard(t, rank, world, zigzag=zigzag).to(device)
        leaves = [mine(t).clone().requires_grad_() for t in (q, k, v)]
        o = flashjit.distributed.ring_attention(*leaves, causal=causal, zigzag=zigzag)
        o.backward(mine(dout))
        torch.save({"o": o.detach().cpu(), "grads": [t.grad.cpu() for t in leaves]},
                   os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world, causal, zigzag", [
    (2, False, False), (2, True, False), (4, False, False), (4, True, False),
    (2, True, True), (4, True, True), (2, False, True)])
def test_ring_attention_matches_one_process(world, causal, zigzag):
    check_against_one_process(world, causal, zigzag, "gloo")


GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.skipif(GPUS < 2 or not dist.is_nccl_available(), reason="needs 2 GPUs and NCCL")
@pytest.mark.parametrize("causal, zigzag", [(False, False), (True, False), (True, True)])
def test_ring_attention_over_nccl_matches_one_process(causal, zigzag):
    check_against_one_process(min(GPUS, 4), causal, zigzag, "nccl")


def check_against_one_process(world, causal, zigzag, backend):
    """world ranks of `backend` against attention() over the whole sequence in one process."""
    dtype = torch.bfloat16 if world == 4 else torch.float16
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(worker, args=(world, dtype, causal, zigzag, out_dir, backend), nprocs=world)
        results = [torch.load(os.path.join(out_dir, f"rank{r}.pt")) for r in range(world)]
    q, k, v, dout = full_inputs(dtype)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    o = flashjit.attention(*leaves, causal=causal)
    o.backward(dout)
    whole = lambda chunks: flashjit.distributed.unshard(chunks, zigzag=zigzag)
    ring_o = whole([r["o"] for r in results])
    bar = 2e-2 if dtype == torch.bfloat16 else 4e-3
    def close(a, b):
        a, b = a.double(), b.double()
        return float((a - b).norm() / b.norm()) < bar
    assert ring_o.dtype == dtype and close(ring_o, o.detach())
    for i, leaf in enumerate(leaves):
        ring_grad = whole([r["grads"][i] for r in results])
        assert close(ring_grad, leaf.grad), ("dq", "dk", "dv")[i]


def test_ring_attention_needs_an_initialized_group():
    q = torch.zeros(1, 16, 2, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="'group'"):
        flashjit.distributed.ring_attention(q, q, q)


@pytest.mark.parametrize("zigzag", [False, True])
def test_shard_and_unshard(zigzag):
    x = torch.arange(2 * 24).reshape(2, 24)
    chunks = [flashjit.distributed.shard(x, r, 3, zigzag=zigzag) for r in range(3)]
    if zigzag:  # rank 0 holds chunks 0 and 5 of six
        assert chunks[0][0].tolist() == [0, 1, 2, 3, 20, 21, 22, 23]
    else:
        assert chunks[0][0].tolist() == list(range(8))
    assert torch.equal(flashjit.distributed.unshard(chunks, zigzag=zigzag), x)
    with pytest.raises(ValueError, match="'x'"):
        flashjit.distributed.shard(x[:, :23], 0, 3, zigzag=zigzag)
