"""The optimization loop: start and step (steps.py), the searches that drive it without a person
(tune.py, agent.py), running a test on a commit (testing.py), and reading it back (history.py)."""
