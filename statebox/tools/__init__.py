"""statebox.tools"""
