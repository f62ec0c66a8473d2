"""Commands that change the loop: start, step, tune, run, profile, report."""

from __future__ import annotations

import sys

import click

from kgit.cli.common import (Progress, emit, json_option, kernel_argument, kernel_of, locked, loop_options, note,
                             overrides, record_json, repo, warn_invalid)
from kgit.errors import KgitError


@click.command("start")
@click.argument("kernel")
@loop_options
@json_option
@click.pass_context
def start_command(ctx, kernel, as_json, **options):
    """Record the baseline of KERNEL as iteration 0 on a new opt/KERNEL branch."""
    from kgit.loop import steps
    from kgit.render import commands

    where = repo(ctx)
    progress = Progress("baseline")
    with locked(where):
        try:
            outcome = steps.start(where, kernel, overrides(**options), progress)
        finally:
            progress.end()
    emit(as_json, lambda: record_json(outcome.record, outcome.commit, never_ran=outcome.never_ran),
         lambda: commands.start(outcome.record, outcome.commit, outcome.never_ran))


@click.command("step")
@click.option("-m", "--message", "action", required=True, help="The one change this iteration makes.")
@click.option("--tier", type=click.IntRange(1, 5), help="Optimization tier of the change (1-5).")
@click.option("--keep-anyway", "keep_anyway", metavar="REASON",
              help="Keep the change on the branch even if it is not faster (it paves the way for a bigger "
                   "next step); the best stays where it is.")
@click.option("--again", is_flag=True,
              help="Measure a kernel whose code an earlier iteration measured already (the test or the machine "
                   "may have changed since); the record names that iteration.")
@click.option("--allow-untested", is_flag=True,
              help="Step a change to kernels or launchers the test never ran (refused otherwise); the record "
                   "names them as untested.")
@loop_options
@json_option
@click.pass_context
def step_command(ctx, action, tier, keep_anyway, again, allow_untested, as_json, **options):
    """Commit the edited kernel, measure it against the best pair by pair, keep or revert it."""
    from kgit.loop import steps
    from kgit.render import commands

    where = repo(ctx)
    progress = Progress("step")
    with locked(where):
        try:
            outcome = steps.step(where, action, tier, overrides(**options), progress, keep_anyway=keep_anyway,
                                 again=again, allow_untested=allow_untested)
        finally:
            progress.end()
    warn_invalid(outcome.invalid)
    record = outcome.record
    emit(as_json, lambda: record_json(record, outcome.commit, kept=record.kept),
         lambda: commands.step(record, outcome.commit, with_tail=True))
    if outcome.interrupted:
        click.echo(f"kgit: {outcome.interrupted}", err=True)
        sys.exit(130)


@click.command("tune")
@click.argument("kernel", required=False)
@click.option("--gpus", help="Test one proposal per GPU at once, e.g. 0,1 (each in its own worktree).")
@click.option("--ray", "ray_address", metavar="ADDRESS",
              help="Test proposals on a Ray cluster's workers at once: 'local', 'auto' or ray://host:port.")
@click.option("--ray-workers", type=click.IntRange(min=1), help="Proposals per round on Ray (default: its GPUs).")
@loop_options
@json_option
@click.pass_context
def tune_command(ctx, kernel, gpus, ray_address, ray_workers, as_json, **options):
    """Search KERNEL's CONFIG space, one iteration per proposal (no agent needed)."""
    from kgit.loop import history
    from kgit.loop import tune

    where = repo(ctx)
    kernel = history.resolve_kernel(where, kernel)
    outcomes, on_outcome = _outcome_printer(as_json)
    progress = Progress("tune")
    missing = tune.model_search_missing()
    if missing:
        note(missing)
    if ray_address and gpus:
        raise KgitError("--ray and --gpus both given", "use one: --gpus for this machine's GPUs, --ray for a cluster's")
    if ray_workers and not ray_address:
        raise KgitError("--ray-workers without --ray", "give the cluster's address with --ray (or 'local')")
    gpu_list = _gpu_list(gpus)
    from kgit.loop import cluster

    ray_cluster = cluster.connect(ray_address, ray_workers) if ray_address else None
    try:
        with locked(where):  # held across rounds: parallel tests run under it too
            stopped = tune.run(where, kernel, overrides(**options), progress, on_outcome, gpu_list, ray_cluster)
    finally:
        progress.end()
        if ray_cluster:
            cluster.disconnect()
    _emit_loop_summary(where, kernel, stopped, outcomes, as_json, "tune")


@click.command("run")
@click.argument("kernel", required=False)
@click.option("--agent", "command", required=True, help="The agent's command line, run by /bin/sh in the repository.")
@click.option("--agent-timeout-s", type=click.FloatRange(min=1), default=1800.0, show_default=True,
              help="Time allowed for one turn of the agent.")
@loop_options
@json_option
@click.pass_context
def run_command(ctx, kernel, command, agent_timeout_s, as_json, **options):
    """The loop with an outside agent making each change, until a stop reason.

    \b
    Each turn the agent gets the context as text on its standard input, and in its environment:
      KGIT_CONTEXT_FILE   a file holding the same text
      KGIT_CONTEXT_JSON   a file holding it as JSON (kgit context --json)
      KGIT_KERNEL_PATH    the kernel file to edit (nothing else: the test and other files are refused)
      KGIT_KERNEL         the kernel's name
      KGIT_ACTION_FILE    where to describe the change: one line, then optionally "tier: N"
    """
    from kgit.loop import agent, history

    where = repo(ctx)
    kernel = history.resolve_kernel(where, kernel)
    outcomes, on_outcome = _outcome_printer(as_json)
    progress = Progress("run")
    try:
        with locked(where):
            stopped = agent.run(where, kernel, command, agent_timeout_s, overrides(**options), progress, on_outcome)
    finally:
        progress.end()
    _emit_loop_summary(where, kernel, stopped, outcomes, as_json, "run")


