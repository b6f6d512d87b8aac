"""statebox: trustworthy evaluation of agents on video state-tracking benchmarks."""

__version__ = "0.1.0"
