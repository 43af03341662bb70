"""Pages from Jinja2 templates (`soda/web/templates/`, shipped in the wheel):
autoescaped, and an undefined name is an error rather than a blank."""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from soda.human.commands import Face
from soda.human.routing import Control
from soda.web.site import Site

ENV = Environment(
    loader=PackageLoader("soda.web", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)

CONTROL_LABELS: dict[str, str] = {
    Control.PAUSE: "Pause after this iteration",
    Control.RESUME: "Resume",
    Control.STOP: "Stop soda after this iteration",
}
"""The control buttons: one per control the web offers (`Face.WEB.controls`,
checked on import), shown in this order."""
if set(CONTROL_LABELS) != Face.WEB.controls:
    raise RuntimeError(f"web control buttons out of step with {sorted(Face.WEB.controls)}")
ENV.globals["controls"] = CONTROL_LABELS


def site_of(request: Request) -> Site:
    """The `Site` the app was built with."""
    site: Site = request.app.state.site
    return site


def render(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """Template `name` with `context`, the request and the CSRF token."""
    site = site_of(request)
    html = ENV.get_template(name).render(
        request=request, path=request.url.path, csrf=site.guard.csrf, **context
    )
    return HTMLResponse(html, status_code=status_code, headers={"cache-control": "no-store"})


def fragment(name: str, **context: Any) -> str:
    """A template rendered alone (a live-updated part of a page)."""
    return ENV.get_template(name).render(**context)
