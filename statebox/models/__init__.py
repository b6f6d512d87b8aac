"""statebox.models: the shipped tracker weights (`suite-yolov8n.pt`, its card) and the script that
measured them (`coverage_val.py`, run by hand; it stands on `statebox.tracker`). A package so the
layer contracts (pyproject.toml, import-linter) and mypy cover the script like any other module."""
