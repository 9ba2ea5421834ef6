"""A child-process probe of glibc's malloc: how many pages each round of allocating, touching and freeing 96 MiB
faults in, on the main thread and on a side thread (as a replica's step thread)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from typing import Any

# ``setup`` runs first and sets ``applied``; then each thread allocates 96 MiB in 8 MiB blocks, touches and frees
# them, three times. Prints (applied, {"main": [faults per round], "side": [...]}).
_SCRIPT = """
import ctypes, resource, threading
applied = None
{setup}
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
faults = {{"main": [], "side": []}}
def rounds(where):
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        blocks = [libc.malloc(8 << 20) for _ in range(12)]
        for block in blocks:
            ctypes.memset(block, 1, 8 << 20)
        for block in reversed(blocks):
            libc.free(block)
        faults[where].append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)
rounds("main")
thread = threading.Thread(target=rounds, args=("side",))
thread.start()
thread.join()
print((applied, faults))
"""


def heap_rounds(setup: str = "", **env_vars: str) -> tuple[Any, dict[str, list[int]]]:
    """Run the probe in a fresh Python whose environment has no malloc settings but ``env_vars``; ``setup``: code
    run before the rounds (it may set ``applied``)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("MALLOC_")}
    env.pop("GLIBC_TUNABLES", None)
    done = subprocess.run([sys.executable, "-c", _SCRIPT.format(setup=setup)], env={**env, **env_vars},
                          capture_output=True, text=True, timeout=120, check=True)
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])
