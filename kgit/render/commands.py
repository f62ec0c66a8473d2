"""What each command prints for a person (stdout), and kgit's notes to them (stderr lines)."""

from __future__ import annotations

from kgit.git import refs
from kgit.model.record import Environment, InvalidNote, Record, Spread, StopReason, same_environment
from kgit.model.decide import DETECTABLE_WARNING_PCT
from kgit.model.remeasured import Remeasured
from kgit.render.text import (LOG_HEADERS, SUMMARY_HEADERS, SUMMARY_LEGEND, best_measured, doubt_lines, final_line,
                              gain, gpu_label, log_row, metric, numbered_twice, pct_of_peak, status_words,
                              summary_row, when)


def init(done, kernel: str) -> str:
    """What kgit init wrote (a scaffold.Initialized), what its test runs and leaves out, and what next."""
    launcher = done.launcher
    runs = f"it calls {launcher.call}" + (f", and {launcher.autograd}.backward through autograd" if launcher.autograd
                                          else "")
    if launcher.kernels:
        runs += f"; it leads to {', '.join(launcher.kernels)}"
    lines = [f"wrote {done.test}: {runs}"]
    if launcher.left_out:
        lines.append(f"it leaves out {', '.join(launcher.left_out)}: {launcher.call} does not lead to them, so the "
                     "test never runs them and kgit step refuses a change to them")
    unsure = [p.name for p in launcher.params if p.check]
    lines.append("fill in the block marked FILL IN in it: reference() (required)"
                 + (f", and CHECK what it passes for {', '.join(unsure)}" if unsure else ""))
    lines.append(f"added to kgit.yaml:\n{done.entry.rstrip()}")
    lines.append(f"then: python {done.test} --check-only, git add, git commit, kgit start {kernel}")
    return "\n".join(lines)


def start(record: Record, commit: str, never_ran: list[str] = ()) -> str:
    kernel = record.kernel
    text = (
        f"{kernel}: baseline {metric(record.value, record.metric, record.cpu_timing)}{pct_of_peak(record)} "
        f"on {record.gpu or 'an unknown device'}; branch {refs.branch(kernel)}, tag {refs.tag(kernel)} "
        f"at {commit[:10]}"
    )
    if record.target is not None:
        text += f"\ntarget: {metric(record.target, record.metric, record.cpu_timing)}"
        if record.reason:  # a target kgit proposed: it says where it comes from
            text += f" ({record.reason}; set another with --target-value on the next step)"
    measured = record.measurement
    if measured and measured.figure:
        text += f"\nfigure: {measured.figure} (name another with 'metric' in kgit.yaml)"
    if measured and measured.spread:
        text += "\n" + detectable(measured.spread)
    if never_ran:
        text += (f"\nthe test never ran {', '.join(never_ran)} (it launched {', '.join(record.launched)}): "
                 "a step that changes them is refused")
    text += "".join(f"\n{line}" for line in doubt_lines(record))
    if record.stop_reason:
        text += f"\nThe baseline already meets the target: {record.stop_reason}."
    return text


def detectable(spread: Spread) -> str:
    """What kgit start's runs say a step can detect, and a warning when it is little."""
    shown = {"test": "the test's figure", "device": "kgit's device time of the kernel's launches"}
    decides, keepable = shown[spread.decides_on], spread.smallest_keepable_pct
    pairs = f"{spread.max_pairs} pairs (max_pairs)"
    others = {name: pct for name, pct in spread.sd_pct.items() if name != spread.decides_on}
    line = f"decided on {decides}"
    if spread.decides_on in spread.sd_pct:
        line += f", which varies {spread.sd_pct[spread.decides_on]:.2g}% from run to run"
    line += "".join(f" ({shown[name]} varies {pct:.2g}%)" for name, pct in others.items())
    if keepable is None:
        return line + "; the noise is unknown"
    line += f"; the smallest change a step can keep at {pairs}: {keepable:.1f}%"
    if keepable > DETECTABLE_WARNING_PCT:
        line += (f"\nwarning: a step cannot keep a change under {keepable:.0f}% here, above "
                 f"{DETECTABLE_WARNING_PCT:g}%")
        line += f": {spread.why}" if spread.why else "; a steadier test, or more pairs, would see more"
    elif spread.why:
        line += f"\n({spread.why})"
    return line


