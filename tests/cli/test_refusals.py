"""Every refusal: exit status 1, one line on stderr, no traceback, and nothing changed."""

import subprocess

import pytest

from workspace import TEST


def test_step_without_a_change_to_the_kernel(started):
    assert "no change to skills/kernels/fake/fake.py" in started.refused("step", "-m", "nothing")


def test_step_with_a_changed_test(started):
    started.set_kernel(METRIC=120.0)
    (started.root / TEST).write_text((started.root / TEST).read_text() + "\n# tweak the judge\n")
    message = started.refused("step", "-m", "x")
    assert "test_fake.py" in message and "commit" not in message  # never advise committing a new judge
    subprocess.run(message.split("put the rest back with ")[1].split(" (or")[0], shell=True, cwd=started.root,
                   check=True)  # the advice works: the test is as it was, the kernel edit stays
    assert "tweak the judge" not in (started.root / TEST).read_text()
    assert started.ok("step", "-m", "x", "--json").json()["status"] == "IMPROVED"


def test_step_with_another_tracked_file_modified(started):
    (started.root / "notes.txt").write_text("a\n")
    started.git("add", "notes.txt")
    started.git("commit", "-qm", "notes")
    started.set_kernel(METRIC=120.0)
    (started.root / "notes.txt").write_text("b\n")
    assert "notes.txt" in started.refused("step", "-m", "x")


def test_step_with_a_kernel_change_staged_but_undone_on_disk(started):
    started.set_kernel(METRIC=120.0)
    started.git("add", "skills/kernels/fake/fake.py")
    started.set_kernel(METRIC=100.0)  # the file as HEAD has it: a commit of it would change nothing
    assert "no change to skills/kernels/fake/fake.py" in started.refused("step", "-m", "x")
    assert "no problems found" in started.ok("doctor").stdout  # and no interrupted step left behind


def test_step_while_gits_index_is_locked_leaves_no_interrupted_step(started):
    started.set_kernel(METRIC=120.0)
    lock = started.root / ".git/index.lock"
    lock.write_text("")
    refusal = started.refused("step", "-m", "x")
    assert refusal.startswith("kgit: git commit failed: fatal: Unable to create") and "index.lock" in refusal
    lock.unlink()
    assert "no problems found" in started.ok("doctor").stdout
    assert started.ok("step", "-m", "x", "--json").json()["iteration"] == 1


def test_step_with_a_staged_file(started):
    started.set_kernel(METRIC=120.0)
    (started.root / "new.txt").write_text("new\n")
    started.git("add", "new.txt")
    assert "new.txt" in started.refused("step", "-m", "x")


def test_untracked_files_are_left_alone(started):
    (started.root / "scratch.txt").write_text("mine\n")
    started.set_kernel(METRIC=120.0)
    started.ok("step", "-m", "x")
    assert (started.root / "scratch.txt").read_text() == "mine\n"
    assert "scratch.txt" not in started.git("ls-files")


def test_step_on_a_hand_commit_of_the_kernel_refuses_and_its_advice_makes_it_the_next_step(started):
    started.set_kernel(METRIC=120.0)
    started.git("commit", "-qam", "hand edit")  # on opt/fake, past kgit: a change no step measured
    hand = started.git("rev-parse", "HEAD")
    started.set_kernel(MODE="ok", METRIC=121.0)  # the next edit, which a step would be credited the 20% for
    message = started.refused("step", "-m", "tiny tweak")
    assert message.startswith(f"kgit: opt/fake has 1 commit of skills/kernels/fake/fake.py that no step "
                              f"recorded: {hand[:10]} (hand edit)")
    assert "kgit: opt/fake has 1 commit" in started.refused("tune", "fake", "--max-iterations", "3")
    assert f"from {hand[:10]} (hand edit)" in started.ok("status").stdout
    assert f"git reset --soft {hand[:10]}~1" in started.ok("context", "--json").json()["next_step"]  # what an agent reads
    reset = message.split("): ")[-1].split("'")[1]  # the hint, after the refusal's commit list
    assert reset == f"git reset --soft {hand[:10]}~1"
    subprocess.run(reset, shell=True, cwd=started.root, check=True)
    record = started.ok("step", "-m", "hand edit and tiny tweak", "--json").json()
    assert record["status"] == "IMPROVED" and record["iteration"] == 1  # measured as one step, whole
    assert "METRIC = 121.0" in started.kernel_text("HEAD")
    started.check_invariants()


