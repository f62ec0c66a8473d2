"""A kernel blob's code digest is worked out once per repository (kgit.git.code_digests), and the
comparison of a step's kernel with earlier iterations' gives what parsing each of them gives."""

import pytest

from kgit.git import read
from kgit.git.command import find_repo
from kgit.git import code_digests

KERNEL = "skills/kernels/fake/fake.py"


def test_digests_are_of_the_code_and_remembered_by_blob(started, monkeypatch):
    repo = find_repo(started.root)
    started.set_kernel(METRIC=150.0)
    started.ok("step", "-m", "faster")
    blobs = read.object_ids(repo, [f"HEAD:{KERNEL}", f"HEAD~1:{KERNEL}", f"HEAD:no/such/file.py"])
    assert blobs[0] and blobs[1] and blobs[0] != blobs[1] and blobs[2] is None
    texts = [started.git("show", f"HEAD:{KERNEL}"), started.git("show", f"HEAD~1:{KERNEL}")]
    found = code_digests.of_blobs(repo, KERNEL, blobs)
    assert found == [code_digests.digest(KERNEL, texts[0]), code_digests.digest(KERNEL, texts[1]), None]
    assert found[0] != found[1]
    # a comment is not code: the same digest
    assert code_digests.digest(KERNEL, texts[0] + "\n# a note\n") == found[0]

    def no_git(*args):
        raise AssertionError("a remembered blob was read again")

    monkeypatch.setattr(code_digests, "cat_blobs", no_git)
    assert code_digests.of_blobs(repo, KERNEL, blobs) == found
    # read as another kind of file, the same blob is another digest, worked out anew
    monkeypatch.undo()
    as_text = code_digests.of_blobs(repo, "kernel.cu", blobs[:1])
    assert as_text == [code_digests.digest("kernel.cu", texts[0])] and as_text[0] != found[0]


def test_texts_the_caller_read_are_not_read_again(started, monkeypatch):
    repo = find_repo(started.root)
    blob = read.object_ids(repo, [f"HEAD:{KERNEL}"])
    text = started.git("show", f"HEAD:{KERNEL}")

    def no_git(*args):
        raise AssertionError("a blob the caller read was read again")

    monkeypatch.setattr(code_digests, "cat_blobs", no_git)
    assert code_digests.of_blobs(repo, KERNEL, blob, {blob[0]: text}) == [code_digests.digest(KERNEL, text)]
    monkeypatch.undo()
    assert code_digests.of_blobs(repo, KERNEL, blob) == [code_digests.digest(KERNEL, text)]  # remembered


def test_a_deleted_or_damaged_cache_is_worked_out_again(started):
    repo = find_repo(started.root)
    blob = read.object_ids(repo, [f"HEAD:{KERNEL}"])
    expected = code_digests.of_blobs(repo, KERNEL, blob)
    cache = repo.shared_kgit_dir / "code-digests"
    cache.write_text("garbage line\n" + cache.read_text()[:20] + "\n")
    assert code_digests.of_blobs(repo, KERNEL, blob) == expected
    cache.unlink()
    assert code_digests.of_blobs(repo, KERNEL, blob) == expected


@pytest.mark.parametrize("comment, metric, refused", [("", 90.0, True), ("\n# the same code\n", 90.0, True),
                                                     ("", 91.0, False)])
def test_an_earlier_iterations_code_is_refused_from_the_remembered_digests(started, comment, metric, refused):
    started.set_kernel(METRIC=150.0)
    started.ok("step", "-m", "faster")
    started.set_kernel(METRIC=90.0)
    started.ok("step", "-m", "slower")  # iteration 2, reverted: HEAD holds iteration 1's code again
    started.set_kernel(METRIC=metric)
    path = started.root / KERNEL
    path.write_text(path.read_text() + comment)
    if refused:
        assert "iteration 2" in started.refused("step", "-m", "again")
    else:
        started.ok("step", "-m", "another")
