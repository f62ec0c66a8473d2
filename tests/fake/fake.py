# A stand-in kernel for kgit's tests: its "performance" is whatever these lines say.
METRIC = 100.0
CORRECT = True
SPREAD = 0.5
MODE = "ok"
