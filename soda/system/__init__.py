"""The machine: the one subprocess runner and the process registry
(`proc.py`), the jail agent-run code executes in (`jail.py`), the instance lock
(`lock.py`), how a soda process starts and stops honestly (`lifecycle.py`) and
the clock every wait uses (`clock.py`), working windows (`windows.py`).

May import: config, errors.
"""
