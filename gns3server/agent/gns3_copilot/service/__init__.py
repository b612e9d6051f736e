"""Sessions, runs, streaming, cancellation and persistence of the copilot."""
