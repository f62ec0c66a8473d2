"""experiments/README.md as rendered from the records: its sections, tables and charts."""


def test_two_runs_of_one_kernel_on_one_gpu_are_two_sections():
    from kgit.model.record import from_json
    from kgit.render import readme

    def record(iteration, status, started, value, gpu="Fake GPU"):
        return from_json({"kernel": "fake", "iteration": iteration, "action": f"step {iteration}", "status": status,
                          "started": started, "value": value, "metric": "gbps", "correctness": True, "gpu": gpu})

    first = [record(0, "BASELINE", "2026-11-01T10:00:00.000001+00:00", 100.0),
             record(1, "IMPROVED", "2026-11-01T10:05:00.000001+00:00", 110.0)]
    second = [record(0, "BASELINE", "2026-11-02T09:00:00.000001+00:00", 200.0),
              record(1, "REGRESSED", "2026-11-02T09:05:00.000001+00:00", 150.0)]
    runs = readme.sections(second + first)
    assert [[r.value for r in section] for section in runs.values()] == [[100.0, 110.0], [200.0, 150.0]]
    text = readme.render_readme(first + second)
    assert "## Optimization: fake on Fake GPU, started 2026-11-01 10:00 UTC" in text
    assert "## Optimization: fake on Fake GPU, started 2026-11-02 09:00 UTC" in text


def test_a_gpu_name_with_a_newline_stays_in_its_heading_and_rendering_again_changes_nothing():
    from kgit.model.record import Record, Status
    from kgit.render.readme import KEPT_NOTE, render_readme

    records = [Record("fake", 0, "baseline", Status.BASELINE, gpu="Fake\n## Optimization: ghost", metric="gbps",
                      value=100.0, started="2026-11-30T08:00:00+00:00", correctness=True)]
    text = render_readme(records)
    assert "## Optimization: fake on Fake ## Optimization: ghost, started 2026-11-30 08:00 UTC\n" in text
    assert text.count("\n## ") == 1 and KEPT_NOTE not in text
    assert render_readme(records, previous=text) == text


def test_a_section_whose_records_are_not_here_is_kept_and_marked_once():
    from kgit.model.record import Record, Status
    from kgit.render.readme import KEPT_NOTE, is_kgits, render_readme

    here = [Record("softmax", 0, "baseline", Status.BASELINE, gpu="NVIDIA H200", metric="gbps", value=100.0,
                   started="2026-11-30T08:00:00+00:00", correctness=True)]
    elsewhere = [Record("gemm", 0, "baseline", Status.BASELINE, gpu="NVIDIA H200", metric="tflops", value=600.0,
                        started="2026-11-30T07:00:00+00:00", correctness=True)]
    everything = render_readme(here + elsewhere)
    in_a_clone = render_readme(here, previous=everything)  # the gemm records were never fetched here
    assert is_kgits(in_a_clone) and "## Optimization: gemm on NVIDIA H200" in in_a_clone
    assert "600 TFLOPS" in in_a_clone and in_a_clone.count(KEPT_NOTE) == 1
    assert render_readme(here, previous=in_a_clone) == in_a_clone  # kept once, not marked again
    assert render_readme(here + elsewhere, previous=in_a_clone) == everything  # the records came back


def test_the_chart_names_the_unit_as_the_table_does():
    from kgit.model.record import Record, Status
    from kgit.render.readme import chart

    records = [Record("gemm", 0, "baseline", Status.BASELINE, metric="benchmarks.triton_tflops", value=600.0,
                      correctness=True)]
    assert '    y-axis "TFLOPS"' in chart("gemm", records)
    assert chart("gemm", records)[-2] == "Bars: each iteration's own measurement. Line: the best kept so far."
    records += [Record("gemm", 1, "worse", Status.REGRESSED, metric="benchmarks.triton_tflops", value=650.0,
                       correctness=True),
                Record("gemm", 2, "broken", Status.FAILED, metric="benchmarks.triton_tflops", correctness=False)]
    assert chart("gemm", records)[-2] == (
        "Bars: each iteration's own measurement; 1 reverted (a bar past the line did not beat the best beyond the "
        "noise); 1 failed (0: nothing measured). Line: the best kept so far.")


def _random_record(draw, kernel, iteration, started):
    from hypothesis import strategies as st

    from kgit.model.record import Record, Status

    status = draw(st.sampled_from(list(Status)))
    correct = status is not Status.FAILED
    return Record(kernel, iteration, draw(st.sampled_from(["tile", "fuse | split", "warps x2"])), status,
                  tier=draw(st.sampled_from([None, 1, 3])),
                  gpu=draw(st.sampled_from([None, "NVIDIA H200", "Fake GPU"])),
                  metric="gbps", value=draw(st.floats(1, 5000)) if correct else None, correctness=correct,
                  started=started, reason="kept anyway: a wider tile next" if status is Status.KEPT_ANYWAY else None)


def test_rendering_one_kernel_over_an_up_to_date_log_gives_the_full_rendering():
    """render_kernel (a step's rendering) equals render_readme over random sequences of records of
    several kernels, GPUs and runs, some sections kept from records this clone never had."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from kgit.render.readme import render_kernel, render_readme

    @settings(max_examples=150, deadline=None)
    @given(st.data())
    def check(data):
        kernels = ["gemm", "softmax", "soft"]  # soft: a prefix of another kernel's name
        counts, lost, done, steps = {}, [], [], []
        for n in range(data.draw(st.integers(1, 25))):
            kernel = data.draw(st.sampled_from(kernels))
            iteration = counts.get(kernel, -1) + 1 if data.draw(st.integers(0, 9)) else 0  # 0: a new run
            counts[kernel] = iteration
            record = _random_record(data.draw, kernel, iteration, f"2026-11-{1 + n // 10:02d}T{n % 10:02d}:00:00+00:00")
            data.draw(st.sampled_from([lost, done, steps, steps])).append(record)
        # a clone that lacks the lost records, its log rendered from what it has over a log that had them
        text = render_readme(done, render_readme(done + lost))
        for record in steps:  # each a step's record: its kernel rendered alone over the log so far
            done.append(record)
            full = render_readme(done, text)
            text = render_kernel(record.kernel, [r for r in done if r.kernel == record.kernel], text)
            assert text == full

    check()
