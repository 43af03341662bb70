"""The forms that change something (POST): approve, reject or edit-and-approve
a waiting plan, answer a question, send a correction, pause, resume, stop.

Each checks the server's CSRF token first, then the input exactly as the CLI
does (`soda.human.checks`), and writes it to the inbox with `write_input`, its
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
from soda.human.checks import (
    checked_input,
    checked_plan_edit,
    open_question,
    verdict_target_note,
    waiting_plan,
)
from soda.human.write import describe, write_input
from soda.web.security import refuse
from soda.web.site import Site
from soda.web.templating import render, site_of

SOURCE = "web"
MAX_FORM_BYTES = 512 * 1024
CONTROLS = ("pause", "resume", "stop")


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


def _queue(site: Site, note: str | None = None, **fields: Any) -> str:
    """Write one input from the page; the line that says what was queued."""
    item = checked_input(fields)
    write_input(site.config.state_dir, item, SOURCE)
    return f"queued {describe(item)}" + (f" ({note})" if note else "")


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
    number = _number(form, "iteration")
    note = verdict_target_note(site.db, number, "approve")
    return _queue(site, note, kind="approve", target=number)


def _reject(site: Site, form: dict[str, str]) -> str:
    number = _number(form, "iteration")
    note = verdict_target_note(site.db, number, "reject")
    reason = form.get("reason", "").strip() or None
    return _queue(site, note, kind="reject", target=number, text=reason)


def _answer(site: Site, form: dict[str, str]) -> str:
    number = _number(form, "question")
    text = form.get("text", "").strip()
    if not text:
        raise InputError(f"the answer to question {number} is empty: write one")
    asked = open_question(site.db, number)
    return _queue(
        site, f"question {number}: {asked.question}", kind="answer", target=number, text=text
    )


def _tell(site: Site, form: dict[str, str]) -> str:
    text = form.get("text", "").strip()
    if not text:
        raise InputError("the correction is empty: write what soda should know")
    return _queue(site, kind="correction", text=text)


def _control(site: Site, form: dict[str, str]) -> str:
    kind = form.get("kind", "")
    if kind not in CONTROLS:
        raise InputError(f"unknown control {kind!r}: use one of {', '.join(CONTROLS)}")
    return _queue(site, kind=kind)


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
    note = verdict_target_note(site.db, number, "approve")
    original = waiting_plan(site.db, number)
    edited = checked_plan_edit(text, site.db, site.config)
    if edited == original:
        return _queue(
            site, "the plan is unchanged: approved as it is", kind="approve", target=number
        )
    return _queue(site, note, kind="plan_edit", target=number, plan=edited.model_dump(mode="json"))