def step(record: Record, commit: str, with_tail: bool) -> str:
    cpu = record.cpu_timing
    best_before = metric(record.best_before, record.metric, cpu)
    lines = [
        f"iteration {record.iteration}: {record.status}; the best stays at {best_before}" if record.value is None
        else f"iteration {record.iteration}: {record.status}  {metric(record.value, record.metric, cpu)}"
             f"{pct_of_peak(record)}  {gain(record)} vs best {best_before}",
    ]
    if record.reason:
        lines.append(f"reason: {record.reason}")
    if record.untested:
        lines.append(f"UNTESTED: the test never ran {', '.join(record.untested)}, which this change touches "
                     "(--allow-untested): its verdict says nothing of them")
    lines += doubt_lines(record)
    if record.kept:
        lines.append(f"kept at {commit[:10]}; {refs.tag(record.kernel)} moved there")
    elif record.status.on_branch:
        lines.append(f"kept on {refs.branch(record.kernel)} at {commit[:10]}; {refs.tag(record.kernel)} stays on the best")
    else:
        lines.append(f"reverted; the attempt stays at {refs.attempt_ref(record.kernel, record.iteration)}")
    if with_tail and record.output_tail:
        tail = record.output_tail.strip().splitlines()[-5:]
        lines += [_tail_label(record)] + [f"  {line}" for line in tail]
    if record.stop_reason:
        lines.append(f"loop stopped: {record.stop_reason}")
    return "\n".join(lines)


def loop_round(record: Record, commit: str) -> str:
    """One iteration of tune or run, as it happens."""
    if record.iteration == 0:
        return f"{record.kernel}: baseline {metric(record.value, record.metric, record.cpu_timing)}"
    return f"[{record.action}] " + step(record, commit, with_tail=False)


def loop_summary(what: str, stopped: StopReason, best: Record) -> str:
    why = {StopReason.SPACE_EXHAUSTED: " (every configuration it may run was measured)",
           StopReason.NO_EXPECTED_GAIN: " (every neighbour of the best was measured, and no configuration left is "
                                        "expected to gain min_gain_pct)"}.get(stopped, "")
    return f"{what} stopped: {stopped}{why}; best is iteration {best.iteration} ({best.action})"


def best(record: Record, commit: str, tag: str, tag_commit: str | None, better: str | None = None,
         again: Remeasured | None = None) -> str:
    """kgit best: the best's figure on its line, then which runs it is and when, and the latest
    re-measurement of it (again: kgit.model.remeasured.latest)."""
    where = ("" if tag_commit == commit else " (missing: 'kgit doctor --fix' sets it)" if tag_commit is None
             else f" (on {tag_commit[:10]}, not the best: 'kgit doctor --fix' moves it)")
    lower = " (lower is better)" if better == "lower" else ""
    host = f" ({record.environment.host})" if record.environment and record.environment.host else ""
    return (
        f"{record.kernel}: best is iteration {record.iteration} ({record.action}): "
        f"{metric(record.value, record.metric, record.cpu_timing)}{lower}{pct_of_peak(record)} "
        f"on {record.gpu or 'an unknown device'}{host}, commit {commit[:10]}, tag {tag}{where}\n"
        f"measured: {best_measured(record, again)}"
    )


def log(runs, left_behind: set[str] = frozenset()) -> str:
    """One table per run (history.Run: a loop on one device), each with its own final line: records of
    two devices are never counted together. left_behind: commits of kept iterations on a line the
    branch did not go on with (history.left_behind)."""
    if len(runs) == 1:
        return _log_table(runs[0].pairs, left_behind) + "\n" + LOG_LEGEND + "\n" + _final(runs[0], left_behind)
    parts = []
    for run in runs:
        records = run.records
        started = f", started {when(run.started)}" if run.started else ""
        reverted = sum(not r.status.on_branch for r in records)
        parts.append(f"{records[0].kernel} on {gpu_label(records)}{started}: {len(records)} "
                     f"record{'s' if len(records) != 1 else ''}, {reverted} reverted\n"
                     + _log_table(run.pairs, left_behind) + "\n" + _final(run, left_behind))
    return "\n\n".join(parts) + f"\n\n{len(runs)} runs, each apart: a run is one loop from its baseline on one " \
                                 "device, and figures of two devices are not comparable\n" + LOG_LEGEND


