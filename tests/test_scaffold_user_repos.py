"""kgit init, then kgit start, on two small repositories of the user's (tests/user_kernels.py), in Triton's
interpreter: the softmax that kgit init was built on, and the rmsnorm held out from it.

The bar (issue 56): with at most one edit to the generated test, the reference, kgit start works, and a
step that breaks the backward is never recorded as passing.
"""

import subprocess
import sys

from user_kernels import RMSNORM_REPO, SOFTMAX_REPO


def enter(ws, files: dict, name: str, kernel: str) -> str:
    """The repository committed, then kgit init: the test it wrote."""
    for path, text in files.items():
        (ws.root / path).parent.mkdir(parents=True, exist_ok=True)
        (ws.root / path).write_text(text)
    ws.git("add", "-A")
    ws.git("commit", "-qm", "the user's kernels and tests")
    wrote = ws.ok("init", name, "--kernel", kernel).stdout
    return wrote.split()[1].rstrip(":")


def fill(ws, test: str, old: str, new: str) -> None:
    text = (ws.root / test).read_text()
    assert old in text
    (ws.root / test).write_text(text.replace(old, new))


def check(ws, test: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, test, "--check-only", "--json"], cwd=ws.root, capture_output=True,
                          text=True)


def step_breaking(ws, kernel: str, old: str, new: str) -> dict:
    text = (ws.root / kernel).read_text()
    assert old in text
    (ws.root / kernel).write_text(text.replace(old, new))
    run = ws.kgit("step", "-m", "a broken backward")
    assert run.returncode == 0, run.stderr
    return ws.ok("show", "1", "--json").json()


def test_the_softmax_enters_the_loop_with_one_edit_and_a_broken_backward_fails(ws, monkeypatch):
    # This repository's backward computes on bf16 values (dz = y * (dy - sum(dy * y)), each op rounded), and
    # the generated test's bf16 allowance assumes one rounding from fp32: on some inputs one gradient element
    # lands just past it (KGIT_SEED=2691440173: 1.14x the allowance, in the interpreter), and the baseline
    # is refused, rightly. The flow under test is not the kernel's precision: the inputs are pinned.
    monkeypatch.setenv("KGIT_SEED", "1")
    test = enter(ws, SOFTMAX_REPO, "softmax", "mykernels/softmax.py")
    assert test == "tests/test_softmax_kgit.py"  # beside the repository's own tests/test_softmax.py
    fill(ws, test, '    raise SystemExit("tests/test_softmax_kgit.py: write reference() (FILL IN) before kgit can '
                   'judge softmax")',
         '    z = x / temperature\n'
         '    return (torch.log_softmax(z, -1) if mode == "log_softmax" else torch.softmax(z, -1)), '
         'torch.logsumexp(z, -1)')
    ws.git("add", "-A")
    ws.git("commit", "-qm", "kgit's test of the softmax")
    started = ws.ok("start", "softmax", "--max-pairs", "2")
    assert "never ran" not in started.stdout
    assert ws.ok("show", "0", "--json").json()["launched"] == ["_softmax_bwd_kernel", "_softmax_fwd_kernel"]
    record = step_breaking(ws, "mykernels/softmax.py", "dz = y * (dy - tl.sum(dy * y, axis=0))",
                           "dz = y * (dy + tl.sum(dy * y, axis=0))")
    assert record["status"] == "FAILED" and "output 2: " in record["reason"]  # the gradient of x


def test_the_held_out_rmsnorm_enters_the_loop_with_the_edits_it_took_and_a_broken_backward_fails(ws):
    # How kgit init fared on a repository it was not tuned on: the test went where pyproject.toml's
    # testpaths says, imported the src/ layout, passed a tensor for the Optional residual (so the add
    # kernel runs) and eps as a float, took the (out, rstd) tuple and left rstd's gradient at zero, as
    # the backward ignores it. It took three edits besides the reference, each for a reason the
    # generated test could not know:
    test = enter(ws, RMSNORM_REPO, "rmsnorm", "src/normlib/ops/rmsnorm.py")
    assert test == "test/test_rmsnorm_kgit.py"
    fill(ws, test, '    raise SystemExit("test/test_rmsnorm_kgit.py: write reference() (FILL IN) before kgit can '
                   'judge rms_norm")',
         "    h = x + residual\n    rstd = torch.rsqrt(h.pow(2).mean(-1) + eps)\n    return h * rstd[..., None] * weight, rstd")
    # 1. its backward sums dw over rows with torch, which the cheat check refuses unless the test allows it
    #    (the line ALLOWED_TORCH_OPS was added to the block after this run, where the edit was outside it)
    assert "kernel called torch ops ['sum']" in check(ws, test).stdout
    fill(ws, test, "ALLOWED_TORCH_OPS = ()", 'ALLOWED_TORCH_OPS = ("sum",)')
    # 2. bf16 and fp16: the kernel rounds x + residual to the input's type before it computes rstd, which
    #    the float64 reference does not, and rstd's float32 tolerance cannot take (bf16 always, fp16 in about
    #    one run in twenty); 3. a row of one element: dx cancels to ~1e-7, beyond float32's tolerance
    fill(ws, test, 'DTYPES = ("fp32", "fp16", "bf16")', 'DTYPES = ("fp32",)')
    fill(ws, test, "check_shapes=[(3, 33), (1, 1), (2, 1100)]", "check_shapes=[(3, 33), (2, 1100)]")
    assert '"correctness": true' in check(ws, test).stdout
    ws.git("add", "-A")
    ws.git("commit", "-qm", "kgit's test of the rmsnorm")
    ws.ok("start", "rmsnorm", "--max-pairs", "2")
    assert ws.ok("show", "0", "--json").json()["launched"] == ["_add_kernel", "_rms_bwd", "_rms_fwd"]
    record = step_breaking(ws, "src/normlib/ops/rmsnorm.py", "hn * tl.sum(wdy * hn, axis=0) / N",
                           "hn * tl.sum(wdy * hn, axis=0)")
    assert record["status"] == "FAILED" and "output 2: " in record["reason"]
