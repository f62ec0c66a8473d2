"""All of kgit's human text: numbers and rows (text.py), what each command prints (commands.py),
the experiments/README.md log (readme.py), and profile, diagnosis and context screens (analysis.py).

Pure functions from records and plain objects to strings: no git, no files. --json prints the
objects themselves, never this text.
"""
