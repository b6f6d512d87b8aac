"""statebox.harness"""
