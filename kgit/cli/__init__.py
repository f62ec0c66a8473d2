"""kgit's command line: parse the arguments, call the layer below, print through kgit.render.

  main.py      the group, global options, errors as one line, dispatch
  common.py    what every command shares: the repository, --json output, progress, loop options
  loop.py      commands that change the loop: start, step, tune, run, profile, report
  reading.py   read-only commands: best, log, status, show, context, diagnose
  sharing.py   push, pull, hooks, doctor
"""
