"""From a measurement to the next change: profile, the profilers and their output, diagnose, context."""
