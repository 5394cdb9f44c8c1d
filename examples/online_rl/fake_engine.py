"""A fake OpenAI-compatible engine on loopback that answers the way vLLM does: deterministic replies, and with
``return_token_ids`` / ``logprobs`` the prompt's and completion's token ids and the sampled logprobs (on the
response, or spread over the chunks when streaming). No GPU, no network: what the online loop's test checks
every recorded token id against."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def token_id(word: str) -> int:
    """The fake tokenizer: one token per word, its id a hash of the word."""
    return int.from_bytes(hashlib.sha256(word.encode()).digest()[:2], "big")


def prompt_text(messages: list[dict[str, Any]]) -> str:
    return " ".join(f"{m.get('role')}: {m.get('content') or ''}" for m in messages)


def reply_words(messages: list[dict[str, Any]]) -> list[str]:
    """The sampled completion: a function of the prompt alone (so every rollout's reply is known)."""
    digest = hashlib.sha256(prompt_text(messages).encode()).hexdigest()
    return ["answer", str(int(digest[:4], 16) % 10), "from", "the", "engine"]


def sampled(messages: list[dict[str, Any]]) -> tuple[list[int], list[tuple[str, int, float]]]:
    """The prompt's token ids and the completion's (piece, token id, logprob), as the engine returns them."""
    prompt_ids = [token_id(w) for w in prompt_text(messages).split()]
    pieces = [(w if i == 0 else " " + w) for i, w in enumerate(reply_words(messages))]
    return prompt_ids, [(p, token_id(p.strip()), -0.125 * (i + 1)) for i, p in enumerate(pieces)]


class _Engine(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert isinstance(self.server, _Server)
        self.server.headers_seen.append({k.lower(): v for k, v in self.headers.items()})
        key = self.server.api_key
        if key is not None and self.headers.get("Authorization") != f"Bearer {key}":
            self.send_response(401)  # as ``vllm serve --api-key``
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.endswith("/completions") and not self.path.endswith("/chat/completions"):
            self._completion(body)
            return
        if self.path.endswith("/responses"):
            self._response(body)
            return
        prompt_ids, completion = sampled(body["messages"])
        ids, logprobs = body.get("return_token_ids") is True, body.get("logprobs") is True
        base = {"id": "chatcmpl-fake", "created": 1, "model": body["model"]}
        usage = {"prompt_tokens": len(prompt_ids), "completion_tokens": len(completion),
                 "total_tokens": len(prompt_ids) + len(completion)}
        if not body.get("stream"):
            text = "".join(p for p, _, _ in completion)
            choice: dict[str, Any] = {"index": 0, "finish_reason": "stop", "logprobs": None,
                                      "message": {"role": "assistant", "content": text}}
            if ids:
                choice["token_ids"] = [i for _, i, _ in completion]
            if logprobs:
                choice["logprobs"] = {"content": [{"token": p, "logprob": lp, "bytes": list(p.encode()),
                                                   "top_logprobs": []} for p, _, lp in completion]}
            reply = {**base, "object": "chat.completion", "choices": [choice], "usage": usage}
            if ids:
                reply["prompt_token_ids"] = prompt_ids
            self._send(json.dumps(reply).encode(), "application/json")
            return
        chunks = []
        for k, (piece, tid, lp) in enumerate(completion):
            delta: dict[str, Any] = {"content": piece} | ({"role": "assistant"} if k == 0 else {})
            choice = {"index": 0, "delta": delta, "logprobs": None,
                      "finish_reason": "stop" if k == len(completion) - 1 else None}
            if ids:
                choice["token_ids"] = [tid]
            if logprobs:
                choice["logprobs"] = {"content": [{"token": piece, "logprob": lp,
                                                   "bytes": list(piece.encode()), "top_logprobs": []}]}
            chunk = {**base, "object": "chat.completion.chunk", "choices": [choice]}
            if ids and k == 0:
                chunk["prompt_token_ids"] = prompt_ids
            chunks.append(chunk)
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({**base, "object": "chat.completion.chunk", "choices": [], "usage": usage})
        data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        self._send(data.encode(), "text/event-stream")

    def _completion(self, body: dict[str, Any]) -> None:
        """``/v1/completions``: a text prompt, vLLM's legacy logprobs (parallel lists)."""
        prompt_ids, completion = sampled([{"role": "user", "content": body["prompt"]}])
        text = "".join(p for p, _, _ in completion)
        choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}
        if body.get("return_token_ids") is True:
            choice["token_ids"] = [i for _, i, _ in completion]
        if body.get("logprobs") is not None:
            choice["logprobs"] = {"tokens": [p for p, _, _ in completion],
                                  "token_logprobs": [lp for _, _, lp in completion]}
        reply: dict[str, Any] = {"id": "cmpl-fake", "object": "text_completion", "created": 1,
                                 "model": body["model"], "choices": [choice],
                                 "usage": {"prompt_tokens": len(prompt_ids),
                                           "completion_tokens": len(completion)}}
        if body.get("return_token_ids") is True:
            reply["prompt_token_ids"] = prompt_ids
        self._send(json.dumps(reply).encode(), "application/json")

    def _response(self, body: dict[str, Any]) -> None:
        """``/v1/responses``: the Responses API's shape (no token ids: vLLM has no option for them there)."""
        prompt = body["input"] if isinstance(body["input"], str) else prompt_text(body["input"])
        prompt_ids, completion = sampled([{"role": "user", "content": prompt}])
        text = "".join(p for p, _, _ in completion)
        reply = {"id": "resp-fake", "object": "response", "created_at": 1, "model": body["model"],
                 "status": "completed",
                 "output": [{"type": "message", "id": "msg-1", "role": "assistant", "status": "completed",
                             "content": [{"type": "output_text", "text": text, "annotations": []}]}],
                 "usage": {"input_tokens": len(prompt_ids), "output_tokens": len(completion),
                           "total_tokens": len(prompt_ids) + len(completion)}}
        self._send(json.dumps(reply).encode(), "application/json")

    def _send(self, data: bytes, media: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    api_key: str | None = None
    headers_seen: list[dict[str, str]]  # each request's headers (names in lower case), in order


def serve(port: int = 0, api_key: str | None = None) -> _Server:
    """Start the engine on ``127.0.0.1:port`` (0: a free port) in a daemon thread; its base URL is
    ``http://127.0.0.1:{server.server_port}/v1``. With ``api_key``, a call without it as Bearer is refused
    (401). ``server.headers_seen``: what each call sent."""
    server = _Server(("127.0.0.1", port), _Engine)
    server.api_key, server.headers_seen = api_key, []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
