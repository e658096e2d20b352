"""The viewer's Starlette application: pages over run folders and the JSON they fetch. Read-only: GET only.

Pages:

* ``/``: the runs given, each with its counts;
* ``/runs/{run}``: the run: its progress (followed live), the report's figures (computed in the background, the
  page asks again until they are ready), the task × candidate matrix of outcomes (a cell per replicate) and the
  table of trials, with filters and sortable columns (``static/viewer.js`` draws them from ``/api``);
* ``/runs/{run}/trial?id=T``: one trial: verdict, criteria with evidence, the event timeline, the diff, the
  grader's output, stage times, limits and use, links to the raw files and the ATIF export;
* ``/runs/{run}/compare?task=T&a=C&b=D``: one task's trials by two candidates side by side.

JSON: ``/api/runs/{run}/rows?after=N`` (trial rows written after rowid N), ``/api/runs/{run}/progress``,
``/runs/{run}/figures`` (an HTML fragment, or 202 while it is computed).

Every response carries a Content-Security-Policy that allows only this server's own script and style (no inline
script, nothing from elsewhere) and forbids framing; raw files are ``text/plain`` under ``sandbox``. The Host
header must name this machine (``localhost``, a loopback address, or the address it was bound to): a page
elsewhere cannot reach the run's data by rebinding a domain name to 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from ..textsafe import printable
from .data import RunData
from .pages import trial_page, compare_page

HERE = Path(__file__).parent

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
RAW_CSP = "default-src 'none'; sandbox"

REPORT_EVERY_S = 30.0
"""A live run's figures are computed again at most this often (a finished run's once)."""


class Figures:
    """The report of one run, computed in a background thread and kept until the run's rows change."""

    def __init__(self, compute: Callable[[], str]) -> None:
        self._compute = compute
        self._lock = threading.Lock()
        self._key: Any = None
        self._html: str | None = None
        self._error: str | None = None
        self._busy = False
        self._at = 0.0

    def get(self, key: Any) -> tuple[str, str | None]:
        """("ready", html) / ("computing", older html or None) / ("error", message)."""
        with self._lock:
            stale = key != self._key
            if stale and not self._busy and (self._html is None or time.monotonic() - self._at > REPORT_EVERY_S
                                             or self._error is not None):
                self._busy = True
                threading.Thread(target=self._run, args=(key,), daemon=True, name="viewer-figures").start()
            if self._error is not None and not self._busy:
                return "error", self._error
            if self._html is not None and (not stale or not self._busy):
                return "ready", self._html
            return "computing", self._html

    def _run(self, key: Any) -> None:
        try:
            html, error = self._compute(), None
        except Exception as exc:  # the figures fail alone: the rest of the page stands
            html, error = None, f"{type(exc).__name__}: {exc}"
        with self._lock:
            self._key, self._html, self._error, self._busy, self._at = key, html, error, False, time.monotonic()


def report_html(run: RunData, link: Callable[[str, str], str]) -> str:
    """The report's figures for ``run`` as ``trialbox report`` computes them (its manifest, from where it was)."""
    from ..html import report_body
    from ..report import run_report
    from ..taskload import load_run_manifest

    report = run_report(run.paths, *load_run_manifest(run.paths))
    return report_body(report, link)


