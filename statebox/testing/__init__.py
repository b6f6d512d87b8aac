"""statebox.testing"""
