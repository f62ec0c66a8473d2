"""SKILL.md front matter, and the bottleneck a kernel's SKILL.md declares."""

import pytest

from kgit.errors import KgitError
from kgit.profiling import skillfiles


def test_front_matter_and_body():
    data, body = skillfiles.front_matter("---\nname: softmax\nbottleneck: memory\n---\n# Softmax\ntext\n")
    assert data == {"name": "softmax", "bottleneck": "memory"} and body == "# Softmax\ntext\n"


@pytest.mark.parametrize("text, why", [
    ("# no front matter\n", "no YAML front matter"),
    ("---\nname: [unclosed\n---\n# x\n", "not valid YAML"),
    ("---\n- a list\n---\n# x\n", "must be a mapping"),
])
def test_a_broken_front_matter_is_a_one_line_error_naming_the_file(text, why):
    with pytest.raises(KgitError) as caught:
        skillfiles.front_matter(text, "skills/x/SKILL.md")
    assert str(caught.value).startswith("skills/x/SKILL.md: ") and why in str(caught.value)


def write_skill(root, kernel, text):
    path = root / skillfiles.kernel_skill_path(kernel)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_declared_bottleneck_and_why_there_is_none(tmp_path):
    assert skillfiles.declared_bottleneck(tmp_path, "k") == (None, "skills/kernels/k/SKILL.md does not exist")
    write_skill(tmp_path, "k", "---\nname: k\nbottleneck: ' Compute '\n---\n# k\n")
    assert skillfiles.declared_bottleneck(tmp_path, "k") == ("compute", "declared in skills/kernels/k/SKILL.md")
    write_skill(tmp_path, "k", "---\nname: k\nbottleneck: io\n---\n# k\n")
    assert skillfiles.declared_bottleneck(tmp_path, "k")[0] is None
    assert "declares no bottleneck" in skillfiles.declared_bottleneck(tmp_path, "k")[1]
    write_skill(tmp_path, "k", "no front matter")
    assert skillfiles.declared_bottleneck(tmp_path, "k") == (
        None, "skills/kernels/k/SKILL.md: no YAML front matter (a '---' block at the top)")


def write_tier(root, directory, techniques):
    path = root / "skills" / directory / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {directory}\ndescription: d\ntechniques:\n" +
                    "".join(f"  {name}: {aliases}\n" for name, aliases in techniques.items()) + "---\n# t\n")


def test_each_tunable_has_the_tier_that_owns_its_technique(tmp_path):
    write_tier(tmp_path, "tier1-block-tiling", {"block size": "[tile size]"})
    write_tier(tmp_path, "tier4-scheduling", {"persistent kernel": "[PERSISTENT]"})
    write_tier(tmp_path, "tier5-arch-nvidia", {"TMA": "[]"})
    write_skill(tmp_path, "k", "---\nname: k\ntunables:\n  BLOCK: Tile size\n  PERSISTENT: persistent kernel\n"
                               "  USE_TMA: TMA\n  ODD: no such technique\n---\n# k\n")
    tiers = skillfiles.tunable_tiers(tmp_path, "k")
    assert tiers == {"BLOCK": 1, "PERSISTENT": 4, "USE_TMA": 5}
    assert skillfiles.tier_of_change(tiers, ["PERSISTENT"]) == 4
    assert skillfiles.tier_of_change(tiers, ["USE_TMA", "PERSISTENT"]) == 4  # the lowest of several
    assert skillfiles.tier_of_change(tiers, ["USE_TMA", "BLOCK"]) == 1
    assert skillfiles.tier_of_change(tiers, ["ODD"]) == 1 and skillfiles.tier_of_change(tiers, []) == 1
    assert skillfiles.tunable_tiers(tmp_path, "other") == {}  # no skill
    write_skill(tmp_path, "k", "---\nname: k\n---\n# k\n")
    assert skillfiles.tunable_tiers(tmp_path, "k") == {}  # a skill without tunables


def test_without_tier_skills_of_its_own_a_repository_uses_kgits(tmp_path):
    write_skill(tmp_path, "k", "---\nname: k\ntunables:\n  PERSISTENT: persistent kernel\n  USE_TMA: TMA\n---\n")
    assert skillfiles.tunable_tiers(tmp_path, "k") == {"PERSISTENT": 4, "USE_TMA": 5}


def test_reading_tiers_imports_neither_torch_nor_triton():
    import subprocess
    import sys
    code = ("import sys; from pathlib import Path; from kgit.profiling import skillfiles; import kgit.loop.tune; "
            "assert skillfiles.tunable_tiers(Path('.'), 'gemm')['USE_TMA'] == 5; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=skillfiles.KGIT_CHECKOUT, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
