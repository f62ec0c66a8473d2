"""sass_defs.py's check of wgmma descriptors in compiled SASS (fa57's fault, which the CPU emulator of the
partitions cannot see: the partitions were right, ptxas's code was not)."""
import gzip
import os

from sass_defs import descriptor_reads_not_dominated, undefined_descriptor_reads

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def test_finds_fa56s_stale_q_descriptors_in_triton_36s_sass():
    """fa56's _attn_fwd_persist (two Q slots, causal, fp16, head dim 64, 4 K/V stages) as Triton 3.6's ptxas
    compiled it (cuobjdump -sass, instruction text only): each consumer's last-block S reads the Q descriptor of
    k-step 1 from registers written only in the middle-block loop's preheader, which a 2-block tile skips. Consumer
    1 (a worker) never wrote them before on that path; consumer 0 (the default partition) had, for another Q."""
    with gzip.open(os.path.join(DATA, "fa56_persist_fp16_causal_d64_2slots_triton36.sass.gz"), "rt") as f:
        sass = f.read()
    found = {hex(a): regs for a, _, regs in descriptor_reads_not_dominated(sass)}
    assert found == {"0x4fb0": [("UR20", "0x2890"), ("UR21", "0x28d0")],
                     "0xfd00": [("UR16", "0xd5d0"), ("UR17", "0xd610")]}
    # the weaker check (written on every path) sees consumer 1's alone
    assert [hex(a) for a, _, _ in undefined_descriptor_reads(sass)] == ["0x4fb0"]


def _sass(lines):
    return "\n".join(f"        /*{16 * i:04x}*/                   {line} ;" for i, line in enumerate(lines))


def test_a_descriptor_from_a_skippable_block_is_stale_and_one_from_a_dominating_block_is_not():
    skipped = _sass(["UMOV UR4, 0x1", "UMOV UR5, 0x40000040", "UMOV UR6, 0x2", "UMOV UR7, 0x40000040",
                     "@P0 BRA 0x60", "UMOV UR4, 0x3",  # the preheader a short tile skips
                     "HGMMA.64x128x16.F32 R24, gdesc[UR4], R24", "EXIT"])
    assert [(hex(a), regs) for a, _, regs in descriptor_reads_not_dominated(skipped)] == [("0x60", [("UR4", "0x50")])]
    dominating = _sass(["UMOV UR4, 0x1", "UMOV UR5, 0x40000040", "UMOV UR6, 0x2", "UMOV UR7, 0x40000040",
                        "@P0 BRA 0x60", "UMOV UR8, 0x3", "HGMMA.64x128x16.F32 R24, gdesc[UR4], R24", "EXIT"])
    assert descriptor_reads_not_dominated(dominating) == []
    # A from registers: B's descriptor alone (URk+2, URk+3) is read
    registers_a = _sass(["UMOV UR6, 0x2", "UMOV UR7, 0x40000040", "HGMMA.64x64x16.F32 R88, R120, gdesc[UR4].tnspB, R88",
                         "EXIT"])
    assert descriptor_reads_not_dominated(registers_a) == [] and undefined_descriptor_reads(registers_a) == []
