"""A check of compiled SASS that the CPU emulator (gluon_emulator.py) cannot make: that every uniform register an
HGMMA (wgmma) reads as a shared-memory descriptor (gdesc[URk]: URk..URk+3, A's and B's descriptors) is written on
every path from the kernel's entry to it (with A from registers, B's descriptor alone: URk+2, URk+3).

Why: fa56's persistent kernel with two Q slots (Q_SLOTS 2), compiled by Triton 3.6's ptxas for sm_90, read the
Q descriptor of k-steps 1-3 of a tile's last key block S = Q K^T from UR20/UR21, which ptxas wrote only in the
preheader of the middle-block loop (`for j in range(1, n_blocks - 1)`), skipped where a tile has 2 key blocks: a
stale or never written descriptor, another slot's Q or garbage (the PTX computed it in the last block itself).
Causal tiles have 2 blocks (every shape there on the H100 was wrong; 64x16x256x64, all of whose heavy tiles
have 2, gave NaN); the non-causal shapes checked had 4-8 blocks a tile, so the preheader always ran. With one Q
slot the descriptor is loop-invariant and ptxas wrote it before the tile loop.

The analysis: a control-flow graph of the SASS (branch targets and fall-through), a must-be-written set of
uniform registers at each instruction (the intersection over predecessors, the entry's empty), a predicated
write counting as none. Conservative the other way too: an instruction whose first operand is a uniform register
writes it (two for .64 and .WIDE forms)."""
import re

_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_UR = re.compile(r"\bUR(\d+)\b")


def parse(sass: str):
    """[(address, predicate or None, opcode, operands text)] of one cuobjdump -sass function listing."""
    out = []
    for m in _LINE.finditer(sass):
        addr, text = int(m.group(1), 16), m.group(2).strip()
        pred = None
        if text.startswith("@"):
            pred, text = text.split(None, 1)
        op, _, rest = text.partition(" ")
        out.append((addr, pred, op, rest))
    return out


def _writes(op, rest):
    # the first operand, where it is a uniform register (not [UR..], a store's address)
    first = rest.split(",")[0].strip()
    m = re.fullmatch(r"UR(\d+)", first)
    if not m or op.startswith(("HGMMA", "UTMA", "SYNCS", "ST", "UBLKCP", "RED", "ATOM")):
        return set()
    r = int(m.group(1))
    wide = ".64" in op or ".WIDE" in op
    return {r, r + 1} if wide else {r}


def undefined_descriptor_reads(sass: str):
    """[(address, instruction, registers)] of each HGMMA whose gdesc registers are not written on every path."""
    ins = parse(sass)
    index = {a: i for i, (a, *_r) in enumerate(ins)}
    succ = [[] for _ in ins]
    for i, (a, pred, op, rest) in enumerate(ins):
        target = None
        if op.startswith("BRA"):
            m = re.search(r"0x([0-9a-f]+)", rest)
            target = index.get(int(m.group(1), 16)) if m else None
        if target is not None:
            succ[i].append(target)
        ends = op.startswith(("EXIT", "RET")) or (op.startswith("BRA") and pred is None)
        if op.startswith("EXIT") and pred is not None:
            ends = False
        if not ends and i + 1 < len(ins):
            succ[i].append(i + 1)
    into = [None] * len(ins)  # must-written set on entry; None = not reached yet (top)
    into[0] = set()
    work = [0]
    while work:
        i = work.pop()
        a, pred, op, rest = ins[i]
        out = into[i] | (_writes(op, rest) if pred is None else set())
        for s in succ[i]:
            new = set(out) if into[s] is None else into[s] & out
            if into[s] is None or new != into[s]:
                into[s] = new
                work.append(s)
    bad = []
    for i, (a, pred, op, rest) in enumerate(ins):
        m = re.search(r"gdesc\[UR(\d+)\]", rest)
        if op.startswith("HGMMA") and m and into[i] is not None:
            base = int(m.group(1))
            # A from registers (HGMMA Rd, Ra, gdesc[URk]): B's descriptor alone, URk+2..URk+3, is read
            a_in_registers = re.match(r"R\d+, R\d+, gdesc", rest) is not None
            used = range(base + 2, base + 4) if a_in_registers else range(base, base + 4)
            missing = [f"UR{r}" for r in used if r not in into[i]]
            if missing:
                bad.append((a, f"{op} {rest}", missing))
    return bad


