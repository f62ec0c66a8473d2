"""From a measurement to the next change: profile, the profilers and their output, diagnose, context."""

# The NVTX range around the harness's profiled launches (kgit.harness.run.profile), which kgit's ncu run
# reads (profilers.run_ncu). Here, not in profilers, so that a test on the harness need not import them.
PROFILE_RANGE = "kgit-profile"
