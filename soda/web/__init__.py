"""The web dashboard: one page to watch soda and to answer it, beside the CLI.

It reads the same database as the CLI (the daemon may run or not) and writes a
person's inputs through the same code (`soda.human.checks`, `write_input`), with
their provenance `web`. `site.py` holds what a request reads (`Site`; the CLI's
own reports are handed in as `Reports`), `security.py` what every request must
pass (loopback or a token, the Host header, CSRF, a strict CSP), `app.py` the
routes and error pages, `views.py` what each page shows (drawn by `shapes.py`:
the plan's DAG and the charts as SVG; rendered by `pages.py` through
`templating.py`), `actions.py` the forms that change something,
`stream.py` the live events (server-sent), `server.py` the process (`soda web`).
Starlette, Jinja2 and uvicorn are the `[web]` extra, imported only in here.

May import: config, contracts, errors, events, human, store, system, trace.
"""
