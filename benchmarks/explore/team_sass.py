"""Why layernorm's shared-memory team reads 3-4 points less in bf16 than in fp16 (issue 15, session 16).

    python benchmarks/explore/team_sass.py [--n 32768] [--out FILE]      (no GPU: Triton 3.6 for sm_90)

In every run of all eight kernels the team's bf16 rows trail its fp16 rows (session 16: 80.9 / 84.2% of
copy at 4096x32768, 74.8 / 77.8 at 512x262144), where rmsnorm's and softmax's teams read alike in both.
Compiles `_layernorm_smem_team` for sm_90a in both types, disassembles it with the cuobjdump Triton
ships, and prints its SASS instructions by opcode.
Outcome (experiments/sweep-h200-session16/offline-team-sass/): the PTX is the same but for the cvt types;
in SASS fp16 unpacks each value with one HADD2.F32, bf16 takes 1.5 instructions a value (IMAD.U32 for
the low half; PRMT then SHF.L for the high half, where one LOP3 with 0xFFFF0000 would do): 2288
instructions against 2096. The layernorm team converts each element five times (x in each of its two
statistics passes and in the output pass, w and b), rmsnorm's three times.
Session 17: the team reads bf16 as int32 pairs (PAIRS, `_bf16_pairs`): at N 32768 2056 instructions on 96
registers, 2096 on 80 under a cap, where fp16 takes 2144 on 72 (measured: benchmarks/explore/
layernorm_bf16_pairs.py).
"""

import argparse
import collections
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import templates  # noqa: E402  (beside this file)


def sass(kernel) -> str:
    from triton.backends.nvidia.compiler import get_ptxas

    ptxas = Path(get_ptxas(90).path)
    with tempfile.TemporaryDirectory() as tmp:
        ptx, cubin = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        ptx.write_text(kernel.asm["ptx"])
        subprocess.run([str(ptxas), "-arch=sm_90a", str(ptx), "-o", str(cubin)], check=True)
        return subprocess.run([str(ptxas.parent / "cuobjdump"), "-sass", str(cubin)], check=True,
                              capture_output=True, text=True).stdout


def histogram(text: str) -> collections.Counter:
    ops = re.findall(r"^\s+/\*[0-9a-f]{4}\*/\s+(?:@!?U?P[0-9T] )?([A-Z0-9_]+)", text, re.M)
    return collections.Counter(ops)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=32768)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    t = templates.load("layernorm")
    chunk = t.SMEM_TEAM["CHUNK"] * t.SMEM_TEAM["NCH"]
    P = -(-args.n // chunk)
    lines = [f"layernorm _layernorm_smem_team, N {args.n} (P {P}, {t.SMEM_TEAM}), sm_90a, SASS by opcode"]
    for dtype, pairs, maxnreg in ((torch.bfloat16, False, None), (torch.bfloat16, True, None),
                                  (torch.bfloat16, True, 80), (torch.float16, False, None)):
        x, w = torch.empty(8, args.n, dtype=dtype), torch.empty(args.n, dtype=dtype)
        words, exits = torch.empty(64, dtype=torch.int64), torch.empty(64, dtype=torch.int32)
        kernel = templates.compile_sm90(
            t._layernorm_smem_team, (x, w, w, x, words, exits, 8, args.n, args.n, args.n, 1e-5),
            {"CHUNK": t.SMEM_TEAM["CHUNK"], "NCH": t.SMEM_TEAM["NCH"], "P": P, "P_POW2": 1 << (P - 1).bit_length(),
             "SPIN": 1 << 20, "PAIRS": pairs},
            {"num_warps": t.SMEM_TEAM["num_warps"], **({"maxnreg": maxnreg} if maxnreg else {})})
        ops = histogram(sass(kernel))
        regs = templates.resource_usage(kernel)
        variant = f"{dtype}{' as int32 pairs' if pairs else ''}{f' maxnreg {maxnreg}' if maxnreg else ''}"
        lines.append(f"== {variant}: {sum(ops.values())} instructions {regs}")
        lines += [f"{count:6d} {op}" for op, count in ops.most_common(16)]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
