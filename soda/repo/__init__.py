"""The repository soda works on: git with soda's options (`git.py`), worktrees,
branches and the compare-and-swap landing (`workspace.py`), the pool of
checkouts agents and the gate use (`checkouts.py`), the milestone's name and
branch (`milestone.py`).

May import: config, errors, system.
"""