def _log_table(pairs: list[tuple[str, Record]], left_behind: set[str]) -> str:
    from tabulate import tabulate

    rows, last = [], None
    final = max((r.iteration for _, r in pairs), default=0)
    twice = numbered_twice([r for _, r in pairs])
    for sha, record in pairs:
        if record.environment and last and not same_environment(record.environment, last):
            rows.append(["", f"-- measured elsewhere from here: {environment(record.environment)} --"])
        last = record.environment or last
        row = log_row(record, resumed=record.iteration < final, twice=twice) + [sha[:10]]
        if sha in left_behind:
            row[LOG_HEADERS.index("Status")] += " (on a line not taken)"
        rows.append(row)
    # Every cell is already text: telling tabulate so spares it guessing the type of thousands of cells.
    return tabulate(rows, LOG_HEADERS + ["Commit"], disable_numparse=True)


def _final(run, left_behind: set[str]) -> str:
    """The run's final line: of the branch's line where the run has kept iterations on it (a joined line's
    best is not this branch's), else of the whole run (another repository's, whose line this branch never
    took)."""
    on_line = [r for sha, r in run.pairs if sha not in left_behind]
    return final_line(on_line if any(r.kept for r in on_line) else run.records)


# A user read "0.0015 GBps  -0.7%" beside a best of 0.00107 as a contradiction: the two columns come from
# different runs, and the line says so.
LOG_LEGEND = ("Metric: the iteration's own median. Delta: against the best run beside it, pair by pair, in the "
              "same session (with its interval), so it can differ in sign from Metric against an older best.")


def environment(env: Environment) -> str:
    """Where a measurement was taken, in a few words."""
    where = env.gpu or env.cpu or env.device or "?"
    return (f"{where} on {env.host or '?'}, driver {env.driver or '-'}, torch {env.torch or '-'}, "
            f"triton {env.triton or '-'}")


def overview(loops) -> str:
    """kgit status with no kernel: every loop, a line each."""
    from tabulate import tabulate

    rows = [[loop.kernel, loop.branch or "(records only)", str(loop.iterations), str(loop.reverted),
             metric(loop.best.value, loop.best.metric, loop.best.cpu_timing) if loop.best else "-",
             f"iter {loop.best.iteration}" if loop.best else "-"] for loop in loops]
    table = tabulate(rows, ["Kernel", "Branch", "Iterations", "Reverted", "Best", "At"], disable_numparse=True)
    # advice that works from any checkout: a loop's settings may be defined on its branch alone
    return table + "\n'kgit log KERNEL' shows one loop's iterations; 'git checkout opt/KERNEL' to go on with it"


def status(state) -> str:
    """kgit status: two plain columns (no tabulate: status is what agents and prompts call most)."""
    top, unit = state.best, state.metric
    cpu = bool(top and top.cpu_timing)
    rows = [
        ["kernel", f"{state.kernel} ({state.kernel_path})"],
        ["branch", state.branch + ("" if state.on_branch else " (not checked out)")],
        ["target", (metric(state.target, unit) if state.target else "none set")
         + (" (lower is better)" if state.better == "lower" else "")],
        ["iteration", f"{state.iteration} of {state.max_iterations} ({state.reverted} reverted)"
         + (f"; {state.elsewhere} record{'s' if state.elsewhere != 1 else ''} of runs on other devices, apart "
            "in 'kgit log'" if state.elsewhere else "")],
        ["best", f"{metric(top.value, unit, cpu)}{pct_of_peak(top)}: {best_measured(top, state.remeasured)}"
         if top else "-"],
        ["gap to target", f"{metric(state.gap, unit)} ({state.gap_pct:.1f}%)"
         if state.gap is not None and state.gap > 0 else "-"],
        ["state", _state_words(state)],
    ]
    if state.test_changed:
        rows.append(["test", f"changed since the best (iteration {top.iteration}): the next step runs the best's "
                             "kernel under it too, and replaces it if it gives a wrong result there"])
    return "\n".join(f"{name:<14} {value}" for name, value in rows)


