"""Kernels made ready ahead of the first call: warm(q, k, v, ...) compiles (or loads from the
kernel cache) what attention(q, k, v, ...) launches and, for training, what its backward
launches, concurrently, running none of them."""

from typing import Optional, Tuple

from ._options import Options
from ._trace import modifiers
from .attention import _prepare


def warm(q, k, v, *, causal: bool = False, window: Tuple[int, int] = (-1, -1),
         softcap: float = 0.0, scale: Optional[float] = None, deterministic: bool = False,
         score_mod="", mask_mod="", captures: Optional[dict] = None, block_mask=None,
         dropout_p: float = 0.0, backward: bool = True) -> None:
    """Makes ready the kernels attention(q, k, v, ...) with these options runs and, with
    `backward`, those of its backward (dQ, dK/dV and their helpers), so that a training job's
    first step does not wait for them: each is compiled, all at once on the runtime's workers,
    or loaded from the kernel cache (FLASHJIT_CACHE_DIR), and none is run. q, k and v only give
    the shapes, dtype and device (their values are not read): arrays of a later call's shape,
    as attention() takes them. The configs are those the calls would run with as far as is
    known without timing: the tuning database's winner for the shape, else the default. A
    mask_mod's automatic block mask is built here. `dropout_p` > 0: the kernels of calls with
    dropout (any seed: the mask is not compiled in). e4m3 codes (float8_e4m3fn or uint8) make
    the fp8 forward's kernel ready, with backward=False (it has no backward). A bad argument
    raises ValueError naming it; nothing is compiled then."""
    options = Options(causal, tuple(window), softcap, scale, deterministic,
                      *modifiers(score_mod, mask_mod, captures, q), dropout_p=dropout_p)
    _prepare(q, k, v, options, block_mask, backward)
