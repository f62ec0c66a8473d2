"""The skills/ knowledge base: every SKILL.md parses and is reachable from the loop skill; every path its
prose (skills and kernel files) cites exists, in the tree or at the commit it names; no prose names a work
session; the bottleneck skill mirrors kgit's thresholds and tier orders."""

import re
import subprocess
from pathlib import Path

import pytest

from kgit.profiling import diagnose, skillfiles

ROOT = Path(__file__).resolve().parent.parent
SKILLS = sorted((ROOT / "skills").rglob("SKILL.md"))
GENERAL = [p for p in SKILLS if "kernels" not in p.relative_to(ROOT / "skills").parts]
LOOP = ROOT / "skills/optimize-loop/SKILL.md"
# The prose that cites evidence: the skills and the kernel files beside them (their comments and docstrings).
PROSE = sorted(p for p in (ROOT / "skills").rglob("*") if p.suffix in (".md", ".py"))
# What a newcomer reads: a "session 12" there tells them nothing; say what was measured and where it is.
READ = PROSE + [ROOT / "README.md"] + sorted(p for folder in ("benchmarks", "kgit")
                                             for p in (ROOT / folder).rglob("*") if p.suffix in (".md", ".py", ".sh"))
_SESSION = re.compile(r"\b[Ss]essions? \d")

# A repository path named in a skill: starts at a top-level folder, not inside another path
# (.git/kgit/... is not kgit/...) nor after a commit; placeholders such as <name> or {ld,st} are not checked.
_FOLDERS = r"(?:skills|kgit|experiments|benchmarks|tests|hooks)/[\w./<>{},*-]*[\w>}*]"
_PATH = re.compile(r"(?<![\w./:-])(" + _FOLDERS + ")")
# A path named as it was at a commit, "df8b865:experiments/...": a record or script since removed from
# the tree, which `git show REV:path` reads.
_AT_COMMIT = re.compile(r"(?<![\w./-])([0-9a-f]{7,40}):(" + _FOLDERS + ")")
# ... and one cut at a line break, "df8b865:experiments/\n# sweep-h200/", whose first half alone would pass.
_CUT = re.compile(r"(?<![\w./-])[0-9a-f]{7,40}:(?:skills|kgit|experiments|benchmarks|tests|hooks)/[\w./-]*\n"
                  r"[\s#*]*[\w.-]+(?:/|\.py\b)")


def named_paths(text: str) -> list[str]:
    return [p for p in _PATH.findall(text) if not any(c in p for c in "<>{}*,")]


def _in_git(obj: str) -> bool:
    return subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", obj], capture_output=True).returncode == 0


def test_the_expected_skills_exist():
    names = {p.parent.name for p in GENERAL}
    assert {"optimize-loop", "profiling", "bottleneck-diagnosis", "verification", "benchmark",
            "tier1-block-tiling", "tier2-memory-access", "tier3-compute-fusion", "tier4-scheduling",
            "tier5-arch-nvidia", "tier5-arch-amd-rocm"} <= names


@pytest.mark.parametrize("path", SKILLS, ids=[str(p.relative_to(ROOT)) for p in SKILLS])
def test_skill_front_matter_and_named_files(path):
    data, body = skillfiles.front_matter(path.read_text(), str(path))
    assert isinstance(data.get("name"), str) and data["name"].strip()
    assert isinstance(data.get("description"), str) and len(data["description"]) >= 40
    assert len(data["description"]) <= 1024  # agents load descriptions into every prompt
    if path in GENERAL:
        assert data["name"] == path.parent.name
    else:
        assert data.get("bottleneck", "memory") in skillfiles.BOTTLENECKS
    assert body.strip().startswith("#")


@pytest.mark.parametrize("path", PROSE, ids=[str(p.relative_to(ROOT)) for p in PROSE])
def test_a_named_path_exists(path):
    missing = [p for p in named_paths(path.read_text()) if not (ROOT / p.rstrip(".")).exists()]
    assert not missing, f"{path.relative_to(ROOT)} names missing files: {missing}"


@pytest.mark.parametrize("path", PROSE, ids=[str(p.relative_to(ROOT)) for p in PROSE])
def test_a_path_named_at_a_commit_is_in_that_commit(path):
    text = path.read_text()
    cut = _CUT.findall(text)
    assert not cut, f"{path.relative_to(ROOT)} cuts a cited path at a line break: {cut}"
    cited = [(rev, p.rstrip(".")) for rev, p in _AT_COMMIT.findall(text)
             if not any(c in p for c in "<>{}*,")]
    if not all(_in_git(f"{rev}^{{commit}}") for rev, _ in cited):
        pytest.skip("the commits it names are not in this clone's history (a shallow clone)")
    missing = [f"{rev}:{p}" for rev, p in cited if not _in_git(f"{rev}:{p.rstrip('/')}")]
    assert not missing, f"{path.relative_to(ROOT)} names paths its commits do not hold: {missing}"


def test_no_prose_names_a_work_session():
    named = [f"{p.relative_to(ROOT)}:{n}: {line.strip()[:100]}" for p in READ
             for n, line in enumerate(p.read_text().splitlines(), 1) if _SESSION.search(line)]
    assert not named, "say what was measured, on what device, and which record holds it:\n" + "\n".join(named)


def test_every_skill_is_reachable_from_the_loop_skill():
    seen, todo = set(), [LOOP]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in named_paths(path.read_text()):
            target = ROOT / name
            if target.name == "SKILL.md" and target.exists():
                todo.append(target)
    unreachable = [str(p.relative_to(ROOT)) for p in GENERAL if p not in seen]
    assert not unreachable


def test_diagnose_names_only_existing_skill_files():
    for path in [*diagnose.TIER_SKILLS.values(), *diagnose.TIER5_SKILLS.values(), diagnose.DIAGNOSIS_SKILL,
                 diagnose.PROFILING_SKILL, "skills/optimize-loop/SKILL.md"]:
        assert (ROOT / path).is_file(), path


def test_bottleneck_skill_mirrors_the_thresholds_and_tier_orders():
    text = (ROOT / diagnose.DIAGNOSIS_SKILL).read_text()
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in text.splitlines()
            if line.startswith("| `")}
    assert {k.strip("`") for k in rows} == set(diagnose.THRESHOLDS)
    for key, value in diagnose.THRESHOLDS.items():
        assert float(rows[f"`{key}`"]) == value, key
    for bound, order in diagnose.TIER_ORDER.items():
        assert f"{bound}-bound**" in text and ", ".join(map(str, order)) in text


def test_the_loop_skill_names_every_kgit_command_it_relies_on():
    text = LOOP.read_text()
    for command in ("start", "step", "context", "profile", "diagnose", "best", "log", "status", "report",
                    "tune", "run"):
        assert f"kgit {command}" in text, command


def test_the_rmsnorm_skill_has_a_step_for_each_tier_of_a_memory_bound_order():
    """An agent sent to tier 2 or 3 of rmsnorm (memory-bound: 2, 1, 3; 1, 2, 3 without a profile) finds
    what that tier means for this kernel in its skill, as it does for tier 1."""
    text = (ROOT / "skills/kernels/rmsnorm/SKILL.md").read_text()
    listed = {int(n) for n in re.findall(r"^- Tiers? (\d)", text.split("**Tiers.**", 1)[1], re.M)}
    assert set(diagnose.TIER_ORDER["memory"]) <= listed


def test_32_bit_offset_overflow_is_a_technique_of_one_tier():
    owners = skillfiles.technique_tiers(ROOT)
    assert owners["32-bit offset overflow"] == owners["64-bit offsets"] == 2
