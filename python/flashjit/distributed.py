"""Context parallelism on torch.distributed: ring attention.

Each rank of a process group holds a chunk of every sequence (its queries, keys and values,
[batch, chunk, heads, head_dim]): a contiguous one, or two (zigzag) that balance a causal mask.
The key/value chunks travel once around the ring, each hop a batch of isend/irecv pairs that
runs while the rank attends to the chunk it holds; the partial
states (output and natural-log LSE) merge exactly with merge_states, the LSE combiner. The
backward sends the chunks around again with their dK/dV sums, so each chunk's gradients arrive
back at its own rank after a full turn. Works with NCCL on GPUs and gloo on CPUs (where tensors
of 16-bit floats travel as float16 bits: Debian's torch 1.13 gloo sends no bfloat16)."""

import torch
import torch.distributed as dist

from .attention import attention, attention_backward
from .merge import merge_states


def _wire(t: torch.Tensor, group) -> torch.Tensor:
    """t as the ring sends it: bfloat16 as float16 bits on gloo, which cannot send it."""
    if t.dtype == torch.bfloat16 and dist.get_backend(group) == "gloo":
        return t.view(torch.float16)
    return t


class _Ring:
    """The ring of `group`: this rank's neighbours and a nonblocking exchange with them."""

    def __init__(self, group):
        self.group = group
        self.size = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        global_rank = (lambda r: r) if group is None else (
            lambda r: dist.distributed_c10d._get_global_rank(group, r))
        self.next = global_rank((self.rank + 1) % self.size)
        self.prev = global_rank((self.rank - 1) % self.size)

    def start(self, tensors):
        """Sends `tensors` to the next rank and receives as many, alike, from the previous one;
        returns (received, wait)."""
        received = [torch.empty_like(t) for t in tensors]
        operations = []
        for t, r in zip(tensors, received):
            operations.append(dist.P2POp(dist.isend, _wire(t.contiguous(), self.group), self.next,
                                         group=self.group))
            operations.append(dist.P2POp(dist.irecv, _wire(r, self.group), self.prev,
                                         group=self.group))
        # One batch: NCCL must progress a rank's sends and receives together (with two ranks,
        # each sending to the peer it receives from, sends issued alone would wait on each
        # other's receives).
        requests = dist.batch_isend_irecv(operations)

        def wait():
            for request in requests:
                request.wait()
            return received

        return wait


def _step(rank: int, source: int, causal: bool, zigzag: bool):
    """What queries of `rank` do with the keys of `source`'s chunk: None (they see none of
    them), or (query rows, key rows, causal): the attention call to make on those rows of this
    rank's queries and the received keys (None: all of them, 0 or 1: that half), `causal` only
    for a rank's own chunk.

    Zigzag: rank r holds chunks r and 2·size−1−r of 2·size. Of a rank s before it, both query
    halves see the first key half (chunk s) whole and the second (2·size−1−s) not at all; of a
    rank after it, only the second query half sees keys, both halves of them whole; a rank's own
    pair, concatenated, is exactly a causal call."""
    if not causal:
        return None, None, False
    if source == rank:
        return None, None, True
    if not zigzag:
        return (None, None, False) if source < rank else None
    return (None, 0, False) if source < rank else (1, None, False)


def _rows(t: torch.Tensor, half, dim: int = 1) -> torch.Tensor:
    """t's rows along `dim`: all of them (half None), or the first or second half (0, 1)."""
    if half is None:
        return t
    size = t.shape[dim] // 2
    return t.narrow(dim, half * size, size)


def _merge(o0, lse0, o, lse):
    """Two partial states of the same rows merged (o [b, s, h, d] float32, lse [b, h, s])."""
    b, s, h, d = o.shape
    v = torch.stack([o0, o.float()], dim=2)  # [b, s, 2, h, d]
    l = torch.stack([lse0, lse], dim=1).permute(0, 3, 1, 2)  # [b, s, 2, h]
    merged_o, merged_lse = merge_states(v.reshape(b * s, 2, h, d), l.reshape(b * s, 2, h))
    return merged_o.reshape(b, s, h, d), merged_lse.reshape(b, s, h).permute(0, 2, 1)


def _forward(q, k, v, causal, scale, ring, zigzag):
    o_all = lse_all = None
    current = (k, v)
    for step in range(ring.size):
        wait = ring.start(current) if step + 1 < ring.size else None
        plan = _step(ring.rank, (ring.rank - step) % ring.size, causal, zigzag)
        if plan is not None:
            rows, keys, masked = plan
            o, lse = attention(_rows(q, rows), *(_rows(t, keys) for t in current),
                               causal=masked, scale=scale, return_lse=True)
            if o_all is None:  # the first step is this rank's own chunk: every query row
                o_all, lse_all = o.float(), lse.contiguous()
            else:
                o_rows, lse_rows = _merge(_rows(o_all, rows), _rows(lse_all, rows, 2), o,
                                          lse.contiguous())
                _rows(o_all, rows).copy_(o_rows)
                _rows(lse_all, rows, 2).copy_(lse_rows)
        if wait is not None:
            current = tuple(wait())
    return o_all.to(q.dtype), lse_all.contiguous()


