"""Git, and nothing but git: every git command kgit runs goes through this package.

  run.py     running one git command, and the repository it runs in
  refs.py    every ref name and commit subject kgit writes, and their parsing back
  read.py    queries: refs, the working tree, history, reachability
  notes.py   reading the records in refs/notes/kgit
  write.py   every change kgit makes to a repository: commits, refs, notes, worktrees, config
  remote.py  fetch, push, hooks
"""
