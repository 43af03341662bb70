"""The command line: every `soda` command, and what only the CLI calls (status,
reports, progress, doctor, init, demo). `app.py` holds what commands share;
`main.py` registers every command module by importing them; `entry.py` is the
entry point, which imports only the asked command's module. Commands parse,
load config, call the core, print; nothing imports `cli/`.

May import: every other room.
"""