def test_a_hand_commit_that_leaves_the_kernel_alone_is_no_reason_to_refuse(started):
    (started.root / "notes.txt").write_text("mine\n")
    started.git("add", "notes.txt")
    started.git("commit", "-qm", "notes on the branch")
    started.set_kernel(METRIC=120.0)
    assert started.ok("step", "-m", "x", "--json").json()["status"] == "IMPROVED"


def test_step_off_an_opt_branch(started):
    started.git("checkout", "-q", "main")
    started.set_kernel(METRIC=120.0)
    assert started.refused("step", "-m", "x") == (
        "kgit: not on an opt/<kernel> branch (on main): 'git checkout opt/fake' to step its loop (the loops here: "
        "fake), or 'kgit start <kernel>' for a new one")


def test_a_clone_on_its_default_branch_is_told_to_check_out_the_loop(started):
    # the clone's default branch does not have the kernel yet (only the loop's refs were pushed): the
    # loop's branch has it
    started.git("checkout", "-q", "main")
    started.git("rm", "-rq", "skills/kernels/fake")
    started.git("commit", "-qm", "main without the kernel")
    assert started.refused("status", "fake") == (
        "kgit: this checkout does not define fake (main is not opt/fake): 'git checkout opt/fake', where its "
        "loop runs")


def test_step_on_a_detached_head(started):
    started.git("checkout", "-q", "--detach")
    assert "detached HEAD" in started.refused("step", "-m", "x")


def test_step_refuses_a_message_too_long_for_a_line(started):
    started.set_kernel(METRIC=120.0)
    assert "is 501 characters long, over 500" in started.refused("step", "-m", "x" * 501)
    assert "is 100000 characters long" in started.refused("step", "-m", "y" * 100000)  # git's argument limit is near
    assert started.ok("step", "-m", "z" * 500, "--json").json()["action"] == "z" * 500
    started.check_invariants()


def test_step_needs_a_message(started):
    started.set_kernel(METRIC=120.0)
    assert "--message" in started.refused("step")


def test_outside_a_git_repository(tmp_path, ws):
    outside = tmp_path / "plain"
    outside.mkdir()
    ws.root, original = outside, ws.root
    try:
        assert "not a git repository" in ws.refused("step", "-m", "x")
        assert "not a git repository" in ws.refused("start", "fake")
        assert "not a git repository" in ws.refused("log")
    finally:
        ws.root = original


@pytest.mark.parametrize("name", ["../x", "a b", "x;rm", "a~1", "a:b", "-rf", "x/y", ".hidden", "x.lock", "a..b", ""])
def test_unsafe_kernel_names(ws, name):
    assert "invalid kernel name" in ws.refused("start", "--", name)


def test_start_twice(started):
    assert "opt/fake already exists" in started.refused("start", "fake")


def test_a_new_run_under_the_name_of_a_deleted_one_is_refused_and_the_advice_works(ws):
    # the old run's records stay in the notes: under the same name they would count toward the new run's
    # max_iterations, stop it, and mix its log
    (ws.root / "kgit.yaml").write_text("fake:\n  max_iterations: 1\n")
    ws.git("add", "kgit.yaml")
    ws.git("commit", "-qm", "config")
    ws.ok("start", "fake")
    ws.set_kernel(METRIC=120.0)
    ws.ok("step", "-m", "faster")
    ws.git("checkout", "-q", "main")
    ws.git("branch", "-D", "opt/fake")
    ws.git("tag", "-d", "best/fake")
    refusal = ws.refused_json("start", "fake")
    assert refusal["error"].startswith("fake has records of an earlier run here (iterations 0 to 1; opt/fake was "
                                       "deleted since)")
    assert refusal["hint"] == ("an entry of kgit.yaml naming the same files, e.g. 'fake-2:' with kernel_path: "
                               "skills/kernels/fake/fake.py and test_path: skills/kernels/fake/test_fake.py, "
                               "committed; then 'kgit start fake-2'")
    (ws.root / "kgit.yaml").write_text("fake:\n  max_iterations: 1\nfake-2:\n  kernel_path: "
                                       "skills/kernels/fake/fake.py\n  test_path: "
                                       "skills/kernels/fake/test_fake.py\n  max_iterations: 1\n")
    ws.git("commit", "-qam", "a second run")
    assert ws.ok("start", "fake-2", "--json").json()["iteration"] == 0
    ws.set_kernel(METRIC=130.0)
    assert ws.ok("step", "-m", "faster still", "--json").json()["status"] in ("IMPROVED", "TARGET_MET")
    ws.check_invariants("fake-2")


