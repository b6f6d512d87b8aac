"""statebox.benchmarks"""