def _backward(dout, q, k, v, o, lse, causal, scale, ring, zigzag):
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    current = (k, v, torch.zeros(k.shape, dtype=torch.float32, device=k.device),
               torch.zeros(v.shape, dtype=torch.float32, device=v.device))
    for step in range(ring.size):
        plan = _step(ring.rank, (ring.rank - step) % ring.size, causal, zigzag)
        k_s, v_s, dk_s, dv_s = current
        if plan is not None:
            rows, keys, masked = plan
            dq_i, dk_i, dv_i = attention_backward(
                _rows(dout, rows).contiguous(), _rows(q, rows), _rows(k_s, keys),
                _rows(v_s, keys), _rows(o, rows), _rows(lse, rows, 2).contiguous(),
                causal=masked, scale=scale)
            _rows(dq, rows).add_(dq_i.float())
            _rows(dk_s, keys).add_(dk_i.float())
            _rows(dv_s, keys).add_(dv_i.float())
        # The chunk and its sums so far go on; after a whole turn each chunk is home.
        current = tuple(ring.start((k_s, v_s, dk_s, dv_s))())
    _, _, dk, dv = current
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, scale, group, zigzag):
        ring = _Ring(group)
        o, lse = _forward(q, k, v, causal, scale, ring, zigzag)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.extra = (causal, scale, group, zigzag)
        return o

    @staticmethod
    def backward(ctx, dout):
        q, k, v, o, lse = ctx.saved_tensors
        causal, scale, group, zigzag = ctx.extra
        grads = _backward(dout.contiguous(), q, k, v, o, lse, causal, scale, _Ring(group), zigzag)
        return (*grads, None, None, None, None)


def ring_attention(q, k, v, *, causal: bool = False, group=None, scale=None,
                   zigzag: bool = False):
    """Attention over a sequence split in chunks across the ranks of `group` (the default
    group when None): q, k and v are this rank's chunk, [batch, chunk, heads, head_dim] torch
    tensors (float16 or bfloat16; chunks of one length on every rank), on the GPU with NCCL or
    in host memory with gloo. Rank r holds chunk r of `group`'s size, or with `zigzag` chunks r
    and 2·size−1−r of twice as many, concatenated (shard() cuts either), which gives every rank
    the same share of a causal mask's work. Returns this rank's output chunk, as attention()
    over the whole sequence would give it; `causal` masks keys after each query in the whole
    sequence. Differentiable: the backward sends dK and dV around the ring back to the ranks
    holding their chunks. Every rank of the group must call it (with NCCL, after
    torch.cuda.set_device to the rank's GPU)."""
    if not dist.is_initialized():
        raise ValueError("'group': torch.distributed is not initialized "
                         "(torch.distributed.init_process_group first)")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"'{name}' must be a torch tensor, not {type(t).__name__}")
    if q.shape[1] != k.shape[1]:
        raise ValueError(f"'k' holds {k.shape[1]} keys but 'q' {q.shape[1]} queries: every "
                         "rank's chunk is one length of the sequence")
    if zigzag and q.shape[1] % 2:
        raise ValueError(f"'q' holds {q.shape[1]} rows: with zigzag a rank's chunk is two "
                         "equal halves")
    return _RingAttention.apply(q, k, v, bool(causal), scale, group, bool(zigzag))


def _pieces(length: int, world_size: int, zigzag: bool, name: str) -> int:
    count = 2 * world_size if zigzag else world_size
    if world_size < 1 or length % count:
        raise ValueError(f"'{name}': {length} rows do not split into {count} equal chunks "
                         f"(world_size {world_size}{', zigzag' if zigzag else ''})")
    return length // count


def shard(x: torch.Tensor, rank: int, world_size: int, *, zigzag: bool = False,
          dim: int = 1) -> torch.Tensor:
    """Rank `rank`'s chunk of a whole sequence x (along `dim`) for ring_attention: chunk rank
    of world_size, or with `zigzag` chunks rank and 2·world_size−1−rank of twice as many,
    concatenated."""
    size = _pieces(x.shape[dim], world_size, zigzag, "x")
    if not 0 <= rank < world_size:
        raise ValueError(f"'rank' must be in [0, {world_size}), not {rank}")
    if not zigzag:
        return x.narrow(dim, rank * size, size)
    return torch.cat([x.narrow(dim, rank * size, size),
                      x.narrow(dim, (2 * world_size - 1 - rank) * size, size)], dim=dim)


def unshard(chunks, *, zigzag: bool = False, dim: int = 1) -> torch.Tensor:
    """The whole sequence from every rank's chunk (chunks[r] from rank r), undoing shard()."""
    chunks = list(chunks)
    if not zigzag:
        return torch.cat(chunks, dim=dim)
    half = _pieces(chunks[0].shape[dim], 1, True, "chunks")
    first = [c.narrow(dim, 0, half) for c in chunks]
    second = [c.narrow(dim, half, half) for c in reversed(chunks)]
    return torch.cat(first + second, dim=dim)