def show(shown) -> str:
    record = shown.record
    row = log_row(record)
    return "\n".join([
        f"{record.kernel} iteration {record.iteration}: {record.action}",
        f"commit {shown.commit}  {row[6]}",
        f"correctness {row[3]}, {row[4]}{pct_of_peak(record)}, gain {row[5]}, on {record.gpu or 'an unknown device'}",
        *([f"reason: {record.reason}"] if record.reason else []),
        *doubt_lines(record),
        *([f"measured again (kgit step --again): the same kernel code as iteration {record.repeats}"]
          if record.repeats is not None else []),
        *_measured(record),
        *([f"test JSON kept (--json: test): {record.test_run}"] if record.test_run else []),
        *([_tail_label(record)] + [f"  {line}" for line in record.output_tail.strip().splitlines()[-10:]]
          if record.output_tail and record.output_tail.strip() else []),
        f"started {record.started}, test ran {record.duration_s:.1f} s",
        *_agent_turn(record.agent),
        "",
        shown.diff.rstrip() or "(no change to the kernel)",
    ])


def compare(found) -> str:
    """kgit diff: two iterations' figures in two columns, then the change from the first to the second."""
    (sha_a, a), (sha_b, b) = found.a, found.b
    lower = " (lower is better)" if found.better == "lower" else ""
    rows = [
        ("", f"iteration {a.iteration}", f"iteration {b.iteration}"),
        ("action", a.action, b.action),
        ("commit", sha_a[:10], sha_b[:10]),
        ("value", *(metric(r.value, r.metric, r.cpu_timing) + lower + pct_of_peak(r) for r in (a, b))),
        ("vs its best", gain(a), gain(b)),
        ("verdict", status_words(a), status_words(b)),
        ("device", a.gpu or "an unknown device", b.gpu or "an unknown device"),
    ]
    width = max(len(row[1]) for row in rows) + 2
    lines = [f"{name:<12} {left:<{width}}{right}".rstrip() for name, left, right in rows]
    lines.append("measured apart, each against the best of its own step: only pairs measured side by side decide"
                 if found.same_environment else
                 "measured in different environments (host, GPU, driver or compilers): their figures are not "
                 "comparable")
    what = found.path or "every file but the log"
    lines += ["", f"{what}, iteration {a.iteration} -> {b.iteration}:", found.diff.rstrip() or "(no change)"]
    return "\n".join(lines)


def _tail_label(record: Record) -> str:
    # a turn the agent failed (kgit.loop.agent) ran no test: the output kept is the agent's
    return "the agent's output ends:" if (record.reason or "").startswith("agent ") else "test output ends:"


def _agent_turn(turn: dict | None) -> list[str]:
    """The agent's turn that made the change: what it was told to aim at and the end of what it said
    (the whole context and transcript are in --json)."""
    if not turn:
        return []
    context = str(turn.get("context") or "").splitlines()
    aim = [line.strip() for line in context if line.startswith(("target:", "next:"))]  # analysis.context_text
    said = str(turn.get("transcript") or "").strip().splitlines()[-15:]
    return [f"agent turn: {turn.get('command')} ({turn.get('seconds')} s, exit status {turn.get('exit_status')})",
            *(f"  given: {line}" for line in aim),
            *(["  the agent said (last lines):"] + [f"    {line}" for line in said] if said else ["  the agent said nothing"])]


def _measured(record: Record) -> list[str]:
    found = record.measurement
    if not found or not found.pairs:
        return []
    pairs = found.pairs
    return [f"measured {pairs} pair{'s' if pairs != 1 else ''} ({found.runs} test runs, {found.warmups} warm-up): "
            f"best {', '.join(f'{v:.4g}' for v in found.best)}; "
            f"candidate {', '.join(f'{v:.4g}' for v in found.candidate)}",
            f"environment: {environment(record.environment)}" if record.environment else "environment: -"]


def finish(done) -> str:
    """kgit finish: the one commit that brought the best into its branch (loop.finish.Finished)."""
    best, base = done.best, done.baseline
    figures = (f"iteration {best.iteration}, {metric(best.value, best.metric, best.cpu_timing)} against the "
               f"baseline's {metric(base.value, base.metric, base.cpu_timing)}")
    if done.commit is None:
        return f"{done.branch} holds {done.kernel}'s best already ({figures}): nothing to commit"
    return (f"{done.branch}: {done.commit[:10]} brings {done.kernel}'s best ({figures}): {', '.join(done.paths)}\n"
            f"the log stays rendered on {refs.branch(done.kernel)}; 'kgit report' renders it here too")


