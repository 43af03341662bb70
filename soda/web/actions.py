"""The forms that change something (POST): approve, reject or edit-and-approve
a waiting plan, answer a question, send a correction, pause, resume, stop.

Each checks the server's CSRF token first, then builds the input with
`soda.human.commands` exactly as the CLI does (the repository's record:
`soda.human.checks.DatabaseRecord`), and writes it to the inbox, its
provenance `web`: the daemon takes it like any other input. A refusal is one
line (an `InputError`, shown by the error page) and writes nothing; a refused
plan edit shows the edit again beside its reason, the plan still waiting."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from soda.errors import InputError
from soda.human import commands
from soda.human.checks import DatabaseRecord
from soda.human.commands import Face, Provenance, Said
from soda.web.security import refuse
from soda.web.site import Site
from soda.web.templating import render, site_of

BY = Provenance(Face.WEB)
MAX_FORM_BYTES = 512 * 1024


class FormTooLarge(InputError):
    """A form larger than MAX_FORM_BYTES."""


async def form_of(request: Request) -> dict[str, str]:
    """The url-encoded form, first value of each field; bounded in size."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise FormTooLarge(f"the form is larger than {MAX_FORM_BYTES // 1024} KiB")
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {key: values[0] for key, values in fields.items()}


def _queue(site: Site, said: Said) -> str:
    """Write one input from the page; the line that says what was queued."""
    commands.queue(site.config.state_dir, said)
    return f"queued {said.line()}" + (f" ({said.note})" if said.note else "")


def _record(site: Site) -> DatabaseRecord:
    return DatabaseRecord(site.db, site.config)


def _number(form: dict[str, str], name: str) -> int:
    try:
        return int(form.get(name, ""))
    except ValueError:
        raise InputError(f"the form's {name} is not a number: {form.get(name)!r}") from None


def _back(form: dict[str, str], said: str) -> Response:
    """Back to the page the form was on (a path of this site), saying what happened."""
    back = form.get("back") or "/"
    if not back.startswith("/") or back.startswith("//") or "\\" in back:
        back = "/"
    path = back.split("?", 1)[0]
    return RedirectResponse(f"{path}?{urlencode({'said': said})}", status_code=303)


def _action(work: Callable[[Site, dict[str, str]], str]) -> Callable[[Request], Any]:
    """A POST handler: the CSRF check, then `work` (in a thread: it touches the
    database and the inbox), then back to the page."""

    async def handler(request: Request) -> Response:
        site = site_of(request)
        form = await form_of(request)
        if not site.guard.csrf_ok(form.get("csrf")):
            return refuse(
                403, "refused: the form's CSRF token is missing or wrong; reload the page"
            )
        said = await run_in_threadpool(work, site, form)
        return _back(form, said)

    return handler


def _approve(site: Site, form: dict[str, str]) -> str:
    return _queue(site, commands.approve(_record(site), BY, _number(form, "iteration")))


def _reject(site: Site, form: dict[str, str]) -> str:
    number = _number(form, "iteration")
    return _queue(site, commands.reject(_record(site), BY, number, form.get("reason")))


def _answer(site: Site, form: dict[str, str]) -> str:
    number = _number(form, "question")
    return _queue(site, commands.answer(_record(site), BY, number, form.get("text", "").strip()))


def _tell(site: Site, form: dict[str, str]) -> str:
    return _queue(site, commands.tell(BY, form.get("text", "").strip()))


def _control(site: Site, form: dict[str, str]) -> str:
    return _queue(site, commands.control(BY, form.get("kind", "")))


approve = _action(_approve)
reject = _action(_reject)
answer = _action(_answer)
tell = _action(_tell)
control = _action(_control)


async def edit(request: Request) -> Response:
    """Approve a waiting plan as the person edited it; a bad edit is shown again
    with its reason (status 400), nothing queued."""
    site = site_of(request)
    form = await form_of(request)
    if not site.guard.csrf_ok(form.get("csrf")):
        return refuse(403, "refused: the form's CSRF token is missing or wrong; reload the page")
    number = _number(form, "iteration")
    text = form.get("plan", "")
    try:
        said = await run_in_threadpool(_edit, site, number, text)
    except InputError as exc:
        return render(
            request, "edit.html", 400, nav="history", number=number, text=text, problem=str(exc)
        )
    return _back({"back": f"/iteration/{number}"}, said)


def _edit(site: Site, number: int, text: str) -> str:
    return _queue(site, commands.edit(_record(site), BY, number, text))
