"""kgit's command line: parse the arguments, call the loop or the history, print the answer.

Human output goes to stdout as short tables; with --json, stdout carries exactly one JSON object.
Progress and notes go to stderr. Exit status 0 for every decision (FAILED and REGRESSED are results),
1 with a one-line message for a user error or a refusal.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from kgit.errors import KgitError


class Progress:
    """A line on stderr while a test runs: it can take minutes."""

    def __init__(self, label: str):
        self.label = label
        self.tty = sys.stderr.isatty()
        self.last = 0.0

    def begin(self, test_path: str, device_note: str | None) -> None:
        if device_note:
            click.echo(f"kgit: {device_note}", err=True)
        click.echo(f"kgit: {self.label}: running {test_path} ...", err=True, nl=not self.tty)

    def tick(self, elapsed: float) -> None:
        if self.tty:
            click.echo(f"\rkgit: {self.label}: running ... {elapsed:.0f} s ", err=True, nl=False)
        elif elapsed - self.last >= 60:  # a log file gets a line a minute, not a line a second
            self.last = elapsed
            click.echo(f"kgit: {self.label}: still running after {elapsed:.0f} s", err=True)

    def end(self) -> None:
        if self.tty:
            click.echo("", err=True)


def _repo(ctx: click.Context):
    from kgit import store

    return store.find_repo(Path(ctx.obj["cwd"]))


def _read(ctx: click.Context, kernel: str | None, query):
    """Answer a read-only query about the named kernel (or the current one): (kernel, answer).

    An interrupted step is finished first, as every kgit command does.
    """
    from kgit import history, loop

    repo = _repo(ctx)
    with loop.session(repo, writes=False) as recovered:
        _notes(recovered)
        kernel = history.resolve_kernel(repo, kernel)
        return kernel, query(repo, kernel)


def _overrides(**options) -> dict:
    return {k: v for k, v in options.items() if v is not None}


def _emit(as_json: bool, obj: dict, human: str) -> None:
    click.echo(json.dumps(obj, indent=None, default=str) if as_json else human)


def _notes(recovered: list[str]) -> None:
    for line in recovered:
        click.echo(f"kgit: {line}", err=True)


def loop_options(f):
    """The kgit.yaml settings a command can override for one run."""
    options = [
        click.option("--target-metric", type=click.Choice(["gbps", "tflops"]), help="Metric to optimize."),
        click.option("--target-value", type=float, help="Target in the metric's unit."),
        click.option("--target-pct-of-peak", type=float, help="Target as a fraction of peak, e.g. 0.9."),
        click.option("--max-iterations", type=int, help="Stop after this many iterations (default 5)."),
        click.option("--gpu", type=click.Choice(["auto", "nvidia", "amd", "cpu"]), help="Where the test runs."),
        click.option("--test-timeout-s", type=float, help="Kill the test after this long (default 600)."),
        click.option("--min-gain-pct", type=float, help="Smallest gain kept, in % (default 1)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "cwd", default=".", type=click.Path(file_okay=False), help="Run as if started in this directory.")
@click.version_option(package_name="kgit")
@click.pass_context
def cli(ctx, cwd):
    """kgit: a git-native experiment runner for optimizing GPU kernels.

    \b
    kgit start softmax            baseline: branch opt/softmax, tag best/softmax
    kgit step -m "..." --tier 1   test one edit of the kernel, keep it or revert it
    kgit best | log | status | show N | report
    kgit profile | diagnose | context
    kgit tune | run --agent CMD   the loop without a person: a tier-1 search, or any agent
    kgit push | pull | hooks install | doctor
    """
    ctx.obj = {"cwd": cwd}


@cli.command()
@click.argument("kernel")
@loop_options
@json_option
@click.pass_context
def start(ctx, kernel, as_json, **options):
    """Record the baseline of KERNEL as iteration 0 on a new opt/KERNEL branch."""
    from kgit import loop, report

    repo = _repo(ctx)
    progress = Progress("baseline")
    try:
        outcome = loop.start(repo, kernel, _overrides(**options), progress)
    finally:
        progress.end()
    _notes(outcome.recovered)
    record = outcome.record
    human = (
        f"{kernel}: baseline {report.format_metric(record['value'], record['metric'], record['cpu_timing'])}"
        f"{_pct(record)} on {record['gpu'] or 'an unknown device'}; branch opt/{kernel}, tag best/{kernel} "
        f"at {outcome.commit[:10]}"
    )
    if record.get("stop_reason"):
        human += f"\nThe baseline already meets the target: {record['stop_reason']}."
    _emit(as_json, {**record, "commit": outcome.commit}, human)


@cli.command()
@click.option("-m", "--message", "action", required=True, help="The one change this iteration makes.")
@click.option("--tier", type=click.IntRange(1, 5), help="Optimization tier of the change (1-5).")
@loop_options
@json_option
@click.pass_context
def step(ctx, action, tier, as_json, **options):
    """Commit the edited kernel, test it, and keep or revert it."""
    from kgit import loop

    repo = _repo(ctx)
    progress = Progress("step")
    try:
        outcome = loop.step(repo, action, tier, _overrides(**options), progress)
    finally:
        progress.end()
    _notes(outcome.recovered)
    record = outcome.record
    _emit(as_json, {**record, "commit": outcome.commit, "kept": record["status"] in loop.KEPT},
          _describe_step(outcome, with_tail=True))


def _describe_step(outcome, with_tail: bool) -> str:
    from kgit import loop, report

    record = outcome.record
    cpu = record["cpu_timing"]
    lines = [
        f"iteration {record['iteration']}: {record['status']}  "
        f"{report.format_metric(record['value'], record['metric'], cpu)}{_pct(record)}  "
        f"{report.format_delta(record['delta_pct'])} vs best "
        f"{report.format_metric(record['best_before'], record['metric'] or '', cpu)}",
    ]
    if record.get("reason"):
        lines.append(f"reason: {record['reason']}")
    if record["status"] in loop.KEPT:
        lines.append(f"kept at {outcome.commit[:10]}; best/{record['kernel']} moved there")
    else:
        lines.append(f"reverted; the attempt stays at refs/kgit/attempts/{record['kernel']}/{record['iteration']}")
    if with_tail and record.get("output_tail"):
        tail = record["output_tail"].strip().splitlines()[-5:]
        lines += ["test output ends:"] + [f"  {line}" for line in tail]
    if record.get("stop_reason"):
        lines.append(f"loop stopped: {record['stop_reason']}")
    return "\n".join(lines)


@cli.command()
@click.argument("kernel", required=False)
@click.option("--gpus", help="Test one proposal per GPU at once, e.g. 0,1 (each in its own worktree).")
@loop_options
@json_option
@click.pass_context
def tune(ctx, kernel, gpus, as_json, **options):
    """Search KERNEL's CONFIG space, one iteration per proposal (tier 1, no agent needed)."""
    from kgit import history, tune as tuning

    repo = _repo(ctx)
    kernel = history.resolve_kernel(repo, kernel)
    outcomes, on_outcome = _outcome_printer(kernel, as_json)
    progress = Progress("tune")
    try:
        stopped = tuning.run(repo, kernel, _overrides(**options), progress, on_outcome, _gpu_list(gpus))
    finally:
        progress.end()
    _emit_loop_summary(repo, kernel, stopped, outcomes, as_json, "tune")


