"""The run core: every `unscaffold run` (plain evaluations and reviewed collection alike) goes through here.

Runner, one trial, the executors (local threads, Ray), results aggregation, the run folder's schema and its HTML
report."""
