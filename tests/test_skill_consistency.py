"""The skills agree with each other and with kgit (issue #17), in the parts a machine can check:

- one tier per technique: each tier skill declares the techniques it owns (front matter
  `techniques:`, a name and the phrases that name it in prose); no phrase is owned by two tiers, and
  every sentence of every skill that cites a tier ("tier 4", "tiers 2, 1, 3") names only techniques
  that the cited tier owns; kgit's own tier names (diagnose.TIER_NAMES) agree too;
- a kernel skill's tunables exist: its front matter `tunables:` maps every CONFIG / CONFIG_SPACE key
  of its kernel file (read with kgit tune's own reader) to a technique, and every name it
  quotes in backticks, or writes as a CONFIG key, is in the template's code;
- every `kgit <command> --option` a skill quotes exists in kgit's click CLI, and every JSON field it
  quotes is a name kgit's code writes (records, kgit context / diagnose, profile metrics,
  kgit.yaml settings, the test contract), read from the code, not listed here.

No GPU, no torch: sources are parsed, and only kgit's pure-Python modules are imported.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import click
import pytest

from kgit.cli.main import cli
from kgit.config import KernelConfig, kernel_file
from kgit.loop.tune import read_tunables
from kgit.model.record import Record, Status, to_json
from kgit.profiling import diagnose, ncu, skillfiles

ROOT = Path(__file__).resolve().parent.parent
SKILLS = ROOT / "skills"
ALL = sorted(SKILLS.rglob("SKILL.md"))
TIER_SKILLS = sorted(SKILLS.glob("tier*-*/SKILL.md"))
KERNELS = sorted(p.parent for p in (SKILLS / "kernels").glob("*/SKILL.md"))
GENERAL = [p for p in ALL if "kernels" not in p.relative_to(SKILLS).parts]


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# --- reading skills ----------------------------------------------------------------------------

def front(path: Path) -> tuple[dict, str]:
    return skillfiles.front_matter(path.read_text(), rel(path))


def tier_of(path: Path) -> int:
    return int(re.match(r"tier(\d)-", path.parent.name).group(1))


def techniques() -> dict[str, tuple[int, str, str]]:
    """Every phrase that names a technique (lower case) -> (owning tier, technique, declaring skill)."""
    owners: dict[str, tuple[int, str, str]] = {}
    clashes = []
    for path in TIER_SKILLS:
        data, _ = front(path)
        declared = data.get("techniques")
        assert isinstance(declared, dict) and declared, f"{rel(path)}: no `techniques:` mapping in its front matter"
        for name, aliases in declared.items():
            assert isinstance(aliases, list), f"{rel(path)}: techniques.{name} must be a list of phrases"
            for phrase in [name, *aliases]:
                key = str(phrase).lower()
                owner = (tier_of(path), str(name), rel(path))
                if key in owners and owners[key][0] != owner[0]:
                    clashes.append(f"{phrase!r}: tier {owners[key][0]} ({owners[key][2]}) and tier {owner[0]} ({rel(path)})")
                owners.setdefault(key, owner)
    assert not clashes, "a technique owned by two tiers: " + "; ".join(clashes)
    return owners


def technique_names() -> dict[str, int]:
    return {name.lower(): tier for tier, name, _ in techniques().values()}


def _phrase_pattern(phrases) -> re.Pattern:
    # Longest first, so that "fuse launches" (tier 4) wins over "fuse" (tier 3); a phrase is a whole
    # word: not inside an identifier or a hyphenated name (fused-moe, _tma_ok, num_stages). A tier
    # skill's phrases match in any case; a kernel's CONFIG keys (given as they are written, with a
    # capital or an underscore) only as written, so that CHUNK is a tunable and "a chunk" is not.
    def one(p):
        return re.escape(p) if p != p.lower() else "(?i:" + re.escape(p) + ")"
    alts = [one(p) for p in sorted(set(phrases), key=len, reverse=True)]
    return re.compile(r"(?<![\w-])(" + "|".join(alts) + r")(?![\w-])")


def terms(text: str, owners: dict) -> list[tuple[int, str]]:
    """(position, phrase as owners spells it) of each technique named in text."""
    spelled = {p.lower(): p for p in owners if p == p.lower()} | {p: p for p in owners if p != p.lower()}
    return [(m.start(), spelled.get(m.group(1), spelled.get(m.group(1).lower())))
            for m in _phrase_pattern(owners).finditer(text)]


# "tier 4", "Tier 1:", "tiers **2, 1, 3**", "(tier 5)"; not paths such as skills/tier4-scheduling/.
_CITE = re.compile(r"(?<![\w/-])tiers?\s+\**(\d(?:\s*(?:,|or|and)\s*\d)*)\**(?![\w-])", re.I)


def sentences(body: str) -> list[str]:
    """Sentences, list items and headings: the unit inside which a tier citation applies."""
    body = re.sub(r"```.*?```", " ", body, flags=re.S)  # code is not prose
    parts = re.split(r"(?<=[.;!?])\s+(?=[A-Z*`(])|\n\s*\n|\n(?=\s*(?:[-*]|\d+\.|#+|\|)\s)", body)
    return [" ".join(p.split()) for p in parts if p.strip()]


def citation_problems(text: str, owners: dict, where: str) -> list[str]:
    problems = []
    for sentence in sentences(text):
        cites = [(m.start(), {int(d) for d in re.findall(r"\d", m.group(1))}) for m in _CITE.finditer(sentence)]
        if not cites:
            continue
        for pos, phrase in terms(sentence, owners):
            tier = owners[phrase][0]
            # With several citations in a sentence, a technique belongs to the nearest one.
            cited = min(cites, key=lambda c: abs(c[0] - pos))[1] if len(cites) > 1 else cites[0][1]
            if tier not in cited:
                problems.append(f"{where}: {phrase!r} is tier {tier} ({owners[phrase][2]}), cited as tier "
                                f"{'/'.join(map(str, sorted(cited)))} in: {sentence[:160]}")
    return problems


# --- reading kernel templates ------------------------------------------------------------------

def template(kernel: Path) -> tuple[dict, set[str]]:
    """The tunables (CONFIG and CONFIG_SPACE keys, read as kgit tune reads them) and every name in the code."""
    path = kernel / kernel_file(kernel.name)
    source = path.read_text()
    tunables = read_tunables(source, rel(path))
    names = set(tunables.config) | set(tunables.space)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            names.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            names.add(node.value)
    return {**dict.fromkeys(tunables.space), **tunables.config}, names


ALL_CONFIG_KEYS = {k for kernel in KERNELS for k in template(kernel)[0]}
# `NAME`, `NAME: 0`, `name=2`; not formulas (`O = softmax(...)`) and not library classes (`TorchDispatchMode`)
_IDENT_SPAN = re.compile(r"`([A-Z][A-Z0-9_]*|[a-z_][a-z0-9_]*)(?:\s*(?::|=(?!=))\s*[\w.\"'-]+)?`")
_CAPS = re.compile(r"(?<![\w.])([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?![\w.])")  # GROUP_M, SMALL_OUTPUT_CONFIGS


def named_tunables(body: str) -> set[str]:
    """Names a kernel skill uses as the template's: backticked identifiers, CONFIG keys, CAPS_NAMES."""
    prose = re.sub(r"`[^`]*`", " ", body)
    words = set(re.findall(r"(?<![\w.])([A-Za-z_]\w*)(?![\w.])", prose))
    return (set(_IDENT_SPAN.findall(body)) | set(_CAPS.findall(prose)) | (words & ALL_CONFIG_KEYS))


