"""statebox.scoring"""