@cli.command("run")
@click.argument("kernel", required=False)
@click.option("--agent", "command", required=True, help="The agent's command line, run by /bin/sh in the repository.")
@click.option("--agent-timeout-s", type=click.FloatRange(min=1), default=1800.0, show_default=True,
              help="Time allowed for one turn of the agent.")
@loop_options
@json_option
@click.pass_context
def run_(ctx, kernel, command, agent_timeout_s, as_json, **options):
    """The loop with an outside agent making each change, until a stop reason."""
    from kgit import agent, history

    repo = _repo(ctx)
    kernel = history.resolve_kernel(repo, kernel)
    outcomes, on_outcome = _outcome_printer(kernel, as_json)
    progress = Progress("run")
    try:
        stopped = agent.run(repo, kernel, command, agent_timeout_s, _overrides(**options), progress, on_outcome)
    finally:
        progress.end()
    _emit_loop_summary(repo, kernel, stopped, outcomes, as_json, "run")


def _outcome_printer(kernel: str, as_json: bool):
    """A list that collects a loop's outcomes, and the callback that fills it and prints each one."""
    from kgit import report

    outcomes = []

    def on_outcome(outcome):
        outcomes.append(outcome)
        _notes(outcome.recovered)
        if as_json:
            return
        record = outcome.record
        if record["iteration"] == 0:
            metric = report.format_metric(record["value"], record["metric"], record["cpu_timing"])
            click.echo(f"{kernel}: baseline {metric}")
        else:
            click.echo(f"[{record['action']}] " + _describe_step(outcome, with_tail=False))

    return outcomes, on_outcome


