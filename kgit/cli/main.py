"""The kgit command: one group that dispatches to the commands, and errors as one line.

Human output goes to stdout as short tables; with --json, stdout carries exactly one JSON object.
Progress and notes go to stderr. Exit status 0 for every decision (FAILED and REGRESSED are results),
1 with a one-line message for a user error or a refusal.
"""

from __future__ import annotations

import json
import signal
import sys

import click

from kgit.cli import loop, reading, sharing
from kgit.errors import KgitError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "cwd", default=".", type=click.Path(file_okay=False), help="Run as if started in this directory.")
@click.version_option(package_name="kgit")
@click.pass_context
def cli(ctx, cwd):
    """kgit: a git-native experiment runner for optimizing GPU kernels.

    \b
    kgit init NAME --kernel PATH  a kernel of yours: a test of its launcher and its kgit.yaml entry
    kgit start softmax            baseline: branch opt/softmax, tag best/softmax
    kgit step -m "..." --tier 1   test one edit of the kernel, keep it or revert it
    kgit best | log | status | show N | diff A B | report
    kgit profile | diagnose | context
    kgit tune | run --agent CMD   the loop without a person: a tier-1 search, or any agent
    kgit finish KERNEL            the best into the branch the loop started from, one commit
    kgit push | pull | hooks install | doctor
    """
    ctx.obj = {"cwd": cwd}


for module in (loop, reading, sharing):
    for command in module.COMMANDS:
        cli.add_command(command)


def main() -> None:
    # Stopped by a signal, kgit unwinds as on Ctrl-C: the test it runs dies with it (kgit.runner).
    for stop in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, _interrupt)
    try:
        status = cli.main(standalone_mode=False)  # a command's ctx.exit(code) comes back here
    except KgitError as e:
        _refuse(str(e), e.hint, 1)
    except (click.exceptions.Abort, KeyboardInterrupt):
        _refuse("interrupted", "the next kgit command that writes finishes or rolls back a step left in flight", 130)
    except click.ClickException as e:
        _refuse(e.format_message(), "'kgit COMMAND --help' lists a command's arguments and options", 1)
    else:
        if isinstance(status, int) and status:
            sys.exit(status)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _refuse(message: str, hint: str | None, status: int) -> None:
    """One line on stderr; under --json, stdout still carries exactly one object: {"error": ..., "hint": ...},
    the hint being what to do about it (or null). A KgitError's message ends with its hint already."""
    if "--json" in sys.argv[1:]:
        click.echo(json.dumps({"error": message, "hint": hint}))
    click.echo(f"kgit: {message}", err=True)
    sys.exit(status)
