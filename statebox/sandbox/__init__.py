"""statebox.sandbox"""