def _blocks(ins):
    """Basic blocks of parse()'s instructions: (starts, block of each instruction, successors of each block)."""
    index = {a: i for i, (a, *_r) in enumerate(ins)}
    leaders = {0}
    targets = {}
    for i, (a, pred, op, rest) in enumerate(ins):
        if op.startswith(("BRA", "EXIT", "RET")):
            leaders.add(i + 1)
            m = re.search(r"0x([0-9a-f]+)", rest) if op.startswith("BRA") else None
            if m and int(m.group(1), 16) in index:
                targets[i] = index[int(m.group(1), 16)]
                leaders.add(targets[i])
    starts = sorted(x for x in leaders if x < len(ins))
    block_of = [0] * len(ins)
    for b, s in enumerate(starts):
        for i in range(s, starts[b + 1] if b + 1 < len(starts) else len(ins)):
            block_of[i] = b
    succ = [set() for _ in starts]
    for b, s in enumerate(starts):
        last = (starts[b + 1] if b + 1 < len(starts) else len(ins)) - 1
        a, pred, op, rest = ins[last]
        if last in targets:
            succ[b].add(block_of[targets[last]])
        falls = not ((op.startswith("BRA") or op.startswith(("EXIT", "RET"))) and pred is None)
        if falls and last + 1 < len(ins):
            succ[b].add(block_of[last + 1])
    return starts, block_of, succ


def descriptor_reads_not_dominated(sass: str):
    """[(address, instruction, [(register, address of a definition reaching it that does not dominate it)])] of each
    HGMMA a descriptor register of which may come from a definition on another path: a value left from an earlier
    pass through a block that this pass skipped (fa57's stale Q descriptor: defined, but another tile's). The
    kernels' descriptors are computed where they are used or in a block that dominates it; none is carried
    around a loop in a register."""
    ins = parse(sass)
    starts, block_of, succ = _blocks(ins)
    n = len(starts)
    ends = [(starts[b + 1] if b + 1 < n else len(ins)) for b in range(n)]
    pred_blocks = [set() for _ in range(n)]
    for b in range(n):
        for s in succ[b]:
            pred_blocks[s].add(b)
    # dominators (reachable blocks only)
    reach, stack = {0}, [0]
    while stack:
        for s in succ[stack.pop()]:
            if s not in reach:
                reach.add(s)
                stack.append(s)
    dom = {b: (set(reach) if b else {0}) for b in reach}
    changed = True
    while changed:
        changed = False
        for b in sorted(reach):
            if b == 0:
                continue
            ps = [dom[p] for p in pred_blocks[b] if p in reach]
            new = set.intersection(*ps) | {b} if ps else {b}
            if new != dom[b]:
                dom[b], changed = new, True
    # reaching definitions of uniform registers: {register: {instruction index}}
    def transfer(b, into):
        cur = {r: set(d) for r, d in into.items()}
        for i in range(starts[b], ends[b]):
            a, pred, op, rest = ins[i]
            for r in _writes(op, rest):
                cur[r] = (cur.get(r, set()) | {i}) if pred is not None else {i}
        return cur
    IN = {b: {} for b in reach}
    OUT = {b: None for b in reach}
    work = sorted(reach)
    while work:
        b = work.pop(0)
        into = {}
        for p in pred_blocks[b]:
            if p in reach and OUT[p] is not None:
                for r, d in OUT[p].items():
                    into.setdefault(r, set()).update(d)
        IN[b] = into
        out = transfer(b, into)
        if out != OUT[b]:
            OUT[b] = out
            work.extend(s for s in succ[b] if s not in work)
    bad = []
    for b in sorted(reach):
        cur = {r: set(d) for r, d in IN[b].items()}
        for i in range(starts[b], ends[b]):
            a, pred, op, rest = ins[i]
            m = re.search(r"gdesc\[UR(\d+)\]", rest)
            if op.startswith("HGMMA") and m:
                base = int(m.group(1))
                a_in_registers = re.match(r"R\d+, R\d+, gdesc", rest) is not None
                used = range(base + 2, base + 4) if a_in_registers else range(base, base + 4)
                stale = [(f"UR{r}", hex(ins[d][0])) for r in used for d in sorted(cur.get(r, ()))
                         if block_of[d] not in dom[b]]
                if stale:
                    bad.append((a, f"{op} {rest}", stale))
            for r in _writes(op, rest):
                cur[r] = (cur.get(r, set()) | {i}) if pred is not None else {i}
    return bad
