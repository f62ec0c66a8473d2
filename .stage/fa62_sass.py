"""fa62: the persistent kernel (_attn_fwd_persist) compiled for sm_90 on a CPU under Triton 3.6, from main's template
and this branch's, for the SASS-identity check (every configuration but head dim 128's new rings: the same
instructions as main's) and the facts of the new ones (shared memory, registers, stack, sass_defs' stale-descriptor
check). Run: PYTHONPATH=$PWD:/tmp/fa59/t36 python .stage/fa62_sass.py MAIN_TEMPLATE BRANCH_TEMPLATE OUT_DIR"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fa59_sass import compile_persist, cuobjdump, load, loops  # noqa: E402
from sass_defs import descriptor_reads_not_dominated, parse  # noqa: E402

main_t, branch_t = load(sys.argv[1], "main_t"), load(sys.argv[2], "branch_t")
out = sys.argv[3]
os.makedirs(out, exist_ok=True)


def sass_of(kernel):
    return [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(.*?;)", cuobjdump(kernel, "-sass"))]


def facts(kernel):
    sass = cuobjdump(kernel, "-sass")
    usage = cuobjdump(kernel, "-res-usage")
    return {"shared": kernel.metadata.shared, "regs": int(re.search(r"REG:(\d+)", usage).group(1)),
            "stack": int(re.search(r"STACK:(\d+)", usage).group(1)), "local0": "LOCAL:0 " in usage,
            "stale_descriptors": [hex(a) for a, _, _ in descriptor_reads_not_dominated(sass)],
            "instructions": len(parse(sass)), "hgmma_loops": [x[:3] for x in loops(sass)]}


# the switch off: main's rings passed to both files (main's file takes no V_BUFFERS / O_STAGED)
SAME = [("bf16", 64, True, False, 4), ("fp16", 64, False, False, 4), ("fp16", 64, True, True, 4),
        ("bf16", 128, True, False, 2), ("bf16", 128, False, False, 2), ("fp16", 128, True, True, 2)]
for dtype, D, causal, ragged, nb in SAME:
    a = sass_of(compile_persist(main_t, dtype, D, causal, ragged=ragged, NUM_BUFFERS=nb, Q_SLOTS=2))
    # V_BUFFERS and O_STAGED named: compile_persist binds only the constexprs it is given (a JIT launch binds the
    # defaults too), and the launcher passes both
    b = sass_of(compile_persist(branch_t, dtype, D, causal, ragged=ragged, NUM_BUFFERS=nb, Q_SLOTS=2,
                                V_BUFFERS=nb, O_STAGED=True))
    print(json.dumps({"same": f"{dtype} D{D} causal={causal} ragged={ragged}", "main": len(a),
                      "branch_is_main": a == b}), flush=True)

# the new rings: V 3 with Q 2 (the launcher's at head dim 128), and K/V 3 with Q 1 (the probe's other variant)
NEW = [("v3", dict(NUM_BUFFERS=2, V_BUFFERS=3, Q_SLOTS=2, O_STAGED=False)),
       ("kv3q1", dict(NUM_BUFFERS=3, V_BUFFERS=3, Q_SLOTS=1, O_STAGED=False)),
       ("v2direct", dict(NUM_BUFFERS=2, V_BUFFERS=2, Q_SLOTS=2, O_STAGED=False))]
for name, consts in NEW:
    for dtype, causal, ragged in [("bf16", True, False), ("bf16", False, False), ("fp16", True, True),
                                  ("bf16", False, True)]:
        kernel = compile_persist(branch_t, dtype, 128, causal, ragged=ragged, **consts)
        with open(os.path.join(out, f"{name}_{dtype}_{causal}_{ragged}.sass"), "w") as f:
            f.write("\n".join(sass_of(kernel)))
        print(json.dumps({"new": name, "case": f"{dtype} causal={causal} ragged={ragged}", **facts(kernel)}),
              flush=True)
