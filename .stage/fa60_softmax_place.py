"""Where each consumer's block-loop softmax lands in the persistent kernel's sm_90 SASS (branch fa60, step 3).

    python .stage/fa60_softmax_place.py TEMPLATE CASE ...

A case is name:dtype:D:causal[:KEY=VALUE...] as in .stage/fa59_sass.py (e.g. pv:bf16:64:1:PV_WAIT_BEFORE_SOFTMAX=1).
Run it under the device's Triton (3.6: PYTHONPATH=a folder holding its wheel's files first): the placement is
ptxas's choice and differs between releases. A line a case (JSON): the kernel's registers at launch, the consumers'
setmaxnreg, stack and local-memory instructions (spills), its SASS instruction count, and each block loop's.

A block loop is an innermost loop that issues wgmma (block_loops). Its MUFU.EX2 are counted between its
`WARPGROUP.DEPBAR.LE gsb0, 0x1` (S_j done, P_{j-1} V_{j-1} in flight) and `... 0x0` (P V done) ("before": the
softmax under P V, as the PTX orders it by default) and after the second ("after": ptxas sank it past the wait,
or PV_WAIT_BEFORE_SOFTMAX's one wait for both put it there). Consumer 0's loop is told by the 64 x 64 S it issues in a causal tile's diagonal
block at head dim 64 (_diag_half_qk: an HGMMA.64x64 reading Q from shared memory, gdesc as its A operand); without
it the loops are named by order, consumer 1's first, as that kernel lays them out."""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fa59_sass import compile_persist, cuobjdump, load  # noqa: E402 (puts tests/kernels on the path)
from sass_defs import parse  # noqa: E402


def block_loops(ins):
    """[(start index, end index)] of the block loops in parse()'d SASS, in address order: the innermost loops that
    issue wgmma (a backward branch's target to the branch; those after the kernel's last EXIT are the mbarrier
    waits' retry stubs, not loops)."""
    index = {a: i for i, (a, *_r) in enumerate(ins)}
    last_exit = max(i for i, (_a, _p, op, _r) in enumerate(ins) if op == "EXIT")
    loops = []
    for i, (addr, _pred, op, rest) in enumerate(ins[:last_exit]):
        m = re.search(r"0x([0-9a-f]+)", rest) if op.startswith("BRA") else None
        if m and int(m.group(1), 16) < addr and int(m.group(1), 16) in index:
            start = index[int(m.group(1), 16)]
            if any(o.startswith("HGMMA") for _a, _p, o, _r in ins[start:i]):
                loops.append((start, i))
    return sorted(loop for loop in loops
                  if not any(other != loop and loop[0] <= other[0] and other[1] <= loop[1] for other in loops))


def placement(ins, start, end):
    """The loop's instruction, HGMMA and MUFU.EX2 counts and where its exponentials lie against its waits: the last
    `WARPGROUP.DEPBAR.LE gsb0, 0x0` (P V done) and the `... 0x1` before it (S_j done), which
    PV_WAIT_BEFORE_SOFTMAX's loop does without."""
    body = ins[start:end + 1]
    ops = [op for _a, _p, op, _r in body]
    levels = [rest.replace(" ", "") if op == "WARPGROUP.DEPBAR.LE" else "" for _a, _p, op, rest in body]
    zero = max(k for k, level in enumerate(levels) if level == "gsb0,0x0")
    ones = [k for k, level in enumerate(levels[:zero]) if level == "gsb0,0x1"]
    one = ones[-1] if ones else zero
    ex2 = [k for k, op in enumerate(ops) if op == "MUFU.EX2"]
    between = sum(one < k < zero for k in ex2)
    after = sum(k > zero for k in ex2)
    where = "before" if between >= 0.9 * len(ex2) else "after" if after >= 0.9 * len(ex2) else "split"
    top_reg = max(int(r) for _a, _p, _o, rest in body for r in re.findall(r"\bR(\d+)\b", rest))
    return {"softmax": where, "ex2_between_waits": between, "ex2_after_pv_wait": after,
            "ex2_before_first_wait": sum(k < one for k in ex2), "waits": len(ones[-1:]) + 1,
            "instructions": len(body), "hgmma": sum(o.startswith("HGMMA") for o in ops), "highest_register": top_reg}


def consumer_of_loops(ins, loops):
    """Each loop's consumer: 0 for the one nearest after consumer 0's diagonal S (64 x 64 from shared memory)."""
    half = [i for i, (_a, _p, op, rest) in enumerate(ins) if op.startswith("HGMMA.64x64x16") and
            rest.split(",")[1].strip().startswith("gdesc")]
    if not half:
        return [1, 0][:len(loops)]
    zero = min(range(len(loops)), key=lambda n: min(abs(loops[n][0] - h) for h in half))
    return [0 if n == zero else 1 for n in range(len(loops))]


def describe(kernel):
    sass = cuobjdump(kernel, "-sass")
    usage = cuobjdump(kernel, "-res-usage")
    ins = parse(sass)
    loops = block_loops(ins)
    consumers = consumer_of_loops(ins, loops)
    return {"regs": int(re.search(r"REG:(\d+)", usage).group(1)),
            "setmaxnreg": sorted({int(r, 16) for r in re.findall(r"USETMAXREG\.[\w.]+ (?:UP\d, )?(0x[0-9a-f]+)", sass)}),
            "stack": int(re.search(r"STACK:(\d+)", usage).group(1)),
            "local_ops": sum(op.startswith(("LDL", "STL")) for _a, _p, op, _r in ins),
            "instructions": len(ins),
            "loops": {f"consumer {c}": placement(ins, s, e) for c, (s, e) in zip(consumers, loops)}}


def main():
    import triton
    template, *cases = sys.argv[1:]
    t = load(template)
    for case in cases:
        name, dtype, D, causal, *kv = case.split(":")
        overrides = {k: int(v) for k, v in (x.split("=") for x in kv)}
        kernel = compile_persist(t, dtype, int(D), bool(int(causal)), **overrides)
        print(json.dumps({"case": case, "triton": triton.__version__, **describe(kernel)}), flush=True)


if __name__ == "__main__":
    main()
