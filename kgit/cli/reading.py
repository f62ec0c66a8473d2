"""Read-only commands: best, log, status, show, context, diagnose. None of them changes the repository,
and none imports the code that does (a test checks): a step interrupted by a crash is reported, and
left for the next writing command to finish."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from kgit.cli.common import (emit, json_option, kernel_argument, kernel_of, kernel_option, note, notes,
                             record_json, repo, warn_invalid)
from kgit.errors import KgitError


def _reads_a_loop(name: str):
    """A read command of one loop: an optional KERNEL (the current one if left out) and --json."""
    def command(f):
        return click.command(name)(click.argument("kernel", required=False)(json_option(click.pass_context(f))))
    return command


def _read(ctx: click.Context, kernel: str | None, all_if_several: bool = False):
    """The repository and the kernel named (or the current one, or with all_if_several every kernel
    where several have records: history.resolve_kernel); a note if a step is pending."""
    from kgit.loop import history
    from kgit.render import commands

    where = repo(ctx)
    working, pending = history.in_flight(where)
    if working is not None:
        note(commands.working(working))
    elif pending:
        note(commands.INTERRUPTED)
    return where, history.resolve_kernel(where, kernel, all_if_several)


@_reads_a_loop("best")
def best_command(ctx, kernel, as_json):
    """The best iteration: metric, % of peak, commit and tag."""
    from kgit.loop import history
    from kgit.render import commands

    where, kernel = _read(ctx, kernel)
    found = history.best(where, kernel)
    warn_invalid(found.invalid)
    emit(as_json, lambda: record_json(found.record, found.commit, tag=found.tag, tag_commit=found.tag_commit,
                                      better=found.better, remeasured=_remeasured_json(found.remeasured)),
         lambda: commands.best(found.record, found.commit, found.tag, found.tag_commit, found.better,
                               found.remeasured))


def _remeasured_json(again) -> dict | None:
    """The latest re-measurement of the best (kgit.model.remeasured.Remeasured), as --json gives it."""
    return dataclasses.asdict(again) if again else None


@_reads_a_loop("log")
def log_command(ctx, kernel, as_json):
    """Every iteration, the reverted ones too."""
    from kgit.loop import history
    from kgit.render import commands

    where, kernel = _read(ctx, kernel)
    found = history.log(where, kernel)
    left = history.left_behind(where, kernel, found.pairs)
    runs = history.runs(found.pairs)
    warn_invalid(found.invalid)
    emit(as_json, lambda: {"kernel": kernel, "iterations": [record_json(r, sha, kept=r.kept and sha not in left,
                                                                        left_behind=sha in left)
                                                            for sha, r in found.pairs],
                           # a run's records are of one device: each its own count, never one mixed
                           "runs": [{"gpu": run.gpu, "started": run.started,
                                     "cpu_timing": any(r.cpu_timing for r in run.records),
                                     "iterations": [r.iteration for r in run.records],
                                     "reverted": sum(not r.status.on_branch for r in run.records)}
                                    for run in runs],
                           "invalid_notes": [n.to_json() for n in found.invalid]},
         lambda: commands.log(runs, left))


@_reads_a_loop("status")
def status_command(ctx, kernel, as_json):
    """Kernel, target, iteration k of max, best, and the gap to the target; with no kernel, on no opt/
    branch, every loop with records here, a line each."""
    from kgit.loop import history
    from kgit.render import commands

    where, kernel = _read(ctx, kernel, all_if_several=True)
    if isinstance(kernel, list):
        loops = history.overview(where, kernel)
        emit(as_json, lambda: {"kernels": [{"kernel": loop.kernel, "branch": loop.branch, "iterations": loop.iterations,
                                            "reverted": loop.reverted,
                                            "best": record_json(loop.best) if loop.best else None} for loop in loops]},
             lambda: commands.overview(loops))
        return
    state = history.status(where, kernel)
    warn_invalid(state.invalid)
    plain = {k: v for k, v in vars(state).items() if k not in ("best", "best_commit", "invalid", "remeasured")}
    emit(as_json, lambda: {**plain, "best": record_json(state.best, state.best_commit,
                                                        remeasured=_remeasured_json(state.remeasured))
                           if state.best else None,
                           "invalid_notes": [n.to_json() for n in state.invalid]},
         lambda: commands.status(state))


@click.command("show")
@click.argument("iteration")
@kernel_option
@json_option
@click.pass_context
def show_command(ctx, iteration, kernel, as_json):
    """An iteration's record and the change it made or tried: ITERATION is its number, or its commit
    (where two clones both numbered one N)."""
    from kgit.loop import history
    from kgit.render import commands

    where, kernel = _read(ctx, kernel)
    shown = history.show(where, kernel, iteration)
    for sha, other in shown.others:
        note(f"iteration {other.iteration} has another record: {other.status.value} {other.action!r} on {other.gpu}, "
             f"commit {sha[:10]} ('kgit show {sha[:10]}' shows it)")
    emit(as_json, lambda: record_json(shown.record, shown.commit, kept=shown.record.kept, diff=shown.diff,
                                      others=[record_json(r, sha) for sha, r in shown.others]),
         lambda: commands.show(shown))


@click.command("diff")
@click.argument("a")
@click.argument("b")
@kernel_option
@json_option
@click.pass_context
def diff_command(ctx, a, b, kernel, as_json):
    """Two iterations side by side: their figures (value, interval, verdict, device) and the change of the
    kernel file from A's to B's. A and B: iteration numbers, or commits."""
    from kgit.loop import history
    from kgit.render import commands

    where, kernel = _read(ctx, kernel)
    found = history.compare(where, kernel, a, b)
    (sha_a, first), (sha_b, second) = found.a, found.b
    emit(as_json, lambda: {"kernel": kernel, "path": found.path, "better": found.better,
                           "a": record_json(first, sha_a, kept=first.kept),
                           "b": record_json(second, sha_b, kept=second.kept),
                           "same_environment": found.same_environment, "diff": found.diff},
         lambda: commands.compare(found))


@click.command("context")
@kernel_argument
@json_option
@click.pass_context
def context_command(ctx, named_kernel, kernel, as_json):
    """Everything the next change needs: files, target, best, what was tried, diagnosis, next tier, skills."""
    from kgit.loop import context
    from kgit.render import analysis, commands

    where, kernel = _read(ctx, kernel_of(named_kernel, kernel))
    data = context.build(where, kernel)
    notes(commands.invalid_notes_of(data))
    emit(as_json, lambda: data, lambda: analysis.context_text(data))


@click.command("diagnose")
@click.option("--metrics", "metrics_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A metrics.json, or an ncu CSV (default: the kernel's last profile).")
@kernel_argument
@json_option
@click.pass_context
def diagnose_command(ctx, metrics_file, named_kernel, kernel, as_json):
    """Memory-, compute- or latency-bound; the tier order, the next tier and the skills to read."""
    from kgit.loop import context
    from kgit.render import analysis

    kernel = kernel_of(named_kernel, kernel)
    try:
        where, kernel = _read(ctx, kernel)
    except KgitError:
        if metrics_file is None:
            raise
        where, kernel = None, None  # a metrics file alone can be diagnosed anywhere
    diag = context.diagnosis(where, kernel, metrics_file)
    if diag.get("profile_source") == "benchmark":
        note(f"no profile: {diag['profile_why']}")  # what the diagnosis used instead is its "from" line
    emit(as_json, lambda: diag, lambda: analysis.diagnosis_text(diag))


COMMANDS = [best_command, log_command, status_command, show_command, diff_command, context_command,
            diagnose_command]
