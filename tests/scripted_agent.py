"""A coding agent, scripted, that knows kgit only as a user can: its README, the skill files kgit names,
and what kgit prints under --json. It never imports kgit nor reads its code; it reads and edits the
repository's own files (the kernel file kgit names, kgit.yaml).

What it knows of kernels is what the skills say, read from their text each time: the tier skills'
`techniques:`, a kernel skill's `tunables:`, and tier 1's rule for a block size (elements per thread =
BLOCK / (32 * num_warps), within the range the skill gives; num_warps at its default where the launcher
passes none; powers of two). It writes down two things a test can hold it to: every refusal kgit gave it
(`refusals`: each must say why, as the README promises a refusal does) and every `problem`: a guess it
would have had to make, a README or skill that does not say what it relies on, or kgit's JSON
contradicting the skills.
"""

from __future__ import annotations

import ast
import json
import math
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

KEPT = ("IMPROVED", "TARGET_MET")


@dataclass
class Agent:
    root: Path  # the repository it works in
    readme: Path  # kgit's README.md
    env: dict
    refusals: list = field(default_factory=list)  # {"command", "error", "hint"}: what kgit refused, and why
    problems: list = field(default_factory=list)
    steps: list = field(default_factory=list)  # every step's JSON record, in order

    # --- kgit, as its README describes it --------------------------------------------------------------

    def kgit(self, *args: str) -> dict | None:
        """`kgit ARGS --json`: the object it prints, or None for a refusal (kept in `refusals`)."""
        proc = subprocess.run([sys.executable, "-m", "kgit", *args, "--json"], cwd=self.root, capture_output=True,
                              text=True, env=self.env)
        try:
            obj = json.loads(proc.stdout)  # "prints exactly one JSON object on stdout, a refusal included"
        except json.JSONDecodeError:
            self.problems.append(f"kgit {' '.join(args)} (exit {proc.returncode}) printed no one JSON object: "
                                 f"{proc.stdout[-300:]!r} {proc.stderr[-300:]!r}")
            return None
        if proc.returncode == 0:
            return obj
        refusal = {"command": " ".join(args), "error": obj.get("error"), "hint": obj.get("hint")}
        self.refusals.append(refusal)
        explained = isinstance(refusal["error"], str) and refusal["error"].strip() and "\n" not in refusal["error"]
        if proc.returncode != 1 or not explained or "Traceback" in proc.stderr:
            self.problems.append(f"an unexplained refusal (exit {proc.returncode}): {proc.stdout!r} "
                                 f"{proc.stderr[-300:]!r}")
        return None

    def git(self, *args: str) -> None:
        subprocess.run(["git", *args], cwd=self.root, check=True, capture_output=True)

    # --- a repository of someone else's: kgit.yaml as the README and the loop skill say ---------------

    def enter(self, kernel: str, kernel_path: str, test_path: str) -> dict | None:
        """kgit start, settling each refusal as its words and the skills say; the baseline's record."""
        for _ in range(3):
            record = self.kgit("start", kernel)
            if record is not None:
                return record
            said = " ".join(filter(None, (self.refusals[-1]["error"], self.refusals[-1]["hint"])))
            if "kgit.yaml has no entry" in said and "kernel_path and test_path" in said:
                self.write_config(kernel, {"kernel_path": kernel_path, "test_path": test_path})
            elif "no JSON object" in said or "test_command" in said:  # the hint names the settings
                self.run_test_as_it_is(kernel, test_path)
            else:
                self.problems.append(f"a refusal at start the agent cannot act on: {said}")
                return None
        self.problems.append("kgit start refused three times")
        return None

    def run_test_as_it_is(self, kernel: str, test_path: str) -> None:
        """The loop skill: a test that prints no JSON is not rewritten; a pytest file runs as it is with
        test_command, judged by its exit status, timed by kgit's own device time where it prints no figure."""
        loop = self.said(self.kgit_skill("optimize-loop"))
        rule = ("do not rewrite it", "pytest file", "test_command:", "verdict: exit_status", "metric: device_us")
        missing = [words for words in rule if words not in loop]
        if missing:
            self.problems.append(f"the loop skill no longer says how to run a test that prints no JSON: {missing}")
            return
        self.write_config(kernel, {"test_command": f"python -m pytest -q {test_path}", "verdict": "exit_status",
                                   "metric": "device_us"})

    def write_config(self, kernel: str, settings: dict) -> None:
        """Add settings to the kernel's kgit.yaml entry, each a key the README documents, and commit it
        (kgit start wants a clean tree)."""
        section = self.readme.read_text().split("## Configuration: kgit.yaml", 1)[-1].split("\n## ", 1)[0]
        for key in settings:
            if not re.search(rf"^\s+{key}:", section, re.M):
                self.problems.append(f"the README's kgit.yaml does not document {key!r}")
        path = self.root / "kgit.yaml"
        data = yaml.safe_load(path.read_text()) if path.exists() else {}
        data.setdefault(kernel, {}).update(settings)
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        self.git("add", "kgit.yaml")
        self.git("commit", "-qm", f"kgit.yaml: {', '.join(settings)} for {kernel}")

    # --- the loop: context, one change, step, verdict --------------------------------------------------

    def improve(self, kernel: str, max_steps: int) -> dict | None:
        """Steps one change at a time until one is kept; its record, or None."""
        refused = set()  # (key, value) kgit refused: never offered again
        for _ in range(max_steps):
            ctx = self.kgit("context", kernel)
            if ctx is None:
                return None
            change = self.choose(ctx, refused)
            if change is None:
                return None
            key, old, new, tier = change
            kernel_file = self.root / ctx["files"]["kernel"]
            in_config = ctx["tunables"] is not None
            kernel_file.write_text(self.edit(kernel_file.read_text(), key, old, new, in_config))
            record = self.kgit("step", "-m", f"{key} {old}->{new}", "--tier", str(tier))
            if record is None:  # a refusal changes nothing: the edit it refused is still there, to put back
                refused.add((key, new))
                self.git("checkout", "--", ctx["files"]["kernel"])
                continue
            self.steps.append(record)
            # the loop skill: a change with checks asks for a look; the agent says so to the user, in its words
            self.problems += [f"a check without a message: {c}" for c in record["checks"] if not c.get("message")]
            if record["status"] in KEPT:
                return record
        return None

    def choose(self, ctx: dict, refused: set) -> tuple | None:
        """One change of the tier the context names: a key of that tier and a value the skills point to."""
        diag = ctx["diagnosis"]
        tier = diag["next_tier"]
        if ctx["stopped"] or tier is None:
            self.problems.append(f"the loop stopped before a change was kept: {ctx['stopped'] or ctx['next_step']}")
            return None
        if ctx["files"]["kernel"] not in ctx["next_step"] or f"--tier {tier}" not in ctx["next_step"]:
            self.problems.append(f"next_step names neither the kernel file nor the tier: {ctx['next_step']}")
        diagnosed = self.kgit("diagnose", ctx["kernel"])  # the loop skill's step 3, by the name start took
        if diagnosed is None or (diagnosed["tier_order"], diagnosed["next_tier"]) != (diag["tier_order"], tier):
            self.problems.append(f"kgit diagnose and kgit context disagree: {diagnosed} against {diag}")
        tier_skills = [p for p in ctx["skills"] if re.search(rf"(^|/)skills/tier{tier}-[^/]+/SKILL\.md$", p)]
        if len(tier_skills) != 1:
            self.problems.append(f"the context names no one skill of tier {tier}: {ctx['skills']}")
            return None
        techniques = self.front_matter(tier_skills[0]).get("techniques") or {}
        candidates = self.keys_of_tier(ctx, tier, techniques)
        if "block size" not in candidates.values():
            self.problems.append(f"tier {tier}: the agent knows no change for {sorted(candidates)} "
                                 f"({sorted(techniques)}): it would guess")
            return None
        key = next(k for k, technique in candidates.items() if technique == "block size")
        value = self.block_size(ctx, key, tier_skills[0], refused)
        return None if value is None else (key, self.current(ctx, key), value, tier)

    def keys_of_tier(self, ctx: dict, tier: int, techniques: dict) -> dict:
        """The kernel's tunables whose technique the tier skill owns -> that technique. A template's
        CONFIG keys, by the kernel skill's `tunables:` (and kgit's tier for each must agree); else, as the
        loop skill says of a kernel of yours, a module constant named for the technique."""
        phrases = {str(p).lower(): name for name, aliases in techniques.items() for p in [name, *(aliases or [])]}
        tunables = ctx["tunables"]
        if tunables is not None:
            if "error" in tunables:
                self.problems.append(f"the context reports the kernel's CONFIG as broken: {tunables['error']}")
                return {}
            skill = ctx["files"]["kernel_skill"]
            mapped = (self.front_matter(skill).get("tunables") or {}) if skill else {}
            found = {}
            for key, key_tier in tunables["tiers"].items():  # a key no skill maps is named for its technique
                technique = phrases.get(str(mapped.get(key, key.replace("_", " "))).lower())
                if (technique is not None) != (key_tier == tier):
                    self.problems.append(f"kgit puts {key} in tier {key_tier}; the skills map it to "
                                         f"{mapped.get(key)!r}")
                if technique is not None and key_tier == tier:
                    found[key] = technique
            return found
        loop = [p for p in ctx["skills"] if p.endswith("skills/optimize-loop/SKILL.md")]
        if not loop or "module constant" not in self.said(loop[0]):
            self.problems.append("the context reports no CONFIG and the loop skill says nothing of module constants")
            return {}
        source = (self.root / ctx["files"]["kernel"]).read_text()
        constants = [node.targets[0].id for node in ast.parse(source).body
                     if isinstance(node, ast.Assign) and len(node.targets) == 1
                     and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Constant)
                     and type(node.value.value) is int]
        return {name: phrases[name.lower().replace("_", " ")] for name in constants
                if name.lower().replace("_", " ") in phrases}

    def block_size(self, ctx: dict, key: str, tier_skill: str, refused: set) -> int | None:
        """Tier 1's rule: the nearest block size, untried, whose elements per thread fall in the skill's range."""
        text = self.said(tier_skill)
        rule = re.search(r"Elements per thread = BLOCK / \(32 \* num_warps\)\.\*\* Aim for (\d+)-(\d+) elements", text)
        default = re.search(r"\*\*num_warps\*\*: (\d+) by default", text)
        if not rule or not default or "BLOCK sizes are powers of two" not in text:
            self.problems.append(f"{tier_skill} no longer gives the block size rule the agent follows")
            return None
        low, high = int(rule.group(1)), int(rule.group(2))
        tunables = ctx["tunables"]
        warps = (tunables or {}).get("config", {}).get("num_warps", int(default.group(1)))
        values = tunables["space"][key] if tunables else [2 ** n for n in range(4, 17)]
        current = self.current(ctx, key)
        tried = {t["action"] for t in ctx["tried"]}
        fitting = [v for v in values if low <= v / (32 * warps) <= high and v != current
                   and f"{key} {current}->{v}" not in tried and (key, v) not in refused]
        if not fitting:
            self.problems.append(f"no untried {key} gives {low}-{high} elements a thread at {warps} warps: {values}")
            return None
        return min(fitting, key=lambda v: abs(math.log2(v) - math.log2(current)))

    def current(self, ctx: dict, key: str) -> int:
        if ctx["tunables"] is not None:
            return ctx["tunables"]["config"][key]
        found = re.search(rf"^{key} = (\d+)", (self.root / ctx["files"]["kernel"]).read_text(), re.M)
        return int(found.group(1))

    @staticmethod
    def edit(source: str, key: str, old: int, new: int, in_config: bool) -> str:
        if not in_config:
            return re.sub(rf"^{key} = {old}\b", f"{key} = {new}", source, count=1, flags=re.M)
        lines = source.splitlines(keepends=True)
        at = next(i for i, line in enumerate(lines) if line.startswith("CONFIG = {"))
        lines[at] = lines[at].replace(f'"{key}": {old}', f'"{key}": {new}', 1)
        return "".join(lines)

    # --- skill files ------------------------------------------------------------------------------------

    def kgit_skill(self, name: str) -> str:
        """A skill of kgit's own, beside its README: what the agent reads before kgit names any."""
        return str(self.readme.parent / "skills" / name / "SKILL.md")

    def skill_text(self, path: str) -> str:
        full = Path(path) if Path(path).is_absolute() else self.root / path
        if not full.is_file():
            self.problems.append(f"a skill kgit names does not exist: {path}")
            return ""
        return full.read_text()

    def said(self, path: str) -> str:
        """A skill's text with its line breaks taken out, to find a rule however its lines wrap."""
        return " ".join(self.skill_text(path).split())

    def front_matter(self, path: str) -> dict:
        text = self.skill_text(path)
        return yaml.safe_load(text.split("---")[1]) if text.startswith("---") else {}