def test_start_with_uncommitted_changes(ws):
    ws.set_kernel(METRIC=120.0)
    assert "uncommitted changes" in ws.refused("start", "fake")


def test_start_an_unknown_kernel(ws):
    refusal = ws.refused("start", "nope")
    assert "no kernel 'nope'" in refusal
    assert "name its kernel_path and test_path there, or run: kgit init nope --kernel PATH" in refusal
    # an agent reads what to do from the hint
    assert ws.refused_json("start", "nope")["hint"] == ("name its kernel_path and test_path there, or run: "
                                                         "kgit init nope --kernel PATH")


def test_start_with_an_untracked_kernel(ws):
    (ws.root / "skills/kernels/loose").mkdir()
    for name, copy in (("fake.py", "loose.py"), ("test_fake.py", "test_loose.py")):
        (ws.root / "skills/kernels/loose" / copy).write_text((ws.root / "skills/kernels/fake" / name).read_text())
    assert "not tracked by git" in ws.refused("start", "loose")


def test_start_with_an_untracked_kgit_yaml(ws):
    # the kernel and its test are committed, the file that names them is not: a clone could not go on
    (ws.root / "kgit.yaml").write_text("fake:\n  kernel_path: skills/kernels/fake/fake.py\n"
                                       "  test_path: skills/kernels/fake/test_fake.py\n")
    refusal = ws.refused_json("start", "fake")
    assert refusal["error"].startswith("kgit.yaml is not tracked by git: a clone of opt/fake would not know")
    assert refusal["hint"] == "commit kgit.yaml before starting"
    ws.git("add", "kgit.yaml")
    ws.git("commit", "-qm", "kgit.yaml")
    assert ws.ok("start", "fake", "--json").json()["status"] == "BASELINE"


def test_start_when_the_baseline_fails(ws):
    ws.set_kernel(MODE="crash")
    ws.git("commit", "-qam", "broken kernel")
    message = ws.refused("start", "fake")
    assert "baseline failed (crashed: exit status 3: RuntimeError: boom); nothing was changed" in message
    assert message.count("RuntimeError: boom") == 1
    assert "The test contract" not in message  # a crash needs no word on the contract
    assert message.endswith(": the loop starts from a kernel that passes its test: see 'python "
                            "skills/kernels/fake/test_fake.py --json', fix the kernel, commit, and run 'kgit start fake' again")
    ws.set_kernel(MODE="ok", CORRECT=False)
    ws.git("commit", "-qam", "a wrong kernel")
    assert ws.refused_json("start", "fake")["hint"].startswith("the loop starts from a kernel that passes its test")


def test_start_when_the_test_cannot_import_what_it_tests(ws):
    # a pytest module named as the test: run as a script from the root, it does not find its package
    test = ws.root / "skills/kernels/fake/test_fake.py"
    test.write_text("from myproject.ops import fake  # noqa\n" + test.read_text())
    ws.git("commit", "-qam", "a test that imports its package")
    refusal = ws.refused_json("start", "fake")
    assert refusal["error"].startswith("baseline failed (crashed: exit status 1: ModuleNotFoundError: No module "
                                       "named 'myproject'); nothing was changed")
    assert refusal["hint"].startswith("kgit runs 'python skills/kernels/fake/test_fake.py --json' from the "
                                      "repository's root, as a script")


def test_start_when_the_test_takes_no_json_flag_says_so_and_the_advice_works(ws):
    # a benchmark written the way others write them: argparse with its own flags, exit status 2 on --json
    test = ws.root / "skills/kernels/fake/test_fake.py"
    original = test.read_text()
    test.write_text("import argparse\nargparse.ArgumentParser().parse_args()\n" + original)
    ws.git("commit", "-qam", "a test with its own parser")
    refusal = ws.refused_json("start", "fake")
    assert "unrecognized arguments: --json" in refusal["error"] and "fix the kernel" not in refusal["hint"]
    assert refusal["hint"].startswith("kgit runs 'python skills/kernels/fake/test_fake.py --json' (then test_args): "
                                      "let the test accept --json, e.g. parser.add_argument('--json', "
                                      "action='store_true') in argparse")
    test.write_text("import argparse\np = argparse.ArgumentParser()\np.add_argument('--json', action='store_true')\n"
                    "p.parse_args()\n" + original)
    ws.git("commit", "-qam", "the test takes --json")
    assert ws.ok("start", "fake", "--json").json()["status"] == "BASELINE"


