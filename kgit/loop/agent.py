"""kgit run --agent: the loop with an outside coding agent making each change.

Each turn: kgit renders the context (what was tried, the diagnosis, the next tier, the skills to read),
gives it to the agent on standard input and in a file, runs the agent with a time limit, then steps on
what it changed. The agent talks back through files named in its environment:

  KGIT_CONTEXT_FILE / KGIT_CONTEXT_JSON   the context, as text and as JSON
  KGIT_KERNEL_PATH                        the one file it may edit
  KGIT_ACTION_FILE                        where it writes its change in one line, and optionally
                                          a second line 'tier: N'

Each turn's record keeps the turn (`agent`): the command, the context the agent was given and what
it printed, each cut to its last AGENT_TEXT_CHARS characters, so that `kgit show N` says why a change
was made beside the change itself.

A turn that cannot be tested (the agent failed, changed nothing, or changed the test or another file)
is recorded as a FAILED iteration with its changes kept as the attempt, and the loop goes on; three
such turns in a row stop it (AGENT_FAILING). So is a turn whose change kgit step refuses before running
it (steps.NotMeasured): nothing new to measure (comments, whitespace or docstrings only, or the kernel
code of an earlier iteration), code the test never runs, or a CONFIG outside its template's CONFIG_SPACE;
its record says which, and the next turn's context shows the agent. When the context would tell the
agent that every tier of the order was tried, the run stops there (TIERS_TRIED) instead of asking it
for a change it was told not to make.

The run holds the repository's lock throughout, the agent's turns included: an agent that runs
`kgit step` itself is refused (read-only commands such as `kgit context` still answer), so its
change is judged once, by this loop.
"""

from __future__ import annotations

import json
import re

from kgit import runner
from kgit.errors import KgitError
from kgit.git import read, refs, write
from kgit.git.command import Repo
from kgit.loop import steps
from kgit.model.record import StopReason
from kgit.loop import context
from kgit.render import analysis
from kgit.state import lock

MAX_BAD_TURNS = 3
AGENT_TEXT_CHARS = 8000  # of the context and of the agent's output kept in a record: notes stay small


def run(repo: Repo, kernel: str, command: str, agent_timeout_s: float, overrides: dict,
        progress, on_outcome) -> StopReason:
    """Drive the agent until a stop reason, which it returns. Under the lock (kgit.loop.recovery.locked)."""
    baseline = steps.ensure_started(repo, kernel, overrides, progress)
    if baseline:
        on_outcome(baseline)
    bad_turns, turns = 0, 0
    while True:
        state = steps.next_round(repo, kernel, overrides)
        cfg = state.cfg
        if state.stopped:
            if not turns and not baseline:  # nothing done: as a step would, say why
                raise steps.stopped_refusal(kernel, state)
            return state.stopped
        if bad_turns >= MAX_BAD_TURNS:
            return StopReason.AGENT_FAILING

        turns += 1
        data = context.build(repo, kernel, overrides)  # this run's options: a limit raised here included
        if data["diagnosis"]["tiers_exhausted"]:
            return StopReason.TIERS_TRIED
        text = analysis.context_text(data)
        files = _turn_files(repo)
        files["context"].write_text(text)
        files["context_json"].write_text(json.dumps(data, indent=2, default=str))
        files["action"].unlink(missing_ok=True)
        env = {
            "KGIT_CONTEXT_FILE": str(files["context"]), "KGIT_CONTEXT_JSON": str(files["context_json"]),
            "KGIT_ACTION_FILE": str(files["action"]), "KGIT_KERNEL_PATH": cfg.kernel_path, "KGIT_KERNEL": kernel,
            lock.AGENT_TURN: "1",
        }
        if progress:
            progress.begin(f"the agent ({command})", None)
        before = read.rev(repo, "HEAD")
        done = runner.run_command(["/bin/sh", "-c", command], repo.root, agent_timeout_s, env, text,
                                  on_tick=progress.tick if progress else None)
        if progress:
            progress.end()
        _take_back_commits(repo, kernel, before)
        action, tier = read_action(files["action"])
        changed = read.modified_tracked_files(repo)
        failure = done.failure(agent_timeout_s)
        if failure:
            reason = f"agent {failure}"
        elif not changed:
            reason = "agent changed nothing"
        elif changed != [cfg.kernel_path]:
            reason = f"agent changed files besides the kernel: {', '.join(p for p in changed if p != cfg.kernel_path)}"
        else:
            reason = None
        turn = turn_record(command, text, done)
        if reason:
            bad_turns += 1
            outcome = steps.reject(repo, action, tier, reason, overrides, output_tail=runner.tail(done),
                                   agent_turn=turn)
        else:
            try:
                outcome = steps.step(repo, action, tier, overrides, progress, agent_turn=turn)
                bad_turns = 0
            except steps.NotMeasured as refused:  # nothing new to measure, untested, or a CONFIG forbidden
                bad_turns += 1
                outcome = steps.reject(repo, action, tier, f"agent {refused.reason}", overrides,
                                       output_tail=runner.tail(done), agent_turn=turn)
        on_outcome(outcome)
        steps.raise_if_interrupted(outcome)


def turn_record(command: str, context_text: str, done: runner.Finished) -> dict:
    """What a record keeps of the agent's turn; the ends of long texts, where the conclusions are."""
    return {"command": command, "seconds": round(done.duration_s, 1), "exit_status": done.returncode,
            "context": context_text[-AGENT_TEXT_CHARS:], "transcript": runner.tail(done, AGENT_TEXT_CHARS)}


def _take_back_commits(repo: Repo, kernel: str, before: str) -> None:
    """An agent that committed its change itself: its commits go back into the working tree (staged),
    so that the change is judged like any other edit and the branch only ever holds kgit's commits."""
    branch = refs.branch(kernel)
    if read.current_kernel(repo) != kernel:
        raise KgitError(f"the agent left {branch} (HEAD is now {read.current_branch(repo) or 'detached'}): "
                        "the loop stops", f"check out {branch} to go on")
    if read.rev(repo, "HEAD") != before:
        write.uncommit(repo, before)


def read_action(path) -> tuple[str, int | None]:
    """The agent's one-line description of its change and its tier, from the action file."""
    try:
        lines = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        lines = []
    action = lines[0][:200] if lines else "agent change (no description given)"
    tier = None
    for line in lines[1:]:
        match = re.fullmatch(r"tier:\s*([1-5])", line, re.IGNORECASE)
        if match:
            tier = int(match.group(1))
    return action, tier


def _turn_files(repo: Repo) -> dict:
    folder = repo.kgit_dir / "agent"
    folder.mkdir(parents=True, exist_ok=True)
    return {"context": folder / "context.md", "context_json": folder / "context.json", "action": folder / "action.txt"}
