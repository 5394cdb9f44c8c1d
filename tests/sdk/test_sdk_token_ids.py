"""Token ids and logprobs round trip: the real ``openai`` client against a small OpenAI-compatible server on
loopback that answers the way vLLM does with ``return_token_ids`` and ``logprobs`` (prompt token ids on the
response, or on the first chunk when streaming; completion token ids on each choice, or each chunk's new
ones; logprobs under ``logprobs.content``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import openai
import orchestrace as ot
import pytest
from written_turns import record_turns

PROMPT_IDS = [151644, 872, 198, 3838, 374, 279, 6722, 30]
#: The completion the fake engine samples: (text piece, token id, logprob).
SAMPLED = [
    ("The", 785, -0.01),
    (" capital", 6722, -0.25),
    (" is", 374, -0.5),
    (" Paris", 12095, -0.125),
    (".", 13, -1.0),
]
PROMPT = [{"role": "user", "content": "What is the capital of France?"}]


def _choice_logprobs(sampled: list[tuple[str, int, float]]) -> dict[str, Any]:
    return {
        "content": [
            {"token": t, "logprob": lp, "bytes": list(t.encode()), "top_logprobs": []} for t, _, lp in sampled
        ]
    }


class FakeVllm(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]]

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append(body)
        with_ids = body.get("return_token_ids") is True
        with_logprobs = body.get("logprobs") is True
        usage = {
            "prompt_tokens": len(PROMPT_IDS),
            "completion_tokens": len(SAMPLED),
            "total_tokens": len(PROMPT_IDS) + len(SAMPLED),
        }
        base = {"id": "chatcmpl-vllm-1", "created": 1, "model": body["model"]}
        if not body.get("stream"):
            choice: dict[str, Any] = {
                "index": 0,
                "finish_reason": "stop",
                "stop_reason": None,
                "message": {
                    "role": "assistant",
                    "content": "".join(t for t, _, _ in SAMPLED),
                    "tool_calls": [],
                },
            }
            if with_ids:
                choice["token_ids"] = [i for _, i, _ in SAMPLED]
            if with_logprobs:
                choice["logprobs"] = _choice_logprobs(SAMPLED)
            reply = {**base, "object": "chat.completion", "choices": [choice], "usage": usage}
            if with_ids:
                reply["prompt_token_ids"] = PROMPT_IDS
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunks: list[dict[str, Any]] = []
        for k, (text, token, logprob) in enumerate(SAMPLED):
            delta = {"role": "assistant", "content": text} if k == 0 else {"content": text}
            choice = {"index": 0, "delta": delta, "finish_reason": "stop" if k == len(SAMPLED) - 1 else None}
            if with_ids:
                choice["token_ids"] = [token]
            if with_logprobs:
                choice["logprobs"] = _choice_logprobs([(text, token, logprob)])
            chunk = {**base, "object": "chat.completion.chunk", "choices": [choice]}
            if with_ids and k == 0:
                chunk["prompt_token_ids"] = PROMPT_IDS
            chunks.append(chunk)
        chunks.append({**base, "object": "chat.completion.chunk", "choices": [], "usage": usage})
        for chunk in chunks:
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")


@pytest.fixture
def vllm() -> Iterator[tuple[openai.OpenAI, list[dict[str, Any]]]]:
    handler = type("Handler", (FakeVllm,), {"requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    client = openai.OpenAI(
        base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
        api_key="unused",
        max_retries=0,
        timeout=30,
    )
    yield client, handler.requests
    client.close()
    server.shutdown()
    server.server_close()


EXPECTED = {
    "completion": [{"role": "assistant", "content": "The capital is Paris."}],
    "prompt_token_ids": PROMPT_IDS,
    "completion_token_ids": [i for _, i, _ in SAMPLED],
    "completion_logprobs": [lp for _, _, lp in SAMPLED],
    "input_tokens": len(PROMPT_IDS),
    "output_tokens": len(SAMPLED),
    "finish_reason": "stop",
    "response_id": "chatcmpl-vllm-1",
    "response_model": "qwen-test",
    "request": {"temperature": 0.7, "seed": 3, "max_tokens": 32, "return_token_ids": True, "logprobs": True},
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_token_ids_and_logprobs_reach_the_turn(
    tmp_path: Path, vllm: tuple[openai.OpenAI, list[Any]], stream: bool
) -> None:
    client, requests = vllm

    @ot.llm("qwen-test", provider="vllm")
    def chat(messages: list[dict[str, str]], **params: Any) -> Any:
        return client.chat.completions.create(model="qwen-test", messages=messages, **params)

    @ot.llm("qwen-test", provider="vllm")
    def chat_stream(messages: list[dict[str, str]], **params: Any) -> Iterator[Any]:
        yield from client.chat.completions.create(
            model="qwen-test",
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
            **params,
        )

    params = {
        "temperature": 0.7,
        "seed": 3,
        "max_tokens": 32,
        "logprobs": True,
        "extra_body": {"return_token_ids": True},
    }
    (turn,) = record_turns(
        tmp_path, lambda: list(chat_stream(PROMPT, **params)) if stream else chat(PROMPT, **params)
    )
    assert requests[0]["return_token_ids"] is True and requests[0]["logprobs"] is True
    assert {key: turn.get(key) for key in EXPECTED} == EXPECTED
    assert turn["prompt"] == PROMPT


def test_no_token_ids_when_the_engine_gives_none(
    tmp_path: Path, vllm: tuple[openai.OpenAI, list[Any]]
) -> None:
    client, _ = vllm

    @ot.llm("qwen-test")
    def chat(messages: list[dict[str, str]]) -> Any:
        return client.chat.completions.create(model="qwen-test", messages=messages)

    (turn,) = record_turns(tmp_path, lambda: chat(PROMPT))
    assert turn["completion"] == EXPECTED["completion"]
    assert not {"prompt_token_ids", "completion_token_ids", "completion_logprobs"} & set(turn)