def test_start_when_the_test_prints_no_json_says_what_kgit_reads(ws):
    ws.set_kernel(MODE="nojson")
    ws.git("commit", "-qam", "a test written the way others write them")
    message = ws.refused("start", "fake")
    assert "baseline failed (no JSON object on stdout); nothing was changed" in message
    assert ("kgit runs 'python skills/kernels/fake/test_fake.py --json' and reads the last JSON object it prints"
            in message)
    assert ("(kgit's README.md, 'The test contract'); a test that prints none is read with 'verdict: exit_status' "
            "and 'metric: device_us' (or 'metric_pattern') in kgit.yaml; or let 'kgit init fake --kernel PATH' "
            "write a test") in message


def test_start_when_the_test_prints_a_time_alone_says_how_to_name_it(ws):
    ws.set_kernel(MODE="timed")
    ws.git("commit", "-qam", "a test that prints {ok, time_ms}")
    refusal = ws.refused_json("start", "fake")
    assert "time_ms looks like a time" in refusal["error"]
    assert refusal["hint"] == "add 'metric: time_ms' and 'better: lower' under 'fake:' in kgit.yaml, then 'kgit start fake' again"
    (ws.root / "kgit.yaml").write_text("fake:\n  metric: time_ms\n  better: lower\n")
    ws.git("add", "kgit.yaml")
    ws.git("commit", "-qm", "the figure named")
    assert ws.ok("start", "fake", "--json").json()["status"] == "BASELINE"  # the advice works


def test_start_when_the_test_prints_no_verdict_points_to_the_contract_and_kgit_init(ws):
    ws.set_kernel(MODE="nopeak")  # a figure, a verdict...
    (ws.root / "skills/kernels/fake/test_fake.py").write_text(
        (ws.root / "skills/kernels/fake/test_fake.py").read_text().replace('"correctness": kernel.CORRECT,', ""))
    ws.git("commit", "-qam", "...but no verdict")
    refusal = ws.refused_json("start", "fake")
    assert refusal["error"].startswith("baseline failed (invalid JSON: no verdict")
    assert refusal["hint"] == ("print the JSON of kgit's README.md, 'The test contract', or let 'kgit init fake "
                               "--kernel PATH' write a test for the kernel on kgit's harness")


def test_log_without_records(ws):
    assert "no kgit records" in ws.refused("log")


def test_show_an_unknown_iteration(started):
    assert "no iteration 7" in started.refused("show", "7")
    assert started.refused_json("show", "7")["hint"] == "its iterations are 0 to 0: 'kgit log' lists them"


def test_unknown_option(started):
    assert "no such option" in started.refused("step", "--bogus").lower()


def test_report_refuses_to_overwrite_edits(started):
    (started.root / "experiments/README.md").write_text("my notes\n")
    assert "uncommitted edits" in started.refused("report")


def test_bad_option_value(started):
    started.set_kernel(METRIC=120.0)
    assert "max_iterations" in started.refused("step", "-m", "x", "--max-iterations", "0")
    assert "target_pct_of_peak" in started.refused("step", "-m", "x", "--target-pct-of-peak", "90")


@pytest.mark.parametrize("committed", [False, True])
def test_start_never_overwrites_a_readme_kgit_did_not_write_and_its_advice_works(ws, committed):
    (ws.root / "experiments").mkdir()
    (ws.root / "experiments/README.md").write_text("# Our experiments\n\nWritten by hand, 142 lines of it.\n")
    if committed:
        ws.git("add", "experiments/README.md")
        ws.git("commit", "-qm", "our own experiments log")
    message = ws.refused("start", "fake")
    assert "experiments/README.md was not written by kgit" in message
    (ws.root / "kgit.yaml").write_text(message.split("with a top-level '")[1].split("'")[0] + "\n")
    ws.git("add", "kgit.yaml")
    ws.git("commit", "-qm", "kgit renders elsewhere")
    ws.ok("start", "fake")
    assert ws.git("show", "HEAD:experiments/README.md" if committed else "HEAD:kgit.yaml") != ""
    assert (ws.root / "experiments/README.md").read_text().startswith("# Our experiments")
    assert "## Optimization: fake" in ws.git("show", "HEAD:experiments/kgit.md")
    ws.git("rm", "-q", "experiments/kgit.md")
    ws.git("commit", "-qm", "drop the rendered log")
    ws.ok("report")
    assert ws.git("log", "-1", "--format=%s") == "kgit: render experiments/kgit.md"  # the file it rendered


def test_report_never_overwrites_an_untracked_readme(started):
    started.git("checkout", "-q", "main")
    (started.root / "experiments").mkdir()
    (started.root / "experiments/README.md").write_text("my own notes\n")
    assert "experiments/README.md was not written by kgit" in started.refused("report")


