"""`kgit` and `python -m kgit`: the command line, with Ctrl-C during start-up an interruption too.

The command's modules are imported inside main(), so that a Ctrl-C while they load (click, yaml) ends
kgit with its one line, as it does once the command runs, and never with a traceback.
"""

import sys


def main() -> None:
    try:
        from kgit.cli.main import main as run
    except KeyboardInterrupt:
        sys.stderr.write("kgit: interrupted\n")
        sys.exit(130)
    run()


if __name__ == "__main__":
    main()
