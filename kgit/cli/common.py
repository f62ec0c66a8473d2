"""What every command shares: the repository, output (--json or text), progress on stderr, options."""

from __future__ import annotations

import contextlib
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
        self.noted: set[str] = set()

    def begin(self, test_path: str, device_note: str | None) -> None:
        if device_note:
            self.note(device_note)
        click.echo(f"kgit: {self.label}: running {test_path} ...", err=True, nl=not self.tty)

    def note(self, line: str) -> None:
        if line not in self.noted:  # once per command, not once per iteration
            self.noted.add(line)
            note(line)

    def tick(self, elapsed: float) -> None:
        if self.tty:
            click.echo(f"\rkgit: {self.label}: running ... {elapsed:.0f} s ", err=True, nl=False)
        elif elapsed - self.last >= 60:  # a log file gets a line a minute, not a line a second
            self.last = elapsed
            click.echo(f"kgit: {self.label}: still running after {elapsed:.0f} s", err=True)

    def pair(self, done: int, most: int, found) -> None:
        """After each pair of runs: the gain's interval so far, once it means something (a step may run
        many pairs)."""
        from kgit.render.text import interval_so_far

        line = f"kgit: {self.label}: pair {done} of at most {most}: {interval_so_far(found)}"
        click.echo(f"\r{line} " if self.tty else line, err=True, nl=not self.tty)

    def end(self) -> None:
        if self.tty:
            click.echo("", err=True)


def repo(ctx: click.Context):
    from kgit.git.command import find_repo

    return find_repo(Path(ctx.obj["cwd"]))


def emit(as_json: bool, obj, text) -> None:
    """The command's answer on stdout: exactly one JSON object, or the text for a person.

    obj and text are functions: only the one asked for is built (a table of thousands of rows is
    not drawn for --json, nor thousands of records turned into JSON for a person).
    """
    click.echo(json.dumps(obj(), indent=None, default=str) if as_json else text())


def note(line: str) -> None:
    click.echo(f"kgit: {line}", err=True)


def notes(lines: list[str]) -> None:
    for line in lines:
        note(line)


@contextlib.contextmanager
def locked(where):
    """A command that writes: under the lock, what a killed kgit left settled first, and said."""
    from kgit.loop import recovery

    with recovery.locked(where) as recovered:
        notes(recovered)
        yield


def warn_invalid(invalid) -> None:
    from kgit.render import commands

    for item in invalid:
        note(commands.invalid_note(item))


def record_json(record, commit: str | None = None, **more) -> dict:
    """kgit.render.text.record_json, imported when a command prints a record (start-up imports none)."""
    from kgit.render.text import record_json

    return record_json(record, commit, **more)


def overrides(**options) -> dict:
    return {k: v for k, v in options.items() if v is not None}


def loop_options(f):
    """The kgit.yaml settings a command can override for one run."""
    options = [
        click.option("--target-metric", type=click.Choice(["gbps", "tflops"]), help="Metric to optimize."),
        click.option("--target-value", type=float, help="Target in the metric's unit."),
        click.option("--target-pct-of-peak", type=float, help="Target as a fraction of peak, e.g. 0.9."),
        click.option("--max-iterations", type=int,
                     help="The loop's last iteration, a total over every command, not a number of more (default 5)."),
        click.option("--gpu", type=click.Choice(["auto", "nvidia", "amd", "cpu"]), help="Where the test runs."),
        click.option("--test-timeout-s", type=float, help="Kill the test after this long (default 600)."),
        click.option("--min-gain-pct", type=float, help="Smallest gain kept, in % (default 1)."),
        click.option("--max-pairs", type=int, help="Most best/candidate pairs measured for one decision (default 12)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
kernel_option = click.option("--kernel", help="Kernel (default: the current opt/ branch's).")


def kernel_argument(f):
    """The kernel as start takes it, a positional KERNEL, or as --kernel (both: they must agree);
    the command gets it as `kernel` (kernel_of)."""
    f = kernel_option(f)
    return click.argument("named_kernel", metavar="[KERNEL]", required=False)(f)


def kernel_of(named_kernel: str | None, kernel: str | None) -> str | None:
    if named_kernel and kernel and named_kernel != kernel:
        raise KgitError(f"two kernels named: {named_kernel} and --kernel {kernel}", "name one")
    return named_kernel or kernel