def report(commit: str | None, path: str) -> str:
    return f"{path} rendered and committed at {commit[:10]}" if commit else f"{path} is up to date"


def summary_table(summaries: list) -> str:
    """A table of runs (model.runs.Summary), one a row."""
    from tabulate import tabulate

    table = tabulate([summary_row(s) for s in summaries], SUMMARY_HEADERS)
    return table + "\n" + SUMMARY_LEGEND if any(s.best_gain_pct is not None for s in summaries) else table


def push(pushed) -> list[str]:
    """What kgit push did (share.sync.Pushed), a line each."""
    lines = [f"records: {pushed.merged} new from {pushed.remote} merged first"] if pushed.merged else []
    lines += [f"refused: {r.describe()} (kept under {refs.QUARANTINE}{pushed.remote})" for r in pushed.refused]
    held_back = [(ref, why, todo) for ref, why, todo in pushed.not_sent if todo]  # by kgit, before the push
    lines += [f"{ref}: not pushed, {why}: {todo}" for ref, why, todo in held_back]
    if pushed.held_records:
        lines.append(f"records: {pushed.held_records} not pushed, on commits {pushed.remote} will not have (a branch "
                     "not pushed, or a commit no ref keeps: 'kgit doctor'); they stay here")
    if pushed.nothing:
        return lines + ["nothing to push"]
    lines += [f"{ref}: {why}" for ref, why, todo in pushed.not_sent if not todo]  # by the remote
    if pushed.raced:
        lines.append(f"another push was updating {pushed.remote} at the same moment: run 'kgit push {pushed.remote}' "
                     f"again (it says if 'kgit pull {pushed.remote}' must come first)")
    attempts = pushed.attempts
    lines.append(f"{pushed.remote} has: {', '.join(pushed.sent) or 'nothing new'}"
                 + (f", {attempts} attempt{'s' if attempts > 1 else ''}" if attempts else ""))
    return lines


def doctor(done: list[str], problems: list, repaired: bool) -> str:
    lines = [f"fixed: {line}" for line in done]
    lines += [f"{p.problem}; fix: {p.fix}" for p in problems]
    automatic = sum(p.repair is not None for p in problems)
    if not problems:
        lines.append("no problems found" if not done else "no problems left")
    elif not repaired and automatic == len(problems):
        lines.append("run 'kgit doctor --fix' to repair")
    elif not repaired and automatic:
        lines.append(f"run 'kgit doctor --fix' to repair {automatic} of these; each of the others says what to do")
    elif not repaired:  # each says what a person can do: --fix would change nothing
        lines.append("none of these is repaired automatically: each says what to do")
    return "\n".join(lines)


def invalid_note(note: InvalidNote) -> str:
    return (f"warning: {note.describe()}; never used to decide ('kgit doctor' says what to do; a damaged note on "
            "a loop's branch stops its steps)")


def invalid_notes_of(context: dict) -> list[str]:
    """A warning for each note kgit context left out as no valid record (its invalid_notes, as JSON)."""
    return [invalid_note(InvalidNote(**item)) for item in context["invalid_notes"]]


def _state_words(state) -> str:
    if state.working is not None:
        return working(state.working)
    if state.pending:
        return "an interrupted step is pending: the next writing kgit command, or 'kgit doctor --fix', finishes it"
    if state.unrecorded:
        sha, subject = state.unrecorded[-1]
        return (f"{len(state.unrecorded)} commit(s) of the kernel that no step recorded, from {sha[:10]} "
                f"({subject[:40]}): steps refuse until they are measured or dropped ('kgit doctor' says how)")
    if state.stopped:
        return f"stopped: {state.stopped}"
    return "kernel edited, ready to step" if state.kernel_modified else "waiting for an edit of the kernel"


def working(pid: int) -> str:
    return (f"another kgit{f' (pid {pid})' if pid else ''} is working in this repository (a step's test may be "
            "running): these answers may change when it ends")


INTERRUPTED = ("a step was interrupted (kgit was killed in the middle of it): these answers may miss it; "
               "the next writing kgit command, or 'kgit doctor --fix', finishes it")
