"""SKILL.md front matter, and the bottleneck a kernel's SKILL.md declares."""

import pytest

from kgit.errors import KgitError
from kgit.profiling import skillfiles


def test_front_matter_and_body():
    data, body = skillfiles.front_matter("---\nname: softmax\nbottleneck: memory\n---\n# Softmax\ntext\n")
    assert data == {"name": "softmax", "bottleneck": "memory"} and body == "# Softmax\ntext\n"


@pytest.mark.parametrize("text, why", [
    ("# no front matter\n", "no YAML front matter"),
    ("---\nname: [unclosed\n---\n# x\n", "not valid YAML"),
    ("---\n- a list\n---\n# x\n", "must be a mapping"),
])
def test_a_broken_front_matter_is_a_one_line_error_naming_the_file(text, why):
    with pytest.raises(KgitError) as caught:
        skillfiles.front_matter(text, "skills/x/SKILL.md")
    assert str(caught.value).startswith("skills/x/SKILL.md: ") and why in str(caught.value)


def write_skill(root, kernel, text):
    path = root / skillfiles.kernel_skill_path(kernel)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_declared_bottleneck_and_why_there_is_none(tmp_path):
    assert skillfiles.declared_bottleneck(tmp_path, "k") == (None, "skills/kernels/k/SKILL.md does not exist")
    write_skill(tmp_path, "k", "---\nname: k\nbottleneck: ' Compute '\n---\n# k\n")
    assert skillfiles.declared_bottleneck(tmp_path, "k") == ("compute", "declared in skills/kernels/k/SKILL.md")
    write_skill(tmp_path, "k", "---\nname: k\nbottleneck: io\n---\n# k\n")
    assert skillfiles.declared_bottleneck(tmp_path, "k")[0] is None
    assert "declares no bottleneck" in skillfiles.declared_bottleneck(tmp_path, "k")[1]
    write_skill(tmp_path, "k", "no front matter")
    assert skillfiles.declared_bottleneck(tmp_path, "k") == (
        None, "skills/kernels/k/SKILL.md: no YAML front matter (a '---' block at the top)")