def _outcome_printer(as_json: bool):
    """A list that collects a loop's outcomes, and the callback that fills it and prints each one."""
    from kgit.render import commands

    outcomes = []

    def on_outcome(outcome):
        outcomes.append(outcome)
        if not as_json:
            click.echo(commands.loop_round(outcome.record, outcome.commit))

    return outcomes, on_outcome


def _emit_loop_summary(where, kernel, stopped, outcomes, as_json, what) -> None:
    from kgit.loop import history
    from kgit.render import commands

    best = history.best(where, kernel)
    summary = {"kernel": kernel, "stop_reason": stopped.value, "best": record_json(best.record, best.commit),
               "iterations": [record_json(o.record, o.commit) for o in outcomes]}
    emit(as_json, lambda: summary, lambda: commands.loop_summary(what, stopped, best.record))


def _gpu_list(gpus: str | None) -> list[str] | None:
    if gpus is None:
        return None
    ids = [g.strip() for g in gpus.split(",") if g.strip()]
    if not ids or not all(g.isdigit() for g in ids) or len(set(ids)) != len(ids):
        raise KgitError(f"--gpus {gpus!r}: give distinct GPU numbers separated by commas, e.g. 0,1")
    return ids


@click.command("profile")
@click.option("--iteration", type=int, help="Profile this iteration (in a temporary worktree of its commit).")
@kernel_argument
@click.option("--timeout-s", type=float, help="Stop the profiler after this long (default: twice the test's timeout).")
@json_option
@click.pass_context
def profile_command(ctx, iteration, named_kernel, kernel, timeout_s, as_json):
    """Run the kernel's test under ncu (NVIDIA) or rocprofv3 (AMD) and keep the metrics.

    The metrics go to .git/kgit/profiles/ and to the iteration's note (key "profile"); the working tree
    stays clean. Without a usable profiler: one line saying why, then the benchmark's numbers and the
    bottleneck declared in the kernel's SKILL.md.
    """
    from kgit.loop import history
    from kgit.loop import profile
    from kgit.render import analysis

    where = repo(ctx)
    kernel = history.resolve_kernel(where, kernel_of(named_kernel, kernel))
    with locked(where):
        out = profile.run(where, kernel, iteration, timeout_s, Progress("profile"))
    prof, diag = out["profile"], out["diagnosis"]
    if prof["source"] != "profiler" and as_json:
        click.echo(f"kgit: no profiler: {prof['why']}", err=True)
    emit(as_json, lambda: {**prof, "diagnosis": diag},
         lambda: analysis.profile_text(prof) + "\n\n" + analysis.diagnosis_text(diag))


@click.command("report")
@json_option
@click.pass_context
def report_command(ctx, as_json):
    """(Re)write experiments/README.md (or report_path) from the records and commit it."""
    from kgit import config
    from kgit.loop import report
    from kgit.render import commands

    where = repo(ctx)
    with locked(where):
        commit = report.commit_report(where)
    path = config.report_path(where.root)
    emit(as_json, lambda: {"path": path, "commit": commit}, lambda: commands.report(commit, path))


@click.command("finish")
@click.argument("kernel", required=False)
@click.option("--into", metavar="BRANCH",
              help="The branch to bring the best into (default: the one the loop started from).")
@json_option
@click.pass_context
def finish_command(ctx, kernel, into, as_json):
    """Bring KERNEL's best into the branch its loop started from, as one commit: the kernel file and what
    else the best changed, never kgit's own log or kgit.yaml. Refused where that branch changed them too."""
    from kgit.loop import finish, history
    from kgit.render import commands

    where = repo(ctx)
    with locked(where):
        done = finish.finish(where, history.resolve_kernel(where, kernel), into)
    emit(as_json, lambda: {"kernel": done.kernel, "branch": done.branch, "commit": done.commit, "paths": done.paths,
                           "best": record_json(done.best, done.best_commit),
                           "baseline": record_json(done.baseline)},
         lambda: commands.finish(done))


@click.command("init")
@click.argument("kernel")
@click.option("--kernel-path", "--kernel", "kernel_path", required=True,
              help="The kernel's Python file (its Triton kernels and launchers).")
@click.option("--function", default=None,
              help="The launcher to test: a function, an autograd.Function (its apply is called) or a name bound "
                   "to one's apply (default: the one named as the kernel or as the file, else the file's one "
                   "public launcher).")
@click.option("--metric", default="gbps", show_default=True, help="gbps (memory-bound) or tflops (compute-bound).")
@click.option("--test-path", default=None,
              help="Where the test goes (default: beside the repository's tests, never inside the kernel's package).")
@click.pass_context
def init_command(ctx, kernel, kernel_path, function, metric, test_path):
    """A kernel of yours enters the loop: a test on kgit's harness and its kgit.yaml entry."""
    from kgit import scaffold
    from kgit.render import commands

    click.echo(commands.init(scaffold.init(repo(ctx).root, kernel, kernel_path, function, metric, test_path), kernel))


COMMANDS = [init_command, start_command, step_command, tune_command, run_command, profile_command, report_command,
            finish_command]
