"""The job programs: shared option handling, bench, nightly, challenge scoring, synthetic data."""