def _emit_loop_summary(repo, kernel, stopped, outcomes, as_json, what) -> None:
    from kgit import history

    best = history.best(repo, kernel)
    summary = {"kernel": kernel, "stop_reason": stopped, "best": best,
               "iterations": [{**o.record, "commit": o.commit} for o in outcomes]}
    _emit(as_json, summary, f"{what} stopped: {stopped}; best is iteration {best['iteration']} ({best['action']})")


@cli.command()
@click.argument("kernel", required=False)
@json_option
@click.pass_context
def best(ctx, kernel, as_json):
    """The best iteration: metric, % of peak, commit and tag."""
    from kgit import history, report

    kernel, record = _read(ctx, kernel, history.best)
    human = (
        f"{kernel}: best is iteration {record['iteration']} ({record['action']}): "
        f"{report.format_metric(record['value'], record['metric'], record['cpu_timing'])}{_pct(record)} "
        f"on {record['gpu']}, commit {record['commit'][:10]}, tag {record['tag']}"
    )
    _emit(as_json, record, human)


@cli.command()
@click.argument("kernel", required=False)
@json_option
@click.pass_context
def log(ctx, kernel, as_json):
    """Every iteration, the reverted ones too."""
    from tabulate import tabulate

    from kgit import history, report

    kernel, records = _read(ctx, kernel, history.log)
    rows = [report.log_row(r) + [r["commit"][:10]] for r in records]
    human = tabulate(rows, report.LOG_HEADERS + ["Commit"]) + "\n" + report.final_line(records)
    _emit(as_json, {"kernel": kernel, "iterations": records}, human)


@cli.command()
@click.argument("kernel", required=False)
@json_option
@click.pass_context
def status(ctx, kernel, as_json):
    """Kernel, target, iteration k of max, best, and the gap to the target."""
    from kgit import history, report

    kernel, state = _read(ctx, kernel, lambda r, k: history.status(r, k, {}))
    top, metric = state["best"], state["metric"]
    cpu = bool(top and top["cpu_timing"])
    rows = [
        ["kernel", f"{kernel} ({state['kernel_path']})"],
        ["branch", state["branch"] + ("" if state["on_branch"] else " (not checked out)")],
        ["target", report.format_metric(state["target"], metric) if state["target"] else "none set"],
        ["iteration", f"{state['iteration']} of {state['max_iterations']} ({state['reverted']} reverted)"],
        ["best", f"{report.format_metric(top['value'], metric, cpu)}{_pct(top)}, iteration {top['iteration']}"
         if top else "-"],
        ["gap to target", f"{report.format_metric(state['gap'], metric)} ({state['gap_pct']:.1f}%)"
         if state["gap"] is not None and state["gap"] > 0 else "-"],
        ["state", f"stopped: {state['stopped']}" if state["stopped"]
         else "kernel edited, ready to step" if state["kernel_modified"] else "waiting for an edit of the kernel"],
    ]
    # Two plain columns, without tabulate: status is the command agents and prompts call most often.
    _emit(as_json, state, "\n".join(f"{name:<14} {value}" for name, value in rows))


