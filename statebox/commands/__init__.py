"""CLI command groups, one module each; every module exposes `register(app)`."""
