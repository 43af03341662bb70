"""The repository soda works on: git with soda's options (`git.py`), worktrees,
branches and the compare-and-swap landing (`workspace.py`), the pool of
checkouts agents and the gate use (`checkouts.py`), the milestone's name and
branch (`milestone.py`), refs and trees read with as few git processes as
possible (`refs.py`), objects read without a git process each (`objects.py`),
commits and trees written as git writes them (`writing.py`), long-lived git
processes for ref transactions, tree diffs and attributes, and git's resolved
settings (`helpers.py`), the milestone's digest since its base, advanced merge
by merge for SENSE (`digest.py`, its numstat rows in `numstat.py`), and the
push to a remote the forge and the fleet share (`push.py`).

May import: config, errors, system.
"""
