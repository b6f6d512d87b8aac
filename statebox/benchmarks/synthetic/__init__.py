"""statebox.benchmarks.synthetic"""
