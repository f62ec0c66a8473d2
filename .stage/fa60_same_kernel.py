"""Part 1 of fa60: the persistent kernel compiled for sm_90 from a template file, its TTGIR (locations dropped)
and SASS (cuobjdump -sass, instruction text) written a case a file, so that two templates' kernels can be diffed.

    python .stage/fa60_same_kernel.py TEMPLATE OUT_DIR [KEY=VALUE ...]

KEY=VALUE: constexprs passed beside the launcher's (main's file takes DIAGONAL_FIRST=1, the folded file none)."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fa59_sass import compile_persist, cuobjdump, load  # noqa: E402

CASES = [("bf16", 128, True, False), ("fp16", 64, True, False), ("fp16", 64, True, True),
         ("bf16", 128, False, False), ("fp16", 64, False, True)]

t = load(sys.argv[1])
out = sys.argv[2]
os.makedirs(out, exist_ok=True)
overrides = {k: int(v) for k, v in (a.split("=") for a in sys.argv[3:])}
for dtype, D, causal, ragged in CASES:
    kernel = compile_persist(t, dtype, D, causal, ragged=ragged, **overrides)
    name = f"{dtype}_d{D}_{'causal' if causal else 'full'}{'_ragged' if ragged else ''}"
    ttgir = re.sub(r"\s*loc\([^\n]*", "", kernel.asm["ttgir"])  # line numbers move with any edit
    ttgir = "\n".join(line for line in ttgir.splitlines() if not line.startswith("#loc"))
    with open(os.path.join(out, name + ".ttgir"), "w") as f:
        f.write(ttgir)
    sass = [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(.*?;)", cuobjdump(kernel, "-sass"))]
    with open(os.path.join(out, name + ".sass"), "w") as f:
        f.write("\n".join(sass))
    print(name, len(sass), "SASS instructions", flush=True)