def test_step_with_an_empty_message(started):
    started.set_kernel(METRIC=120.0)
    assert "message (-m) is empty" in started.refused("step", "-m", "  \n ")


def test_a_missing_directory_or_a_bare_repository(ws, tmp_path):
    assert "no such directory" in ws.refused("-C", str(tmp_path / "nowhere"), "status")
    bare = tmp_path / "bare.git"
    ws.git("clone", "-q", "--bare", str(ws.root), str(bare))
    assert "is a bare repository" in ws.refused("-C", str(bare), "status")


def test_start_without_a_git_identity_refuses_before_the_baseline_runs(ws, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no global identity either
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    ws.git("config", "--unset", "user.name")
    ws.git("config", "--unset", "user.email")
    ws.set_kernel(MODE="crash")  # the refusal comes before any baseline runs
    ws.git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qam", "a kernel whose test crashes")
    message = ws.refused("start", "fake")
    assert "git does not know who commits here" in message
    advice = message.split("set it with ")[1]
    subprocess.run(advice, shell=True, cwd=ws.root, check=True)  # the advice works as written
    ws.set_kernel(MODE="ok")
    ws.git("commit", "-qam", "a kernel whose test passes")
    assert ws.ok("start", "fake", "--json").json()["status"] == "BASELINE"


def test_with_the_records_deleted_every_command_says_the_same_and_report_deletes_nothing(started):
    started.ok("report")
    readme = (started.root / "experiments/README.md").read_text()
    started.git("update-ref", "-d", "refs/notes/kgit")
    for command in (["status"], ["step", "-m", "x"], ["log"], ["best"]):
        assert "opt/fake exists but no kgit record of fake is here" in started.refused(*command)
    assert "no kgit records in this clone" in started.refused("report")
    assert (started.root / "experiments/README.md").read_text() == readme
    # the advice works: start over from the branch the loop started from
    started.git("checkout", "-q", "main")
    started.git("branch", "-D", "opt/fake")
    assert started.ok("start", "fake", "--json").json()["status"] == "BASELINE"


def test_start_when_the_test_rounds_its_figure_to_zero_says_how_to_name_another(ws):
    ws.set_kernel(METRIC=0.0)
    ws.git("commit", "-qam", "a figure rounded away")
    message = ws.refused("start", "fake")
    assert "baseline failed (invalid metric: gbps = 0.0); nothing was changed" in message
    assert "name another figure with 'metric' in kgit.yaml (a latency with 'better: lower')" in message


def test_a_misspelt_kernel_is_told_the_kernels_that_have_records(started):
    refusal = started.refused_json("status", "fkae")
    assert refusal["error"].startswith("no records for fkae")
    assert refusal["hint"] == "the kernels with records here: fake; 'kgit start fkae' begins a loop for fkae"


def test_step_refuses_a_config_its_template_does_not_allow_and_its_advice_works(ws):
    """num_warps 2 where CONFIG_SPACE says 4/8/16: refused, nothing run and no iteration used (kgit tune
    would refuse to start from it); widening the space in the same change is a change like any other."""
    from workspace import KERNEL, LANDSCAPE

    (ws.root / KERNEL).write_text(LANDSCAPE.replace('"WARPS": [1, 2, 4, 8, 16]', '"WARPS": [2, 4, 8]'))
    ws.git("commit", "-qam", "a tunable kernel")
    ws.ok("start", "fake")
    text = (ws.root / KERNEL).read_text()
    (ws.root / KERNEL).write_text(text.replace('"WARPS": 2}', '"WARPS": 16}'))
    line = ws.refused("step", "-m", "WARPS 2->16", "--tier", "1")
    assert line.startswith(f"kgit: {KERNEL}: CONFIG['WARPS'] = 16 is not in CONFIG_SPACE['WARPS'] (2, 4, 8); "
                           "nothing was run, no iteration used: set CONFIG to a configuration its template allows")
    assert "add it to CONFIG_SPACE in the same change" in line
    assert ws.refused_json("step", "-m", "WARPS 2->16")["error"].startswith(f"{KERNEL}: CONFIG['WARPS'] = 16 is not")
    (ws.root / KERNEL).write_text(text.replace('"WARPS": 2}', '"WARPS": 16}').replace('[2, 4, 8]', '[2, 4, 8, 16]'))
    assert ws.ok("step", "-m", "WARPS 2->16, a value the space gains", "--json").json()["iteration"] == 1
    ws.check_invariants()
