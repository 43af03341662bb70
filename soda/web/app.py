"""The dashboard as an ASGI app: its routes, its static files (`static/`,
served from this origin only), its guard (`soda.web.security`) and its error
pages, each one line saying what went wrong: never a traceback."""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from soda.errors import SodaError
from soda.web import actions, pages, stream
from soda.web.security import Guarded
from soda.web.site import Site
from soda.web.templating import render

STATIC = Path(__file__).resolve().parent / "static"

ROUTES = [
    Route("/", pages.now),
    Route("/now/panel", pages.now_panel),
    Route("/history", pages.history),
    Route("/iteration/{number:int}", pages.iteration),
    Route("/iteration/{number:int}/edit", pages.edit),
    Route("/tasks", pages.tasks),
    Route("/events", pages.events),
    Route("/stream", stream.stream),
    Route("/act/approve", actions.approve, methods=["POST"]),
    Route("/act/reject", actions.reject, methods=["POST"]),
    Route("/act/edit", actions.edit, methods=["POST"]),
    Route("/act/answer", actions.answer, methods=["POST"]),
    Route("/act/tell", actions.tell, methods=["POST"]),
    Route("/act/control", actions.control, methods=["POST"]),
    Mount("/static", StaticFiles(directory=STATIC), name="static"),
]


def _one_line(text: str) -> str:
    return (text.strip().splitlines() or ["(no reason given)"])[0]


def error_page(request: Request, status: int, line: str) -> Response:
    """An error: its status and one line."""
    return render(request, "error.html", status, nav="", line=_one_line(line), code=status)


async def _soda_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SodaError)
    status = 400 if exc.exit_code == 2 else 500
    return error_page(request, status, str(exc) or type(exc).__name__)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    what = {404: "no such page", 405: "this page does not take that method"}
    return error_page(request, exc.status_code, what.get(exc.status_code, str(exc.detail)))


async def _crash(request: Request, exc: Exception) -> Response:
    return error_page(request, 500, f"internal error: {type(exc).__name__}: {exc}")


def build_app(site: Site) -> ASGIApp:
    """The dashboard for `site`, guarded: the guard is the outermost layer, so
    every response (an error page too) carries its headers."""
    app = Starlette(
        routes=ROUTES,
        exception_handlers={
            SodaError: _soda_error,
            HTTPException: _http_error,
            Exception: _crash,
        },
    )
    app.state.site = site
    return Guarded(app, site.guard)
