"""A kernel's name becomes a branch, a tag, a ref and a path: only names safe in all four are taken."""

import pytest

from kgit.errors import KgitError
from kgit.model import kernel_name


@pytest.mark.parametrize("name", ["softmax", "fused-moe", "flash_attention.v2", "K9", "a" * 64])
def test_names_safe_in_a_branch_a_tag_and_a_path_are_taken(name):
    assert kernel_name.check(name) == name


@pytest.mark.parametrize("name", ["../x", "a b", "x;rm", "a~1", "a:b", "-rf", "x/y", ".hidden", "x.lock", "a..b",
                                  "x.", "", "a" * 65, "report_path"])
def test_unsafe_names_and_kgit_yamls_own_settings_are_refused(name):
    with pytest.raises(KgitError, match="invalid kernel name"):
        kernel_name.check(name)
