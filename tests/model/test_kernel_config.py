from kgit.model.kernel_config import KernelConfig


def test_the_journal_round_trip_keeps_every_setting_and_test_args_a_tuple():
    # the journal stores the config as JSON (lists) and a recovery rebuilds it: a tuple must come back
    cfg = KernelConfig(name="softmax", kernel_path="k.py", test_path="t.py", test_args=("--quick", "-n", "3"),
                       verdict={"key": "ok", "pass": True}, better="lower", metric="device_us", max_pairs=7)
    data = cfg.as_dict()
    assert data["test_args"] == ["--quick", "-n", "3"]
    assert KernelConfig.from_dict(data) == cfg


def test_the_figure_is_the_metric_then_the_target_metric_then_none():
    plain = KernelConfig(name="k", kernel_path="k.py", test_path="t.py")
    assert plain.figure is None and not plain.lower_is_better
    assert KernelConfig(name="k", kernel_path="k.py", test_path="t.py", target_metric="gbps").figure == "gbps"
    both = KernelConfig(name="k", kernel_path="k.py", test_path="t.py", target_metric="gbps", metric="a.b")
    assert both.figure == "a.b" and both.reading.figure == "a.b"


def test_lower_is_better_only_for_lower():
    assert KernelConfig(name="k", kernel_path="k.py", test_path="t.py", better="lower").lower_is_better
    assert not KernelConfig(name="k", kernel_path="k.py", test_path="t.py", better="higher").lower_is_better
