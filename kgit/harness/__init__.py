"""The one measurement harness behind every kernel test (skills/kernels/<name>/test_<name>.py).

A test describes its kernel with a Spec and hands it to main():

    from kgit import harness

    SPEC = harness.Spec(
        name="softmax", metric="gbps",
        make_inputs=lambda shape, dtype, device, case: (harness.rand(shape, dtype, device, case),),
        make_outputs=lambda inputs: (torch.empty_like(inputs[0]),),
        kernel=lambda inputs, outputs: softmax(inputs[0], out=outputs[0]),
        reference=lambda inputs: (softmax_ref(inputs[0]),),
        torch_impl=lambda inputs: torch.softmax(inputs[0], dim=-1),
        cases=harness.CASES,
        gpu=harness.Plan(check_shapes=[(1, 1), (3, 1023)], time_shapes=[(8192, 16384)]),
        interpreter=harness.Plan(check_shapes=[(3, 33)], time_shapes=[(8, 256)]),
    )
    if __name__ == "__main__":
        harness.main(SPEC)

Memory-bound and compute-bound kernels differ only in their Spec: the metric (gbps or tflops, with a
flops function) and the tolerance (harness.ELEMENTWISE or harness.NORM).

Modules, each one thing:
  spec       Spec and Plan, the dtype names
  inputs     fresh random inputs in value regimes (CASES), the seed
  tolerance  the tolerance model (Elementwise, Norm) and compare()
  cheat      the cheat check (the aten ops a kernel call may dispatch) and the NaN poison
  checks     the correctness checks of one shape, dtype and case
  timing     the one timer (medians over calls, L2 cleared) and the one spread
  measure    one timed entry: kernel, torch, rates, % of peak and of copy, impossible figures
  contract   the JSON a test prints, its headline, and the failure rule
  device     the torch-side GPU probe and the measured copy bandwidth
  run        the test's command line: check, time, print
  launcher   a Spec for a launcher as its users call it, its backward through autograd included
Importing this package imports neither torch nor triton; they are imported where they are needed.
"""

from kgit.harness.inputs import CASES, rand
from kgit.harness.launcher import from_launcher
from kgit.harness.run import main, run
from kgit.harness.spec import Plan, Spec
from kgit.harness.timing import Timer
from kgit.harness.tolerance import ELEMENTWISE, NORM, Elementwise, Norm

__all__ = ["CASES", "ELEMENTWISE", "NORM", "Elementwise", "Norm", "Plan", "Spec", "Timer", "from_launcher", "main",
           "rand", "run"]
