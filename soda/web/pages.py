"""The pages a person reads (GET): Now, History, Iteration (and its plan
editor), Tasks and Events. Each handler gathers its view (`soda.web.views`) and
renders its template; reading never changes anything."""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from soda.human.checks import waiting_plan
from soda.web import views
from soda.web.templating import fragment, render, site_of


def now(request: Request) -> Response:
    """Now: what soda is doing and what waits for a person."""
    return render(request, "now.html", nav="now", **views.now(site_of(request)))


def now_panel(request: Request) -> Response:
    """The Now page's live part alone, fetched again when an event arrives."""
    site = site_of(request)
    html = fragment("_now.html", csrf=site.guard.csrf, path="/", **views.now(site))
    return HTMLResponse(html, headers={"cache-control": "no-store"})


def history(request: Request) -> Response:
    """History: one row per iteration, with cost, tokens and the gate charted."""
    limit = _int(request.query_params.get("limit"), views.HISTORY_LIMIT)
    data = views.history_page(site_of(request), max(1, min(limit, views.HISTORY_LIMIT)))
    return render(request, "history.html", nav="history", **data)


def iteration(request: Request) -> Response:
    """Iteration N: everything `soda show N` says, drawn."""
    number = int(request.path_params["number"])
    data = views.iteration_page(site_of(request), number)
    return render(request, "iteration.html", nav="history", **data)


def edit(request: Request) -> Response:
    """The waiting plan of iteration N as JSON, to edit and approve."""
    number = int(request.path_params["number"])
    plan = waiting_plan(site_of(request).db, number)
    text = json.dumps(plan.model_dump(mode="json"), indent=2, ensure_ascii=False)
    return render(request, "edit.html", nav="history", number=number, text=text, problem=None)


def tasks(request: Request) -> Response:
    """Tasks: the milestone's Trace tree."""
    return render(request, "tasks.html", nav="tasks", **views.tasks_page(site_of(request)))


def events(request: Request) -> Response:
    """Events: the latest, then live; filtered by kind."""
    kind = (request.query_params.get("kind") or "").strip()[:80]
    return render(request, "events.html", nav="events", **views.events_page(site_of(request), kind))


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default
