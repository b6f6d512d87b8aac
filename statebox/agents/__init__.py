"""statebox.agents"""
