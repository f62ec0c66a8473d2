"""A kernel's code apart from how it is written: comments, layout and docstrings do not count."""

import pytest

from kgit.model.kernel_code import code, same_code

KERNEL = '''"""A softmax."""
import triton
import triton.language as tl

CONFIG = {"BLOCK_SIZE": 1024, "num_warps": 4}


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n, BLOCK_SIZE: tl.constexpr):
    """One row per program."""
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * n + offsets, mask=offsets < n, other=-float("inf"))
    y = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * n + offsets, y / tl.sum(y, axis=0), mask=offsets < n)


class Launcher:
    """Launches it."""

    def __call__(self, x):
        return softmax(x)
'''

SAME = {
    "a comment": KERNEL.replace("    row = tl.program_id(0)\n", "    # one row each\n    row = tl.program_id(0)  # the row\n"),
    "blank lines": KERNEL.replace("\n\n\n", "\n\n\n\n\n").replace("    y = tl.exp", "\n    y = tl.exp"),
    "spacing": KERNEL.replace("row * n + offsets", "row*n+offsets").replace('{"BLOCK_SIZE": 1024, ', '{ "BLOCK_SIZE" : 1024,'),
    "a line continued": KERNEL.replace("y / tl.sum(y, axis=0), mask", "y / tl.sum(y,\n                                         axis=0), mask"),
    "the module's docstring": KERNEL.replace('"""A softmax."""', '"""A softmax, one row per program."""'),
    "a function's docstring": KERNEL.replace('"""One row per program."""', "'''Rows\n    one by one.'''"),
    "a docstring removed": KERNEL.replace('    """Launches it."""\n', ""),
    "a docstring added": KERNEL.replace("    def __call__(self, x):\n", '    def __call__(self, x):\n        """Call."""\n'),
    "CRLF line ends": KERNEL.replace("\n", "\r\n"),
}

DIFFERENT = {
    "a renamed variable": KERNEL.replace("offsets", "cols"),
    "a changed constant": KERNEL.replace('"BLOCK_SIZE": 1024', '"BLOCK_SIZE": 2048'),
    "a changed string that is no docstring": KERNEL.replace('-float("inf")', '-float("-inf")'),
    "a statement moved into a block": KERNEL.replace("        return softmax(x)\n", "        pass\n    return softmax(x)\n"),
    "a docstring turned into code": KERNEL.replace('"""One row per program."""', 'print("One row per program.")'),
    "an operand order": KERNEL.replace("x - tl.max(x, axis=0)", "tl.max(x, axis=0) - x"),
}


@pytest.mark.parametrize("edit", SAME)
def test_an_edit_of_how_the_code_is_written_is_the_same_code(edit):
    assert SAME[edit] != KERNEL
    assert same_code("k.py", KERNEL, SAME[edit])


@pytest.mark.parametrize("edit", DIFFERENT)
def test_an_edit_of_the_code_is_another_code(edit):
    assert DIFFERENT[edit] != KERNEL
    assert not same_code("k.py", KERNEL, DIFFERENT[edit])


def test_a_string_statement_that_is_no_docstring_is_code():
    # only the first statement of a module, class or function is its docstring
    with_second = KERNEL.replace('    """Launches it."""\n', '    """Launches it."""\n    "a note"\n')
    assert not same_code("k.py", KERNEL, with_second)
    assert not same_code("k.py", with_second, with_second.replace('"a note"', '"another note"'))
    # nor is the first statement of any other block
    in_a_block = KERNEL.replace("        return softmax(x)\n", '        if x is None:\n            "a note"\n'
                                                              "        return softmax(x)\n")
    assert not same_code("k.py", in_a_block, in_a_block.replace('"a note"', '"another note"'))


def test_a_file_that_does_not_parse_is_compared_by_its_text_with_whitespace_collapsed():
    broken = KERNEL.replace("def softmax_kernel(", "def softmax_kernel(:")
    assert same_code("k.py", broken, broken.replace("row * n", "row  *\n n"))
    assert not same_code("k.py", broken, broken + "# a comment\n")  # no tree to tell a comment from code
    assert not same_code("k.py", broken, KERNEL)  # fixing the syntax is a change
    assert code("k.py", broken).startswith("text:") and code("k.py", KERNEL).startswith("ast:")


def test_a_file_that_is_not_python_is_compared_by_its_text_with_whitespace_collapsed():
    cuda = "__global__ void k(float *x) {\n  x[0] = 1.0f;\n}\n"
    assert same_code("k.cu", cuda, cuda.replace("\n  ", "\n\t\t").replace(" = ", "   =  ") + "\n\n")
    assert not same_code("k.cu", cuda, cuda.replace("1.0f", "2.0f"))
    assert not same_code("k.cu", "a b", "ab")  # a space is not nothing
    # a Python kernel's text in a file named otherwise is not parsed
    assert code("k.txt", KERNEL) != code("k.txt", SAME["a comment"])
