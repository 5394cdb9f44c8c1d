"""The view's web app: the static pages and a small JSON API over an :class:`OutputStore`.

``GET /api/status`` (cheap: the pages poll it for live updates), ``/api/episodes?after=G`` (the rows that
changed after generation G), ``/api/trace?id=`` (the trace and its turns without their content),
``/api/problems?id=`` (its validation problems), ``/api/credit?id=`` (credit under every strategy),
``/api/turn?trace=&turn=`` (one turn with its content store entries).

Exposure as ``orchestrace collect``: on loopback the ``Host`` header must be a loopback name (no DNS
rebinding); with a token, every API call needs it (``Authorization: Bearer``, or the cookie that opening
``/?token=...`` once sets).
"""

from __future__ import annotations

import hmac
from collections.abc import Collection
from importlib.resources import files
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from orchestrace_collector.outcome import episode_outcome
from orchestrace_collector.receiver_http import bearer_matches
from orchestrace_collector.view.credit import credit_by_strategy
from orchestrace_collector.view.store import OutputStore

TOKEN_COOKIE = "orchestrace_view"
#: Turn fields the timeline does not need (the turn page fetches them): a 2,000-turn episode stays small.
_HEAVY_TURN_FIELDS = ("prompt", "completion", "tools", "prompt_token_ids", "completion_token_ids",
                      "completion_logprobs")


class _Json(JSONResponse):
    """orjson: a 10,000-event trace is several MB of JSON, ten times faster to write than with ``json``."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def static_dir() -> Path:
    return Path(str(files("orchestrace_collector.view").joinpath("static")))


def light_turn(turn: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in turn.items() if k not in _HEAVY_TURN_FIELDS}


def trace_payload(store: OutputStore, trace_id: str) -> dict[str, Any] | None:
    trace = store.trace(trace_id)
    if trace is None:
        return None
    return {
        "trace": trace,
        "turns": [light_turn(t) for t in store.turns(trace_id)],
        "outcome": episode_outcome(trace.get("rewards") or {}),  # the exports' episode_reward
    }


def problems_payload(store: OutputStore, trace_id: str) -> dict[str, Any] | None:
    """Apart from the trace: validating a 10,000-event trace takes seconds, and the timeline need not wait."""
    problems = store.problems(trace_id)
    return None if problems is None else {"problems": problems}


def credit_payload(store: OutputStore, trace_id: str) -> dict[str, Any] | None:
    trace = store.trace(trace_id)
    if trace is None:
        return None
    if store.problems(trace_id):
        return {"error": "the trace fails validation; credit cannot be recomputed"}
    return credit_by_strategy(trace, store.turns(trace_id))


def turn_payload(store: OutputStore, trace_id: str, turn_id: str) -> dict[str, Any] | None:
    turn = store.turn(trace_id, turn_id)
    if turn is None:
        return None
    contents = {}
    for key in ("input_ref", "output_ref"):
        ref = turn.get(key)
        if isinstance(ref, str):
            contents[ref] = store.content(trace_id, ref)
    return {"turn": turn, "contents": contents}


def create_app(store: OutputStore, *, token: str | None = None,
               allowed_hosts: Collection[str] | None = None) -> Starlette:
    def refused(request: Request) -> Response | None:
        if allowed_hosts is not None:
            host = request.url.hostname or ""
            if host not in allowed_hosts:
                return PlainTextResponse(f"host {host!r} not allowed", status_code=403)
        if token is not None:
            cookie = request.cookies.get(TOKEN_COOKIE, "")
            if not (bearer_matches(request.headers.get("authorization"), token)
                    or hmac.compare_digest(cookie.encode(), token.encode())):
                return JSONResponse({"error": "missing or wrong token: open the page as /?token=<token>"},
                                    status_code=401)
        return None

    async def index(request: Request) -> Response:
        given = request.query_params.get("token")
        if token is not None and given is not None:
            if not hmac.compare_digest(given.encode(), token.encode()):
                return PlainTextResponse("wrong token", status_code=401)
            # The token leaves the address bar: the cookie carries it from now on.
            response: Response = RedirectResponse("/", status_code=303)
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
            return response
        denied = refused(request)
        if denied is not None and denied.status_code == 403:
            return denied
        return Response((static_dir() / "index.html").read_bytes(), media_type="text/html")

    def api(handler: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            denied = refused(request)
            if denied is not None:
                return denied
            await run_in_threadpool(store.refresh)
            result = await run_in_threadpool(handler, request.query_params)
            if result is None:
                return JSONResponse({"error": "not found"}, status_code=404)
            return _Json(result, headers={"Cache-Control": "no-store"})

        return endpoint

    def episodes(query: Any) -> dict[str, Any]:
        after = query.get("after", "")
        after = int(after) if after.isdigit() else 0
        return {**store.status(), "episodes": store.summaries(after)}

    routes = [
        Route("/", index),
        Route("/api/status", api(lambda q: store.status())),
        Route("/api/episodes", api(episodes)),
        Route("/api/trace", api(lambda q: trace_payload(store, q.get("id", "")))),
        Route("/api/problems", api(lambda q: problems_payload(store, q.get("id", "")))),
        Route("/api/credit", api(lambda q: credit_payload(store, q.get("id", "")))),
        Route("/api/turn", api(lambda q: turn_payload(store, q.get("trace", ""), q.get("turn", "")))),
        Mount("/static", StaticFiles(directory=static_dir()), name="static"),
    ]
    return Starlette(routes=routes)
