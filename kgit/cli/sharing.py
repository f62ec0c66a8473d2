"""Sharing: push, pull, the pre-push hook, doctor."""

from __future__ import annotations

import os
import sys

import click

from kgit.cli.common import emit, json_option, locked, repo
from kgit.errors import KgitError


@click.command("push")
@click.argument("remote", default="origin")
@json_option
@click.pass_context
def push_command(ctx, remote, as_json):
    """Send branches opt/*, tags best/*, the records and the attempts to REMOTE (default origin)."""
    import dataclasses

    from kgit.render import commands
    from kgit.share import sync

    where = repo(ctx)
    with locked(where):
        pushed = sync.push(where, remote)
    lines = commands.push(pushed)
    unsent = pushed.unsent
    incomplete = f"the push is incomplete: {unsent} ref{'s' if unsent != 1 else ''} not sent"
    if as_json:
        if unsent:  # one object on stdout, the refusal's: it carries the lines that say why
            raise KgitError(f"{incomplete}: {'; '.join(lines)}",
                            f"each line says what to do; then 'kgit push {remote}' again")
        emit(True, lambda: {"remote": remote, "kernels": [dataclasses.asdict(s) for s in pushed.summaries],
                            "sent": pushed.sent, "attempts": pushed.attempts, "records_merged": pushed.merged,
                            "records_held": pushed.held_records,
                            "records_refused": [{"commit": r.commit, "record": r.what, "why": r.why}
                                                for r in pushed.refused]}, None)
        return
    if pushed.summaries:
        click.echo(commands.summary_table(pushed.summaries))
    click.echo("\n".join(lines))
    if unsent:
        raise KgitError(f"{incomplete} (the lines above say why)")


@click.command("pull")
@click.argument("remote", default="origin")
@click.option("--take", type=click.Choice(["ours", "theirs"]),
              help="Where a kernel's branch forked (both clones kept kernels): the line that goes on.")
@json_option
@click.pass_context
def pull_command(ctx, remote, take, as_json):
    """Fetch REMOTE's kgit refs; merge its records with ours, bring opt/* branches up to date (a branch
    that both clones continued is joined, the line that kept kernels going on)."""
    from kgit.share import sync

    where = repo(ctx)
    with locked(where):
        done, refused = sync.pull(where, remote, take)
    incomplete = (f"the pull is incomplete: {refused} thing{'s' if refused != 1 else ''} refused or not updated "
                  "(the lines above say why)")
    if as_json and refused:  # one object on stdout, the refusal's: it carries the lines that say why
        raise KgitError(f"{incomplete}: {'; '.join(done)}", f"each line says what to do; 'kgit doctor' lists "
                                                             "what was refused")
    emit(as_json, lambda: {"remote": remote, "done": done}, lambda: "\n".join(done))
    if refused:  # the rest was pulled; a script must still be able to tell
        raise KgitError(incomplete)


@click.group("hooks")
def hooks_command():
    """The pre-push hook: install it, or run its check (what git calls)."""


@hooks_command.command("install")
@click.option("--force", is_flag=True, help="Replace another pre-push hook (it is saved beside).")
@click.pass_context
def hooks_install(ctx, force):
    """Install kgit's pre-push hook where git looks for hooks (core.hooksPath is respected)."""
    from kgit.share import hook_install

    click.echo(hook_install.install(repo(ctx), force))


@hooks_command.command("pre-push")
@click.argument("remote", required=False)
@click.argument("url", required=False)
@click.pass_context
def hooks_pre_push(ctx, remote, url):
    """Check a push (git's lines on stdin): summarize each kernel, refuse a tip with no record."""
    from kgit.render import commands
    from kgit.share import hooks

    remote = remote or os.environ.get("PRE_COMMIT_REMOTE_NAME") or "origin"  # pre-commit passes no arguments
    lines = hooks.read_hook_input("" if sys.stdin.isatty() else sys.stdin.read(), dict(os.environ))
    rows, behind = hooks.pre_push(repo(ctx), remote, lines)
    # stderr, as git's own messages: a `git push --porcelain` keeps its stdout to itself
    if rows:
        click.echo(f"kgit: this push to {remote} carries:", err=True)
        click.echo(commands.summary_table(rows), err=True)
    if behind.tips:
        from kgit.share import sync

        click.echo(f"kgit: {sync.send_records(repo(ctx), remote, behind)}", err=True)


@click.command("doctor")
@click.option("--fix", "fix", is_flag=True, help="Repair what can be repaired.")
@json_option
@click.pass_context
def doctor_command(ctx, fix, as_json):
    """Find stale notes, best/ tags off their branch, invalid notes, interrupted steps, diverged branches."""
    from kgit.render import commands
    from kgit.share import doctor

    where = repo(ctx)
    if fix:
        from kgit.share import repair

        done, left = repair.fix(where)
    else:
        done, left = [], doctor.find_problems(where)
    problems = [{"problem": p.problem, "fix": p.fix, "automatic": p.repair is not None} for p in left]
    emit(as_json, lambda: {"fixed": done, "problems": problems}, lambda: commands.doctor(done, left, fix))
    if left:  # as git fsck: a script can tell a healthy repository from one that needs a look
        ctx.exit(1)


COMMANDS = [push_command, pull_command, hooks_command, doctor_command]