def make_app(runs: dict[str, Path], hosts: list[str] | None = None,
             figures: Callable[[RunData, Callable[[str, str], str]], str] = report_html) -> Starlette:
    """The application over ``runs`` (URL name → run folder). ``hosts``: the Host names accepted besides the
    loopback ones. ``figures`` computes a run's report fragment (the report itself by default)."""
    data = {name: RunData(name, Path(root)) for name, root in runs.items()}
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")), autoescape=True)
    templates = Jinja2Templates(env=env)
    env.filters["shown"] = printable
    env.filters["money"] = _money
    env.filters["q"] = lambda v: quote(str(v), safe="")
    env.globals["urlencode"] = urlencode
    cache: dict[str, Figures] = {}

    def run_of(request: Request) -> RunData:
        name = request.path_params["run"]
        if name not in data:
            raise _NotFound(f"no run named {name!r} here")
        return data[name]

    def compare_link(run: RunData) -> Callable[[str, str], str]:
        return lambda task, cand: f"/runs/{quote(run.name, safe='')}/compare?" + urlencode({"task": task, "a": cand})

    async def index(request: Request) -> Response:
        listed = []
        for name, run in data.items():
            try:
                listed.append({"name": name, "root": str(run.root), **run.progress()})
            except (OSError, ValueError) as exc:
                listed.append({"name": name, "root": str(run.root), "error": str(exc)})
        return templates.TemplateResponse(request, "index.html", {"runs": listed})

    async def run_page(request: Request) -> Response:
        run = run_of(request)
        cands, tasks = run.candidates_and_tasks()
        return templates.TemplateResponse(request, "run.html", {"run": run, "candidates": cands, "tasks": tasks,
                                                                "progress": run.progress()})

    async def figures_fragment(request: Request) -> Response:
        run = run_of(request)
        fig = cache.setdefault(run.name, Figures(lambda: figures(run, compare_link(run))))
        progress = run.progress()
        state, html = fig.get((progress["done"], progress["last_rowid"]))
        if state == "error":
            return HTMLResponse(f'<p class="warn">the figures could not be computed: {_esc(html)}</p>', status_code=200,
                                headers={"X-Figures": "error"})
        if state == "computing" and html is None:
            return HTMLResponse('<p class="muted">computing the figures…</p>', status_code=202)
        return HTMLResponse(html or "", headers={"X-Figures": state})

    async def rows_api(request: Request) -> Response:
        run = run_of(request)
        try:
            after = int(request.query_params.get("after", "0"))
        except ValueError:
            return JSONResponse({"error": "after: expected a whole number"}, status_code=400)
        rows, last = run.rows(after)
        return JSONResponse({"rows": rows, "last": last})

    async def progress_api(request: Request) -> Response:
        return JSONResponse(run_of(request).progress())

    async def trial(request: Request) -> Response:
        run = run_of(request)
        trial_id = request.query_params.get("id", "")
        context = trial_page(run, trial_id, request.query_params.get("attempt"))
        if context is None:
            raise _NotFound(f"no trial {trial_id!r} in run {run.name!r}")
        return templates.TemplateResponse(request, "trial.html", {"run": run, **context})

    async def compare(request: Request) -> Response:
        run = run_of(request)
        cands, tasks = run.candidates_and_tasks()
        q = request.query_params
        task = q.get("task") or (tasks[0] if tasks else "")
        a = q.get("a") or (cands[0] if cands else "")
        b = q.get("b") or next((c for c in cands if c != a), a)
        return templates.TemplateResponse(request, "compare.html", {
            "run": run, "task": task, "a": a, "b": b, "candidates": cands, "tasks": tasks,
            "sides": [compare_page(run, task, a), compare_page(run, task, b)]})

    async def raw(request: Request) -> Response:
        run = run_of(request)
        q = request.query_params
        try:
            attempt = int(q.get("attempt", "1"))
        except ValueError:
            attempt = 0
        path = run.attempt_file(q.get("id", ""), attempt, q.get("name", ""))
        if path is None:
            raise _NotFound("no such file of that trial")
        headers = {"Content-Security-Policy": RAW_CSP, "X-Content-Type-Options": "nosniff"}
        if path.suffix == ".tar":
            return FileResponse(path, media_type="application/x-tar", filename=f"{run.name}-{path.name}",
                                headers=headers)
        return FileResponse(path, media_type="text/plain; charset=utf-8", headers=headers,
                            content_disposition_type="inline")

    async def atif(request: Request) -> Response:
        from ..atif import trajectory
        from ..events import read_events
        from ..result import TrialResult

        run = run_of(request)
        doc = run.trial_document(request.query_params.get("id", ""))
        if doc is None:
            raise _NotFound("no such trial")
        result = TrialResult.from_dict(doc)
        events_file = run.paths.attempt(result.id, result.attempt).events
        events = read_events(events_file) if events_file.exists() else []
        body = json.dumps(trajectory(result, events, "", {"name": result.candidate, "version": "unknown"},
                                     run.paths.key), indent=2, ensure_ascii=True)
        return Response(body, media_type="application/json",
                        headers={"Content-Security-Policy": RAW_CSP, "X-Content-Type-Options": "nosniff"})

    async def not_found(request: Request, exc: Exception) -> Response:
        return PlainTextResponse(printable(str(exc)), status_code=404)

    routes = [
        Route("/", index), Route("/runs/{run}", run_page), Route("/runs/{run}/figures", figures_fragment),
        Route("/runs/{run}/trial", trial), Route("/runs/{run}/compare", compare), Route("/runs/{run}/raw", raw),
        Route("/runs/{run}/atif", atif), Route("/api/runs/{run}/rows", rows_api),
        Route("/api/runs/{run}/progress", progress_api),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    allowed = ["localhost", "127.0.0.1", "[::1]", "::1", *(hosts or [])]
    app = Starlette(routes=routes, middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=allowed),
                                               Middleware(_Headers)],
                    exception_handlers={_NotFound: not_found})
    return app


class _NotFound(Exception):
    pass


class _Headers:
    """Adds the page's security headers to every response that has none of its own."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                names = {k.lower() for k, _ in headers}
                if b"content-security-policy" not in names:
                    headers.append((b"content-security-policy", CSP.encode()))
                headers += [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
                            (b"cache-control", b"no-store")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)


def _esc(text: Any) -> str:
    from ..textsafe import html_text

    return html_text(text)


def _money(value: Any) -> str:
    from ..summary import money

    try:
        return money(float(value))
    except (TypeError, ValueError):
        return "–"
