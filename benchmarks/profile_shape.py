"""Launch one kernel at one shape and dtype of its test's plan, for a profiler (ncu) to read.

    python benchmarks/profile_shape.py skills/kernels/softmax/test_softmax.py 512x262144 bf16 [--torch]
                                       [--set GLUON=2 --set AUTOTUNE=0]

The shape is named as the test's tables name it (Spec.label); it is looked up among the plan's timed and
swept shapes. --dims gives any other shape as the test's make_inputs takes it, integers (2048,5000,4096 for
gemm's M, N, K); the shape argument is then only its name in the output. The kernel runs once to compile (and
autotune), then once inside an NVTX range named "profiled"; with --torch the test's torch baseline too, so one
profile holds both. Give ncu `--nvtx --nvtx-include profiled/` and it reads those launches only, not the input
generation.
`kgit profile` profiles the headline shape only; the worst shape of a sweep is usually another one.
--set overrides an entry of the template's CONFIG, to profile what a sweep's "ran" column names: under
ncu an autotune may pick another candidate than it did in the sweep (it did at attention D64 causal S1024).
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402
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
    parser.add_argument("--dims", help="comma-separated integers: the shape as the test's make_inputs takes it")
    parser.add_argument("--set", action="append", default=[], help="KEY=VALUE: an entry of the template's CONFIG")
    args = parser.parse_args()

    spec, config = bench.load_test(args.test_path)
    for item in args.set:
        key, _, value = item.partition("=")
        if key not in config:
            raise SystemExit(f"--set {item}: CONFIG has no {key!r} (it has {', '.join(config)})")
        try:
            config[key] = json.loads(value)
        except ValueError:
            raise SystemExit(f"--set {item}: {value!r} is not a number, true/false or a quoted string") from None
    plan = plan_of(spec)
    shapes = {spec.shape_label(s): s for s in [*plan.time_shapes, *plan.sweep_shapes]}
    if args.dims:
        try:
            shapes[args.shape] = tuple(int(d) for d in args.dims.split(","))
        except ValueError:
            raise SystemExit(f"--dims {args.dims}: not comma-separated integers") from None
    if args.shape not in shapes:
        raise SystemExit(f"no shape {args.shape!r} in {args.test_path}'s plan: {', '.join(shapes)}")
    seed_everything()
    inputs = spec.make_inputs(shapes[args.shape], torch_dtype(args.dtype), device.detect()["device"], "normal")
    outputs = spec.make_outputs(inputs)
    launches = [spec.kernel] + ([lambda inputs, outputs: spec.torch_impl(inputs)] if args.torch else [])
    for launch in launches:
        launch(inputs, outputs)  # compiles, autotunes, warms
    device.sync()
    with device.profiled_range("profiled"):
        for launch in launches:
            launch(inputs, outputs)
        device.sync()
    print(f"{spec.name} {args.shape} {args.dtype}: launched")


if __name__ == "__main__":
    main()