@cli.command()
@click.argument("iteration", type=int)
@click.option("--kernel", help="Kernel (default: the current opt/ branch's).")
@json_option
@click.pass_context
def show(ctx, iteration, kernel, as_json):
    """An iteration's record and the change it made or tried."""
    from kgit import history, report

    kernel, item = _read(ctx, kernel, lambda r, k: history.show(r, k, iteration))
    row = report.log_row(item)
    human = "\n".join([
        f"{kernel} iteration {iteration}: {item['action']}",
        f"commit {item['commit']}  {row[6]}",
        f"correctness {row[3]}, {row[4]}{_pct(item)}, delta {row[5]}, on {item['gpu'] or '-'}",
        f"started {item['started']}, test ran {item['duration_s']:.1f} s",
        "",
        item["diff"].rstrip() or "(no change to the kernel)",
    ])
    _emit(as_json, item, human)


# --- profile, diagnose, context: from a measurement to the next change --------------------------------


@cli.command()
@click.option("--iteration", type=int, help="Profile this iteration (in a temporary worktree of its commit).")
@click.option("--kernel", help="Kernel (default: the current opt/ branch's).")
@click.option("--timeout-s", type=float, help="Stop the profiler after this long (default: twice the test's timeout).")
@json_option
@click.pass_context
def profile(ctx, iteration, kernel, timeout_s, as_json):
    """Run the kernel's test under ncu (NVIDIA) or rocprofv3 (AMD) and keep the metrics.

    The metrics go to .git/kgit/profiles/ and to the iteration's note (key "profile"); the working tree
    stays clean. Without a usable profiler: one line saying why, then the benchmark's numbers and the
    bottleneck declared in the kernel's SKILL.md.
    """
    from kgit import history, views
    from kgit import profile as profiling

    repo = _repo(ctx)
    kernel = history.resolve_kernel(repo, kernel)
    out = profiling.run(repo, kernel, iteration, timeout_s, Progress("profile"))
    _notes(out["recovered"])
    prof, diag = out["profile"], out["diagnosis"]
    if prof["source"] != "profiler" and as_json:
        click.echo(f"kgit: no profiler: {prof['why']}", err=True)
    human = views.profile_text(prof) + "\n\n" + views.diagnosis_text(diag)
    _emit(as_json, {**prof, "diagnosis": diag}, human)


@cli.command()
@click.option("--metrics", "metrics_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A metrics.json, or an ncu CSV (default: the kernel's last profile).")
@click.option("--kernel", help="Kernel (default: the current opt/ branch's).")
@json_option
@click.pass_context
def diagnose(ctx, metrics_file, kernel, as_json):
    """Memory-, compute- or latency-bound; the tier order, the next tier and the skills to read."""
    from kgit import context, history, loop, views

    try:
        repo = _repo(ctx)
    except KgitError:
        if metrics_file is None:
            raise
        repo = None  # a metrics file alone can be diagnosed anywhere
    if repo is not None:
        with loop.session(repo, writes=False) as recovered:
            _notes(recovered)
            try:
                kernel = history.resolve_kernel(repo, kernel)
            except KgitError:
                if metrics_file is None:
                    raise
                kernel = None
            diag = context.diagnosis(repo, kernel, metrics_file)
    else:
        diag = context.diagnosis(None, kernel, metrics_file)
    if diag.get("profile_source") == "benchmark":
        click.echo(f"kgit: no profile: {diag['profile_why']}; using the benchmark and the declared bottleneck", err=True)
    _emit(as_json, diag, views.diagnosis_text(diag))


@cli.command("context")
@click.option("--kernel", help="Kernel (default: the current opt/ branch's).")
@json_option
@click.pass_context
def context_(ctx, kernel, as_json):
    """Everything the next change needs: files, target, best, what was tried, diagnosis, next tier, skills."""
    from kgit import context, views

    kernel, ctx_obj = _read(ctx, kernel, context.build)
    _emit(as_json, ctx_obj, views.context_text(ctx_obj))


@cli.command("report")
@click.pass_context
def report_(ctx):
    """(Re)write experiments/README.md from the records and commit it."""
    from kgit import loop

    repo = _repo(ctx)
    with loop.session(repo, writes=True) as recovered:
        _notes(recovered)
        commit = loop.commit_report(repo)
    click.echo(f"experiments/README.md rendered and committed at {commit[:10]}" if commit
               else "experiments/README.md is up to date")


