"""``orchestrace proxy``: an OpenAI-compatible gateway in front of an OpenAI-compatible engine (vLLM, SGLang)
that records every call as a model call (a turn) with the engine's token ids, with no change to the app.

Per call (``/v1/chat/completions``, ``/v1/completions``, ``/v1/responses``; streaming or not) it asks the
engine for token ids and logprobs (vLLM's ``return_token_ids`` and ``logprobs``), and a chat stream for its
usage (``stream_options.include_usage``), when the caller did not,
returns the engine's reply with those extra fields removed (unless the caller asked for them), and records
the call with the SDK's own model-call recording (:func:`orchestrace.instrumentation.start_model_call`: the
same attributes, and the same export-a-history-once rule, as ``@ot.llm``), exported over OTLP to a collector.

The call joins the caller's trace through the W3C ``traceparent`` / ``baggage`` headers its HTTP client sends
(``ot.inject()``: the span, and the agent and episode the call belongs to), or, for a client that cannot send
headers, the episode its base URL names (``http://proxy/e/<episode>/v1``).

Credentials: what a caller sends to authenticate (``Authorization``, and the other credential headers) is for
the proxy (``--token-file``) and never reaches the engine, which gets the proxy's own key
(``--upstream-key-file``) or none; ``--forward-authorization`` passes the caller's ``Authorization`` on
instead, for an engine that authenticates the callers themselves (never with ``--token-file``, whose tokens
would reach the engine).

It lives in the SDK because it records through the SDK, which the collector never imports (the import
contracts in ``pyproject.toml``); the collector's ``orchestrace proxy`` command runs ``python -m
orchestrace.proxy`` in its place. Its web stack (starlette, uvicorn, httpx) is the collector's, installed
with that command.
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx
from opentelemetry import trace
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

import orchestrace as ot
from orchestrace import semconv as sc
from orchestrace.context import extract
from orchestrace.history import PromptHistory
from orchestrace.instrumentation import Invocation, start_model_call
from orchestrace.telemetry import Telemetry, configured

#: The request header naming the policy version that serves the call (it wins over ``--policy-version``).
POLICY_VERSION_HEADER = "x-orchestrace-policy-version"
#: Where each endpoint's prompt is, and the operation it is.
_ENDPOINTS = {
    "chat/completions": ("messages", sc.OP_CHAT),
    "completions": ("prompt", sc.OP_TEXT_COMPLETION),
    "responses": ("input", sc.OP_CHAT),
}
#: Request headers not passed on to the engine (hop by hop, or about the body the proxy may rewrite).
_DROPPED_HEADERS = frozenset({"host", "content-length", "connection", "transfer-encoding", "accept-encoding"})
#: The caller's credentials (OpenAI's, Azure's, Anthropic's, a proxy's, cookies): never the engine's.
_CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "api-key", "x-api-key"})
#: Reply headers not passed back (the proxy sends its own body: decoded, maybe rewritten).
_REPLY_HEADERS_DROPPED = frozenset({"content-length", "content-encoding", "transfer-encoding", "connection"})


def _ask_for_ids(endpoint: str, body: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """``body`` asking the engine for token ids and logprobs, and the fields the caller did not ask for."""
    added: set[str] = set()
    if endpoint == "responses":
        return body, added  # the Responses API has no token-id option in vLLM
    asked = dict(body)
    if "return_token_ids" not in body:
        asked["return_token_ids"] = True
        added.add("return_token_ids")
    if body.get("logprobs") in (None, False):
        asked["logprobs"] = True if endpoint == "chat/completions" else 0  # completions: sampled token only
        added.add("logprobs")
    options = body.get("stream_options")
    if body.get("stream") and endpoint == "chat/completions" and not (
            isinstance(options, dict) and options.get("include_usage")):
        # A stream states its usage only when asked: in a last chunk of no choices, kept from the caller.
        asked["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
        added.add("include_usage")
    return asked, added


def _usage_only(chunk: Any) -> bool:
    """The last chunk of a stream asked for its usage: no choices, the usage."""
    return isinstance(chunk, dict) and not chunk.get("choices") and chunk.get("usage") is not None


def _strip(value: Any, added: set[str]) -> Any:
    """A reply (or a stream chunk) in the shape the caller asked for: without the added fields."""
    if not added or not isinstance(value, dict):
        return value
    value = dict(value)
    if "return_token_ids" in added:
        value.pop("prompt_token_ids", None)
    if "include_usage" in added and value.get("usage", 0) is None:
        del value["usage"]  # engines that send usage: null on every chunk when asked for usage
    choices = value.get("choices")
    if isinstance(choices, list):
        stripped = []
        for choice in choices:
            if isinstance(choice, dict):
                choice = dict(choice)
                if "return_token_ids" in added:
                    choice.pop("token_ids", None)
                    choice.pop("prompt_token_ids", None)
                if "logprobs" in added and "logprobs" in choice:
                    choice["logprobs"] = None
            stripped.append(choice)
        value["choices"] = stripped
    return value


class Gateway:
    """The proxy's state: the engine's base URL, the tokens callers must send, what the engine is sent as
    credentials (``upstream_key`` as a bearer token, or with ``forward_authorization`` the caller's own
    ``Authorization``; else none), and the HTTP client."""

    def __init__(self, upstream: str, *, tokens: frozenset[str] = frozenset(),
                 upstream_key: str | None = None, forward_authorization: bool = False,
                 telemetry: Telemetry | None = None, policy_version: str | None = None) -> None:
        if forward_authorization and (tokens or upstream_key):
            raise ValueError("forwarding the caller's Authorization excludes a token file (the callers' "
                             "tokens would reach the engine) and an upstream key (which one to send?)")
        self.upstream = upstream.rstrip("/")
        self.tokens = tokens
        self.upstream_key = upstream_key
        self.forward_authorization = forward_authorization
        self.telemetry = telemetry
        self.policy_version = policy_version
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=10.0))
        # Its own: the collector folds a gateway call into the app's record of the same call, so an app call
        # in this process (an instrumented app serving its own proxy) must never refer to a gateway call's
        # history, which would then be gone.
        self.prompt_history = PromptHistory()

    def app(self) -> Starlette:
        routes = [Route(f"{prefix}/v1/{path}", self._handler(path), methods=["POST"])
                  for path in _ENDPOINTS for prefix in ("", "/e/{episode}")]
        return Starlette(routes=routes)

    def _known(self, authorization: str) -> bool:
        """Whether ``authorization`` carries one of the callers' tokens; every token compared in constant
        time (a set lookup's timing would tell a guesser how close a guess hashes)."""
        presented = authorization.removeprefix("Bearer ").encode()
        found = False
        for token in self.tokens:
            found |= hmac.compare_digest(presented, token.encode())
        return found

    def _handler(self, endpoint: str) -> Any:
        async def handle(request: Request) -> Response:
            if self.tokens and not self._known(request.headers.get("authorization", "")):
                return PlainTextResponse("missing or wrong bearer token", status_code=401,
                                         headers={"WWW-Authenticate": "Bearer"})
            try:
                body = json.loads(await request.body())
            except ValueError:
                return JSONResponse({"error": {"message": "the body is not JSON"}}, status_code=400)
            if not isinstance(body, dict):
                return JSONResponse({"error": {"message": "the body is not a JSON object"}}, status_code=400)
            return await self._forward(request, endpoint, body)

        return handle

    async def _forward(self, request: Request, endpoint: str, body: dict[str, Any]) -> Response:
        asked, added = _ask_for_ids(endpoint, body)
        headers = self._upstream_headers(request.headers)
        url = f"{self.upstream}/{endpoint}"
        call = self._start(request.headers, endpoint, body, request.path_params.get("episode"))
        upstream_request = self.client.build_request("POST", url, json=asked, headers=headers)
        try:
            upstream = await self.client.send(upstream_request, stream=bool(body.get("stream")))
        except httpx.HTTPError as exc:
            await run_in_threadpool(call.fail, exc)
            return JSONResponse({"error": {"message": f"upstream unreachable: {exc}"}}, status_code=502)
        passed = {k: v for k, v in upstream.headers.items() if k.lower() not in _REPLY_HEADERS_DROPPED}
        if not body.get("stream") or upstream.status_code != 200:
            data = await upstream.aread()
            try:
                reply = json.loads(data)
            except ValueError:
                reply = None
            if upstream.status_code == 200 and reply is not None:
                await run_in_threadpool(call.stop, reply)
                data = json.dumps(_strip(reply, added)).encode()
            else:
                await run_in_threadpool(call.fail_with, f"http.{upstream.status_code}",
                                        data.decode("utf-8", "replace")[:500])
            return Response(data, status_code=upstream.status_code, headers=passed)
        return StreamingResponse(self._relay(upstream, call, added), status_code=200, headers=passed,
                                 background=BackgroundTask(upstream.aclose))

    def _upstream_headers(self, caller: Mapping[str, str]) -> dict[str, str]:
        """The caller's headers the engine gets: not its credentials, but the proxy's key (or, when told to,
        the caller's ``Authorization``)."""
        headers = {k: v for k, v in caller.items() if k.lower() not in _DROPPED_HEADERS | _CREDENTIAL_HEADERS}
        if self.upstream_key is not None:
            headers["authorization"] = f"Bearer {self.upstream_key}"
        elif self.forward_authorization and "authorization" in caller:
            headers["authorization"] = caller["authorization"]
        return headers

    def _start(self, headers: Mapping[str, str], endpoint: str, body: dict[str, Any],
               episode: str | None) -> Invocation:
        """The call's record: in the caller's trace (``traceparent``), else, for a base URL naming an episode
        (``/e/<episode>/v1``: a client that cannot send headers), a span of that episode in a trace of its
        own, which the collector files under the episode (``orchestrace.episode.id``)."""
        prompt_key, operation = _ENDPOINTS[endpoint]
        request = {k: v for k, v in body.items() if k != prompt_key}
        context = extract(headers)
        joined = trace.get_current_span(context).get_span_context().is_valid
        attributes: dict[str, Any] = {sc.ORCH_MODEL_CALL_GATEWAY: True}
        if episode and not joined:
            attributes[sc.ORCH_EPISODE_ID] = episode
        version = headers.get(POLICY_VERSION_HEADER) or self.policy_version
        if version:
            attributes[sc.ORCH_POLICY_VERSION] = version
        return start_model_call(self.telemetry or configured(), body.get("model"), operation=operation,
                                input=body.get(prompt_key), request=request, context=context,
                                attributes=attributes, prompt_history=self.prompt_history)

    async def _relay(self, upstream: httpx.Response, call: Invocation, added: set[str],
                     ) -> AsyncIterator[bytes]:
        """The engine's server-sent events passed on, each chunk recorded and stripped of the added fields."""
        finished = False
        dropped = False
        try:
            async for line in upstream.aiter_lines():
                if dropped and not line:
                    dropped = False
                    continue  # the end of the event the caller does not get
                dropped = False
                if line.startswith("data:"):
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        finished = True
                        await run_in_threadpool(call.stop)  # recorded before the caller sees the end
                    else:
                        try:
                            chunk = json.loads(payload)
                        except ValueError:
                            chunk = None
                        if chunk is not None:
                            call.on_item(chunk)
                            if "include_usage" in added and _usage_only(chunk):
                                dropped = True  # the caller did not ask for usage: recorded, not passed
                                continue
                            line = "data: " + json.dumps(_strip(chunk, added))
                yield (line + "\n").encode()
        finally:
            if not finished:
                call.close()  # the caller (or the engine) left before the end: the reply is recorded as cut


def _tokens(path: Path | None) -> frozenset[str]:
    """A token file as the collector reads it: one token, or lines ``name:token``."""
    if path is None:
        return frozenset()
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if len(lines) == 1 and ":" not in lines[0]:
        return frozenset(lines)
    return frozenset(line.split(":", 1)[1] for line in lines if ":" in line)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="orchestrace proxy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="The engine's OpenAI-compatible base URL (…/v1).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8010)
    parser.add_argument("--token-file", type=Path, help="Callers must send one of its tokens as Bearer.")
    parser.add_argument("--upstream-key-file", type=Path,
                        help="The engine's API key (the file's one line), sent to it as Bearer; callers' "
                        "credentials are never passed on.")
    parser.add_argument("--forward-authorization", action="store_true",
                        help="Pass the caller's Authorization header on to the engine (not with "
                        "--token-file or --upstream-key-file).")
    parser.add_argument("--collector", default=os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT",
                                                              "http://127.0.0.1:4318"),
                        help="The collector's OTLP/HTTP endpoint the calls are exported to.")
    parser.add_argument("--policy-version", help=f"The policy version of every call (a call's "
                        f"{POLICY_VERSION_HEADER} header wins): the version of the engine's weights.")
    args = parser.parse_args(argv)
    key_file = args.upstream_key_file
    try:
        gateway = Gateway(args.upstream, tokens=_tokens(args.token_file),
                          upstream_key=key_file.read_text(encoding="utf-8").strip() if key_file else None,
                          forward_authorization=args.forward_authorization,
                          policy_version=args.policy_version)
    except ValueError as exc:
        parser.error(f"--forward-authorization: {exc}")
    import uvicorn

    # Each call's span is exported as it ends, before its caller gets the reply: the collector has it before
    # the caller's episode ends, so the episode is written whole, not a revision later.
    handle = ot.configure("orchestrace-proxy", exporter="otlp", endpoint=args.collector, capture_content=True,
                          batch=False)
    try:
        uvicorn.run(gateway.app(), host=args.host, port=args.port, log_level="warning")
    finally:
        handle.shutdown()


if __name__ == "__main__":
    main()
