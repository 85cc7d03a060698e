"""Context parallelism on torch.distributed: ring attention.

Each rank of a process group holds a contiguous chunk of every sequence (its queries, keys and
values, [batch, chunk, heads, head_dim]). The key/value chunks travel once around the ring,
each hop an isend/irecv pair that runs while the rank attends to the chunk it holds; the partial
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
        requests = []
        for t, r in zip(tensors, received):
            requests.append(dist.isend(_wire(t.contiguous(), self.group), self.next,
                                       group=self.group))
            requests.append(dist.irecv(_wire(r, self.group), self.prev, group=self.group))

        def wait():
            for request in requests:
                request.wait()
            return received

        return wait


def _visibility(rank: int, source: int, causal: bool):
    """How queries of chunk `rank` see keys of chunk `source`: None (not at all), "full" or
    "causal" (the same chunk's diagonal)."""
    if not causal or source < rank:
        return "full"
    return "causal" if source == rank else None


def _merge(state, o, lse):
    """The running (o, lse) merged with a new partial state (o [b, s, h, d], lse [b, h, s])."""
    if state is None:
        return o.float(), lse
    o0, lse0 = state
    b, s, h, d = o.shape
    v = torch.stack([o0.float(), o.float()], dim=2)  # [b, s, 2, h, d]
    l = torch.stack([lse0, lse], dim=1).permute(0, 3, 1, 2)  # [b, s, 2, h]
    merged_o, merged_lse = merge_states(v.reshape(b * s, 2, h, d), l.reshape(b * s, 2, h))
    return merged_o.reshape(b, s, h, d), merged_lse.reshape(b, s, h).permute(0, 2, 1)


def _forward(q, k, v, causal, scale, ring):
    state = None
    current = (k, v)
    for step in range(ring.size):
        wait = ring.start(current) if step + 1 < ring.size else None
        source = (ring.rank - step) % ring.size
        seen = _visibility(ring.rank, source, causal)
        if seen is not None:
            o, lse = attention(q, *current, causal=seen == "causal", scale=scale, return_lse=True)
            state = _merge(state, o, lse.contiguous())
        if wait is not None:
            current = tuple(wait())
    o, lse = state
    return o.to(q.dtype), lse.contiguous()


def _backward(dout, q, k, v, o, lse, causal, scale, ring):
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    current = (k, v, torch.zeros(k.shape, dtype=torch.float32, device=k.device),
               torch.zeros(v.shape, dtype=torch.float32, device=v.device))
    for step in range(ring.size):
        source = (ring.rank - step) % ring.size
        seen = _visibility(ring.rank, source, causal)
        k_s, v_s, dk_s, dv_s = current
        if seen is not None:
            dq_i, dk_i, dv_i = attention_backward(dout, q, k_s, v_s, o, lse,
                                                  causal=seen == "causal", scale=scale)
            dq += dq_i.float()
            dk_s = dk_s + dk_i.float()
            dv_s = dv_s + dv_i.float()
        # The chunk and its sums so far go on; after a whole turn each chunk is home.
        current = tuple(ring.start((k_s, v_s, dk_s, dv_s))())
    _, _, dk, dv = current
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, scale, group):
        ring = _Ring(group)
        o, lse = _forward(q, k, v, causal, scale, ring)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.extra = (causal, scale, group)
        return o

    @staticmethod
    def backward(ctx, dout):
        q, k, v, o, lse = ctx.saved_tensors
        causal, scale, group = ctx.extra
        grads = _backward(dout.contiguous(), q, k, v, o, lse, causal, scale, _Ring(group))
        return (*grads, None, None, None)


def ring_attention(q, k, v, *, causal: bool = False, group=None, scale=None):
    """Attention over a sequence split in contiguous chunks across the ranks of `group` (the
    default group when None), rank r holding chunk r: q, k and v are this rank's chunk,
    [batch, chunk, heads, head_dim] torch tensors (float16 or bfloat16; chunks of one length on
    every rank), on the GPU with NCCL or in host memory with gloo. Returns this rank's output
    chunk, as attention() over the whole sequence would give it; `causal` masks keys after each
    query in the whole sequence. Differentiable: the backward sends dK and dV around the ring
    back to the ranks holding their chunks. Every rank of the group must call it."""
    if not dist.is_initialized():
        raise ValueError("'group': torch.distributed is not initialized "
                         "(torch.distributed.init_process_group first)")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"'{name}' must be a torch tensor, not {type(t).__name__}")
    if q.shape[1] != k.shape[1]:
        raise ValueError(f"'k' holds {k.shape[1]} keys but 'q' {q.shape[1]} queries: every "
                         "rank's chunk is one length of the sequence")
    return _RingAttention.apply(q, k, v, bool(causal), scale, group)