def _gpu_list(gpus: str | None) -> list[str] | None:
    if gpus is None:
        return None
    ids = [g.strip() for g in gpus.split(",") if g.strip()]
    if not ids or not all(g.isdigit() for g in ids) or len(set(ids)) != len(ids):
        raise KgitError(f"--gpus {gpus!r}: give distinct GPU numbers separated by commas, e.g. 0,1")
    return ids


# --- sharing: hooks, push, pull, doctor ----------------------------------------------------------------


@cli.group()
def hooks():
    """The pre-push hook: install it, or run its check (what git calls)."""


@hooks.command("install")
@click.option("--force", is_flag=True, help="Replace another pre-push hook (it is saved beside).")
@click.pass_context
def hooks_install(ctx, force):
    """Install kgit's pre-push hook where git looks for hooks (core.hooksPath is respected)."""
    from kgit import hooks as hook

    click.echo(hook.install(_repo(ctx), force))


@hooks.command("pre-push")
@click.argument("remote", required=False)
@click.argument("url", required=False)
@click.pass_context
def hooks_pre_push(ctx, remote, url):
    """Check a push (git's lines on stdin): summarize each kernel, refuse a tip with no record."""
    import os

    from tabulate import tabulate

    from kgit import hooks as hook, report

    remote = remote or os.environ.get("PRE_COMMIT_REMOTE_NAME") or "origin"  # pre-commit passes no arguments
    lines = hook.read_hook_input("" if sys.stdin.isatty() else sys.stdin.read(), dict(os.environ))
    rows, reminder = hook.pre_push(_repo(ctx), remote, lines)
    # stderr, as git's own messages: a `git push --porcelain` keeps its stdout to itself
    if rows:
        click.echo(f"kgit: this push to {remote} carries:", err=True)
        click.echo(tabulate(rows, report.SUMMARY_HEADERS), err=True)
    if reminder:
        click.echo(f"kgit: {reminder}", err=True)


@cli.command()
@click.argument("remote", default="origin")
@click.pass_context
def push(ctx, remote):
    """Send branches opt/*, tags best/*, the records and the attempts to REMOTE (default origin)."""
    from tabulate import tabulate

    from kgit import loop, report, sharing

    repo = _repo(ctx)
    with loop.session(repo, writes=True) as recovered:
        _notes(recovered)
        rows, done = sharing.push(repo, remote)
    if rows:
        click.echo(tabulate(rows, report.SUMMARY_HEADERS))
    click.echo("\n".join(done))


@cli.command()
@click.argument("remote", default="origin")
@click.pass_context
def pull(ctx, remote):
    """Fetch REMOTE's kgit refs; merge its records with ours, fast-forward opt/* branches."""
    from kgit import loop, sharing

    repo = _repo(ctx)
    with loop.session(repo, writes=True) as recovered:
        _notes(recovered)
        click.echo("\n".join(sharing.pull(repo, remote)))


@cli.command()
@click.option("--fix", "repair", is_flag=True, help="Repair what can be repaired.")
@json_option
@click.pass_context
def doctor(ctx, repair, as_json):
    """Find stale notes, best/ tags off their branch, interrupted steps and stale locks."""
    from kgit import doctor as checks

    repo = _repo(ctx)
    if repair:
        done, left = checks.fix(repo)
    else:
        done, left = [], checks.diagnose(repo)
    problems = [{"problem": p.problem, "fix": p.fix} for p in left]
    lines = [f"fixed: {line}" for line in done]
    lines += [f"{p['problem']}; fix: {p['fix']}" for p in problems]
    if not problems:
        lines.append("no problems found" if not done else "no problems left")
    elif not repair:
        lines.append("run 'kgit doctor --fix' to repair")
    _emit(as_json, {"fixed": done, "problems": problems}, "\n".join(lines))


def _pct(record: dict | None) -> str:
    return f" ({record['pct_of_peak']:.0f}% of peak)" if record and record.get("pct_of_peak") else ""


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except KgitError as e:
        click.echo(f"kgit: {e}", err=True)
        sys.exit(1)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("kgit: interrupted", err=True)  # a step in flight is finished by the next command
        sys.exit(130)
    except click.ClickException as e:
        click.echo(f"kgit: {e.format_message()}", err=True)
        sys.exit(1)
