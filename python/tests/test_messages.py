"""The library's own messages reach Python's logging, not C-level stderr: a kernel cache that
cannot be used is a flashjit.FlashjitWarning (filterable like any warning), and a kernel
compiled for the emulator is a notice on the "flashjit" logger at INFO."""

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import logging, warnings
    import numpy as np
    import flashjit
    logging.basicConfig(level=logging.INFO, format="LOG %(name)s %(levelname)s %(message)s")
    q = np.random.default_rng(0).standard_normal((1, 8, 1, 16)).astype(np.float16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        flashjit.attention(q, q, q, score_mod="score * 0.75")  # a kernel compiled on first use
    for w in caught:
        print("WARNING", w.category.__name__, w.message)
""")


def test_warnings_and_notices_go_through_python(tmp_path):
    cache = tmp_path / "not-a-directory"
    cache.write_text("a file where the cache directory should be")
    env = dict(os.environ, FLASHJIT_CACHE_DIR=str(cache))
    run = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                         timeout=600, check=False)
    assert run.returncode == 0, run.stderr
    # The unusable cache: a FlashjitWarning naming it, caught by Python's warnings.
    assert "WARNING FlashjitWarning kernel cache " + str(cache) in run.stdout, run.stdout
    # The compile notice: through logging (basicConfig writes to stderr with our format).
    assert "LOG flashjit INFO compiling " in run.stderr, run.stderr
    # Nothing printed by the library itself.
    assert "flashjit: " not in run.stderr, run.stderr