# --- reading kgit ------------------------------------------------------------------------------

def _dict_keys(path: Path) -> set[str]:
    """The string keys of every dict a module builds, and the names its comprehensions copy."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Dict):
            found |= {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        elif isinstance(node, ast.comprehension) and isinstance(node.iter, (ast.Tuple, ast.List)):
            found |= {e.value for e in node.iter.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return found


def kgit_fields() -> set[str]:
    """Every JSON field name kgit writes or reads, from its code."""
    fields = {f.name for f in dataclasses.fields(Record)}
    fields |= set(to_json(Record(kernel="k", iteration=0, action="a", status=Status.BASELINE, value=1.0)))
    fields |= _dict_keys(ROOT / "kgit/loop/context.py") | _dict_keys(ROOT / "kgit/profiling/diagnose.py")
    fields |= _dict_keys(ROOT / "kgit/loop/profile.py")
    fields |= set(diagnose.THRESHOLDS) | set(ncu.METRICS) | set(ncu.derive({})) | set(ncu.STALL_REASONS)
    fields |= {f.name for f in dataclasses.fields(KernelConfig)}
    fields |= _dict_keys(ROOT / "kgit/harness/contract.py")  # the test's JSON, which kgit reads
    return fields


def cli_commands() -> dict[str, click.Command]:
    """'start', 'hooks install', ... -> the click command."""
    found = {}

    def walk(group: click.Group, prefix: str):
        for name, command in group.commands.items():
            found[prefix + name] = command
            if isinstance(command, click.Group):
                walk(command, prefix + name + " ")

    walk(cli, "")
    return found


def options_of(command: click.Command) -> set[str]:
    opts = {"--help", "-h"}
    for param in command.params:
        if isinstance(param, click.Option):
            opts |= set(param.opts) | set(param.secondary_opts)
    return opts


def quoted_kgit_commands(text: str) -> list[str]:
    """`kgit ...` in backticks, and kgit lines of code blocks."""
    found = [m.group(1) for m in re.finditer(r"`(kgit\s[^`]*)`", text)]
    # an indented block runs to its line's end ([^\n], not ".", which re.S lets run past it)
    for block in re.findall(r"```.*?```|(?:^(?: {4}|\t)[^\n]*\n?)+", text, re.S | re.M):
        found += [line.strip() for line in block.splitlines() if line.strip().startswith("kgit ")]
    return found


def command_problems(text: str, where: str) -> list[str]:
    commands = cli_commands()
    group_opts = options_of(cli)
    problems = []
    for quote in quoted_kgit_commands(text):
        line = re.sub(r"#.*", "", quote)
        line = re.sub(r"\"[^\"]*\"|'[^']*'", "ARG", line)  # a message may hold anything
        words = line.split()[1:]
        while words[:1] == ["-C"]:
            words = words[2:]
        if not words or words[0].startswith("-"):
            opts = group_opts
            name = ""
        else:
            name = words[0]
            if name not in commands:
                problems.append(f"{where}: `{quote}`: kgit has no command {name!r}")
                continue
            if isinstance(commands[name], click.Group) and len(words) > 1 and not words[1].startswith("-"):
                name = f"{name} {words[1]}"
                if name not in commands:
                    problems.append(f"{where}: `{quote}`: kgit has no command {name!r}")
                    continue
            opts = options_of(commands[name]) | group_opts
        for opt in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", line):
            if opt not in opts:
                problems.append(f"{where}: `{quote}`: 'kgit {name}' has no option {opt}")
    return problems


# A backticked name that reads as a JSON field: snake_case (`pct_of_peak`) or a path (`diagnosis.next_tier`);
# code (`tl.exp2`, `x=1`, calls) is not one.
_FIELD = re.compile(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)+|[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+)`")
_CODE_PREFIXES = ("tl.", "triton.", "torch.", "np.", "os.")


def field_problems(text: str, where: str, known: set[str], phrases: set[str]) -> list[str]:
    problems = []
    for sentence in sentences(text):
        quoted = set(_FIELD.findall(sentence))
        # Where a sentence quotes kgit's JSON (context --json, a record, a note), every backticked name is a field.
        if re.search(r"`kgit \w+[^`]*--json`|\brecords?\b|\bnotes?\b", sentence):
            quoted |= {m for m in re.findall(r"`([a-z][a-z0-9_]*)`", sentence)}
        for name in quoted:
            if name.startswith(_CODE_PREFIXES) or name.lower() in phrases:
                continue
            missing = [part for part in name.split(".") if part not in known]
            if missing:
                problems.append(f"{where}: `{name}` is no field kgit writes ({', '.join(missing)}): {sentence[:140]}")
    return problems


# --- the tests ---------------------------------------------------------------------------------

def test_every_tier_skill_declares_its_techniques_and_no_technique_has_two_tiers():
    owners = techniques()
    assert {tier_of(p) for p in TIER_SKILLS} == {1, 2, 3, 4, 5}
    names = {name.lower() for _, name, _ in owners.values()}
    # The techniques issue #17 names, each owned somewhere.
    for technique in ("block size", "num_warps", "num_stages", "persistent kernel", "cache hints", "rsqrt",
                      "fusion", "tma", "split-k", "coalescing", "warp specialization"):
        assert technique in owners, technique
    assert len(names) >= 15


def test_kgit_tier_names_agree_with_the_tier_skills():
    owners = techniques()
    for tier, name in diagnose.TIER_NAMES.items():
        listed = re.search(r"\((.*)\)", name).group(1)
        found = terms(listed, owners)
        assert found, f"TIER_NAMES[{tier}] names no technique a tier skill declares: {name}"
        wrong = [p for _, p in found if owners[p][0] != tier]
        assert not wrong, f"kgit calls {wrong} tier {tier}; the tier skills give them to " \
                          f"{[owners[p][2] for p in wrong]}"


@pytest.mark.parametrize("path", ALL, ids=[rel(p) for p in ALL])
def test_every_tier_a_skill_cites_owns_the_technique(path):
    owners = techniques()
    _, body = front(path)
    local = dict(owners)
    if path.parent.parent == SKILLS / "kernels":  # a kernel's own CONFIG keys name its techniques too
        names = {t[1].lower(): t for t in owners.values()}
        for key, technique in (front(path)[0].get("tunables") or {}).items():
            if str(technique).lower() in names:
                local[key] = names[str(technique).lower()]
    problems = citation_problems(body, local, rel(path))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("kernel", KERNELS, ids=[k.name for k in KERNELS])
def test_kernel_skill_tunables_exist_in_its_template(kernel):
    data, body = front(kernel / "SKILL.md")
    keys, code = template(kernel)
    declared = data.get("tunables")
    assert isinstance(declared, dict), f"{kernel.name}: no `tunables:` mapping in the front matter"
    assert set(declared) == set(keys), (f"{kernel.name}: `tunables:` {sorted(declared)} against CONFIG / "
                                        f"CONFIG_SPACE {sorted(keys)}")
    names = technique_names()
    unknown = {k: t for k, t in declared.items() if str(t).lower() not in names}
    assert not unknown, f"{kernel.name}: tunables mapped to techniques no tier skill declares: {unknown}"
    # A Triton option that a tier skill teaches (`waves_per_eu=2`, `input_precision`) may be named as a
    # change to make; a CONFIG key (of any template) may not, unless this template has it.
    options = {p for p in techniques() if p.isidentifier() and p not in {k.lower() for k in ALL_CONFIG_KEYS}}
    missing = sorted(n for n in named_tunables(body) if n not in code and n.lower() not in options)
    assert not missing, f"skills/kernels/{kernel.name}/SKILL.md names what its template lacks: {missing}"


@pytest.mark.parametrize("path", ALL, ids=[rel(p) for p in ALL])
def test_quoted_kgit_commands_and_options_exist(path):
    problems = command_problems(path.read_text(), rel(path))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", GENERAL, ids=[rel(p) for p in GENERAL])
def test_quoted_json_fields_exist_in_kgit(path):
    _, body = front(path)
    problems = field_problems(body, rel(path), kgit_fields(), set(techniques()))
    assert not problems, "\n".join(problems)


def tune_tier_problems(body: str, where: str, key_tiers: dict[str, set[int]]) -> list[str]:
    """Paragraphs and list items that say at which tier kgit tune records its steps: each must give kgit's
    rule (the tier owning the key's technique, by the kernel skill's `tunables:`) or name a key at the tier
    that rule gives it (key_tiers: every kernel's CONFIG key -> its tiers, skillfiles.tunable_tiers)."""
    problems = []
    for item in re.split(r"\n\s*\n|\n(?=\s*[-*] )", re.sub(r"```.*?```", " ", body, flags=re.S)):
        keys = [k for k in re.findall(r"`([A-Z][A-Z0-9_]+)`", item) if k in key_tiers]  # the item's keys
        for text in sentences(item):
            if "kgit tune" not in text or not re.search(r"\brecord", text) or "tunables" in text:
                continue
            said = {int(t) for t in re.findall(r"\b(?:as|at|under) tier (\d)", text)}
            if not keys or not said or not all(key_tiers[k] & said for k in keys):
                problems.append(f"{where}: says how kgit tune records a step's tier without kgit's rule: {text[:160]}")
    return problems


def key_tiers() -> dict[str, set[int]]:
    found: dict[str, set[int]] = {}
    for kernel in KERNELS:
        tiers = skillfiles.tunable_tiers(ROOT, kernel.name)
        for key in template(kernel)[0]:
            found.setdefault(key, set()).add(skillfiles.tier_of_change(tiers, [key]))
    return found


@pytest.mark.parametrize("path", ALL, ids=[rel(p) for p in ALL])
def test_every_skill_says_the_same_of_the_tier_kgit_tune_records(path):
    _, body = front(path)
    problems = tune_tier_problems(body, rel(path), key_tiers())
    assert not problems, "\n".join(problems)


# --- the checks can fail -----------------------------------------------------------------------

def test_the_checks_catch_what_they_are_for():
    owners = techniques()
    assert citation_problems("Try a persistent kernel (tier 1).", owners, "x")
    assert not citation_problems("Try a persistent kernel (tier 4).", owners, "x")
    assert citation_problems("Tiers **2, 1**: fusion first.", owners, "x")
    assert command_problems("`kgit tuen softmax`", "x") and command_problems("`kgit step --teir 1`", "x")
    assert not command_problems('`kgit step -m "BLOCK 1 --> 2" --tier 1`', "x")
    assert field_problems("`kgit context --json` lists `tried` and `next_stepp`.", "x", kgit_fields(), set())
    assert not field_problems("`kgit context --json` lists `tried` and `next_step`.", "x", kgit_fields(), set())
    assert "BLOCK_Q" in named_tunables("Tier 1: `BLOCK_Q`.") and "PERSISTENT" in named_tunables("PERSISTENT 1")
    tiers = key_tiers()
    assert tiers["PERSISTENT"] == {4}
    assert tune_tier_problems("`kgit tune` records each of its steps under tier 1, whichever key.", "x", tiers)
    assert tune_tier_problems("- `PERSISTENT`: `kgit tune` records that step as tier 1.", "x", tiers)
    assert not tune_tier_problems("- `PERSISTENT`: `kgit tune` records that step as tier 4.", "x", tiers)
    assert not tune_tier_problems("`kgit tune` records a step at the tier of its key (`tunables:`).", "x", tiers)
