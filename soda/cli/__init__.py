"""The command line: every `soda` command, and what only the CLI calls (status,
reports, progress, doctor, init, demo). `app.py` holds what commands share;
`main.py` is the entry point and registers the command modules by importing
them. Commands parse, load config, call the core, print; nothing imports `cli/`.

May import: every other room.
"""
