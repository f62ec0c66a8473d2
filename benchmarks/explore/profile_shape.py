"""Launch one kernel at one shape and dtype of its test's plan, for a profiler (ncu) to read.

    python benchmarks/explore/profile_shape.py skills/kernels/softmax/test_softmax.py 512x262144 bf16 [--torch]

The shape is named as the test's tables name it (Spec.label); it is looked up among the plan's timed and
swept shapes. The kernel runs once to compile (and autotune), then once inside an NVTX range named
"profiled"; with --torch the test's torch baseline too, so one profile holds both. Give ncu
`--nvtx --nvtx-include profiled/` and it reads those launches only, not the input generation.
`kgit profile` profiles the headline shape only; the worst shape of a sweep is usually another one.
"""

import argparse
import importlib.util
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from kgit.harness import device  # noqa: E402
from kgit.harness.inputs import seed_everything  # noqa: E402
from kgit.harness.run import plan_of  # noqa: E402
from kgit.harness.spec import torch_dtype  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("test_path")
    parser.add_argument("shape", help="as the test's tables print it, e.g. 512x262144")
    parser.add_argument("dtype")
    parser.add_argument("--torch", action="store_true", help="also launch the torch baseline")
    args = parser.parse_args()

    spec_file = importlib.util.spec_from_file_location("profiled_test", args.test_path)
    test = importlib.util.module_from_spec(spec_file)
    spec_file.loader.exec_module(test)
    spec = test.SPEC
    plan = plan_of(spec)
    shapes = {spec.shape_label(s): s for s in [*plan.time_shapes, *plan.sweep_shapes]}
    if args.shape not in shapes:
        raise SystemExit(f"no shape {args.shape!r} in {args.test_path}'s plan: {', '.join(shapes)}")
    seed_everything()
    inputs = spec.make_inputs(shapes[args.shape], torch_dtype(args.dtype), device.detect()["device"], "normal")
    outputs = spec.make_outputs(inputs)
    launches = [spec.kernel] + ([lambda inputs, outputs: spec.torch_impl(inputs)] if args.torch else [])
    for launch in launches:
        launch(inputs, outputs)  # compiles, autotunes, warms
    device.sync()
    on_gpu = torch.cuda.is_available()
    if on_gpu:
        torch.cuda.nvtx.range_push("profiled")
    for launch in launches:
        launch(inputs, outputs)
    device.sync()
    if on_gpu:
        torch.cuda.nvtx.range_pop()
    print(f"{spec.name} {args.shape} {args.dtype}: launched")


if __name__ == "__main__":
    main()
