"""An agent that does nothing but follow `kgit context --json` (its next tier, its skill files, its
next_step) runs the loop to a stop without meeting a contradiction or having to guess.

The agent below knows nothing of kgit but the context it is handed and the skill files it names. Each
turn it checks what it is told against itself and the skills, writes down every contradiction or
guess it would have had to make, and applies one technique of the tier it was sent to, chosen from that
tier skill's own list. The fake kernel's world decides what a technique does: tier 2 gains 20%, tier 1
changes nothing measurable, tier 3 loses 20%.
"""

import json
import sys

from kgit.profiling import diagnose

AGENT = r'''
import json, os, pathlib, re, sys
import yaml

journal = pathlib.Path(sys.argv[1])
problems = []
ctx = json.loads(pathlib.Path(os.environ["KGIT_CONTEXT_JSON"]).read_text())
diag = ctx["diagnosis"]
tier = diag["next_tier"]

if ctx["stopped"] or tier is None:
    problems.append(f"asked for a change after the loop stopped: {ctx['stopped']}, next tier {tier}")
if tier not in diag["tier_order"] or tier in diag["tried_tiers"]:
    problems.append(f"next tier {tier} is outside the order {diag['tier_order']} or tried {diag['tried_tiers']}")
if ctx["files"]["kernel"] != os.environ["KGIT_KERNEL_PATH"]:
    problems.append("the context and the environment name different kernel files")
if ctx["files"]["kernel"] not in ctx["next_step"] or f"--tier {tier}" not in ctx["next_step"]:
    problems.append(f"next_step does not say which file and tier: {ctx['next_step']}")
if ctx["files"]["test"] in ctx["next_step"]:
    problems.append("next_step points at the test, which the loop never edits")

def front_matter(path):
    text = pathlib.Path(path).read_text()
    return yaml.safe_load(text.split("---")[1])

for path in ctx["skills"]:
    if not pathlib.Path(path).is_file():
        problems.append(f"context names a skill that does not exist: {path}")
tier_skills = [p for p in ctx["skills"] if re.search(r"(^|/)skills/tier\d", p)]
if [front_matter(p)["name"].startswith(f"tier{tier}-") for p in tier_skills] != [True]:
    problems.append(f"the skills named are not the one skill of tier {tier}: {tier_skills}")
techniques = list(front_matter(tier_skills[0])["techniques"]) if tier_skills else []

# never repeat a change that lost beyond the noise; one within the noise only in another form
used = {t["action"]: t["status"] for t in ctx["tried"]}
fresh = [name for name in techniques if f"{name} (tier {tier})" not in used]
if not fresh:
    problems.append(f"every technique of tier {tier} was tried, yet kgit sends the agent there: it would guess")
else:
    action = f"{fresh[0]} (tier {tier})"
    kernel = pathlib.Path(ctx["files"]["kernel"])
    text = kernel.read_text()
    metric = float(re.search(r"METRIC = ([0-9.]+)", text).group(1))
    effect = {2: 1.2, 1: 1.0, 3: 0.8}.get(tier, 1.0)
    # a change of code (kgit refuses one of comments only), whose effect on speed the tier decides
    text = re.sub(r"METRIC = [0-9.]+", f"METRIC = {metric * effect:.1f}", text) + f"TRIED = {action!r}\n"
    kernel.write_text(text)
    pathlib.Path(os.environ["KGIT_ACTION_FILE"]).write_text(f"{action}\ntier: {tier}\n")
with journal.open("a") as out:
    out.write(json.dumps({"tier": tier, "next_step": ctx["next_step"], "problems": problems}) + "\n")
'''


def test_an_agent_that_only_follows_the_context_reaches_a_stop_without_a_guess(ws, tmp_path):
    script, journal = tmp_path / "agent.py", tmp_path / "journal.jsonl"
    script.write_text(AGENT)
    result = ws.ok("run", "fake", "--agent", f"{sys.executable} {script} {journal}", "--max-iterations", "10",
                   "--json").json()
    turns = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [problem for turn in turns for problem in turn["problems"]] == []
    records = result["iterations"][1:]
    # memory-bound with no profiler: order 1, 2, 3; tier 1 closed by three attempts within the noise
    # (noise never closes a tier); tier 2 by its gain; tier 3 by three losses (one loss may be the
    # noise's, and is one idea's verdict); then every tier was tried
    assert [(r["tier"], r["status"]) for r in records] == [
        (1, "WITHIN_NOISE"), (1, "WITHIN_NOISE"), (1, "WITHIN_NOISE"), (2, "IMPROVED"),
        (3, "REGRESSED"), (3, "REGRESSED"), (3, "REGRESSED")]
    assert len({r["action"] for r in records}) == 7  # no change repeated in the same form
    assert result["stop_reason"] == "TIERS_TRIED"
    # after the run, the context, the loop skill and kgit say the same thing: stop
    context = ws.ok("context", "--json").json()
    assert context["diagnosis"]["tiers_exhausted"] and context["next_step"].startswith("every tier of the order was tried: stop")
    ws.check_invariants()


def test_the_loop_skill_states_the_rule_kgit_applies_to_close_a_tier():
    from pathlib import Path

    text = " ".join((Path(__file__).parents[2] / "skills/optimize-loop/SKILL.md").read_text().split())
    assert f"after {diagnose.TIER_ATTEMPTS} attempts that kept nothing" in text
    assert "once a change in it was kept" in text and "neither does one loss" in text
