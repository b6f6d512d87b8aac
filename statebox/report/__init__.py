"""statebox.report: what people read of a run (the HTML report, the terminal leaderboard, the live view,
the trust tables, Inspect/ATIF export). It reads a run folder through `harness.store`, `harness.plan` and
`harness.trust_results`; nothing in `harness/` imports it (tests/test_layers.py and the import-linter
contracts in pyproject.toml check both)."""
