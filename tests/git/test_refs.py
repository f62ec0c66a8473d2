"""Every ref name and commit subject kgit writes, and their parsing back."""

import pytest

from kgit.git import refs

KERNELS = ["softmax", "layer-norm", "gemm_fp8", "a.b"]
ACTIONS = ["baseline", "BLOCK_SIZE 4096->8192", "num_warps: 4 -> 8", "retry (again)", "x (reverted: maybe)", ""]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("action", ACTIONS)
def test_every_subject_round_trips(kernel, action):
    for iteration in (0, 7, 1234):
        kept = refs.parse_subject(refs.iteration_subject(kernel, iteration, action))
        assert kept == refs.Subject(kernel, iteration, action, None)
        for status in ("REGRESSED", "WITHIN_NOISE", "FAILED"):
            reverted = refs.parse_subject(refs.reverted_subject(kernel, iteration, action, status))
            assert reverted == refs.Subject(kernel, iteration, action, status)


@pytest.mark.parametrize("subject", [
    "fix a typo", "Merge branch 'main'", refs.report_subject("experiments/README.md"), "softmax: iter x: faster", "softmax: iter -1: a",
    "softmax iter 1: a", ": iter 1: a", "softmax: iteration 1: a", "",
])
def test_a_subject_that_is_not_kgits_parses_to_none(subject):
    assert refs.parse_subject(subject) is None


@pytest.mark.parametrize("kernel", KERNELS)
def test_branch_and_tag_names_and_their_kernel(kernel):
    assert refs.branch_ref(kernel) == "refs/heads/" + refs.branch(kernel)
    assert refs.tag_ref(kernel) == "refs/tags/" + refs.tag(kernel)
    assert refs.kernel_of_branch(refs.branch(kernel)) == kernel
    assert refs.kernel_of_branch(refs.branch_ref(kernel)) == kernel
    assert refs.attempt_ref(kernel, 3) == f"refs/kgit/attempts/{kernel}/3"
    assert refs.remote_branch_ref("origin", kernel) == f"refs/remotes/origin/opt/{kernel}"


@pytest.mark.parametrize("name", [None, "main", "refs/heads/main", "optimize/softmax", "refs/tags/opt/softmax",
                                  "feature/opt/softmax"])
def test_kernel_of_another_branch_is_none(name):
    assert refs.kernel_of_branch(name) is None


def test_the_refs_kgit_keeps_stay_under_its_namespaces():
    assert refs.NOTES_REF == "refs/notes/kgit"
    assert refs.SAVED_EDITS.startswith("refs/kgit/") and refs.ATTEMPTS.startswith("refs/kgit/")
    assert refs.remote_snapshot("origin", "notes/kgit") == "refs/kgit/remotes/origin/notes/kgit"
