"""statebox.audits"""
