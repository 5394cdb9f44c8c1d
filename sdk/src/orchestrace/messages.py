"""Chat messages in the OTel GenAI shape, for ``gen_ai.input.messages`` / ``gen_ai.output.messages``.

``[{"role": "user", "parts": [{"type": "text", "content": "..."}]}]``; output messages also carry
``finish_reason``. Reads the message shapes users already have: plain strings, OpenAI-style dicts
(``{"role", "content", "tool_calls"}``, ChatCompletion results with ``choices``), LangChain messages
(``.type`` / ``.content`` / ``.tool_calls``) and ``("role", "text")`` pairs. Used with content capture only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from json.encoder import encode_basestring
from typing import Any, NamedTuple

from orchestrace_semconv.refs import CHUNK

from orchestrace.config import CaptureConfig
from orchestrace.content import Captured, capture_text, content_ref, json_ref, to_text
from orchestrace.fields import field_of
from orchestrace.replies import Reply, normalize

Message = dict[str, Any]
Part = dict[str, Any]

_MISSING = object()
#: Classes of message objects already found to be neither tuples nor mappings: ``message_json`` checks each
#: class once (an ABC ``isinstance`` costs a quarter of the rest of it).
_OBJECT_CLASSES: set[type] = set()

_ROLE_BY_LANGCHAIN_TYPE = {
    "human": "user", "ai": "assistant", "AIMessageChunk": "assistant", "system": "system",
    "tool": "tool", "function": "tool", "chat": "user",
}


def _text_parts(content: Any) -> list[Part]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if isinstance(content, list | tuple):
        parts: list[Part] = []
        for item in content:
            if isinstance(item, str):
                parts.append({"type": "text", "content": item})
            elif isinstance(item, Mapping) and item.get("type") == "text":
                parts.append({"type": "text", "content": item.get("text", item.get("content", ""))})
            else:
                parts.append({"type": "text", "content": to_text(item)[0]})
        return parts
    return [{"type": "text", "content": to_text(content)[0]}]


def _tool_call_parts(tool_calls: Any) -> list[Part]:
    parts: list[Part] = []
    for call in tool_calls or ():
        function = field_of(call, "function")
        if function is not None:  # OpenAI: {"id", "function": {"name", "arguments": "<json>"}}
            parts.append({"type": "tool_call", "id": field_of(call, "id"), "name": field_of(function, "name"),
                          "arguments": field_of(function, "arguments")})
        else:  # LangChain: {"id", "name", "args": {...}}
            parts.append({"type": "tool_call", "id": field_of(call, "id"), "name": field_of(call, "name"),
                          "arguments": field_of(call, "args", field_of(call, "arguments"))})
    return parts


def to_message(value: Any, default_role: str = "user") -> Message | None:
    """One message in the GenAI shape, or ``None`` when ``value`` does not look like a message."""
    if isinstance(value, str):
        return {"role": default_role, "parts": _text_parts(value)}
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return {"role": _ROLE_BY_LANGCHAIN_TYPE.get(value[0], value[0]), "parts": _text_parts(value[1])}
    if isinstance(value, Mapping):
        if "role" not in value and "content" not in value:
            return None
        role = str(value.get("role") or default_role)
        content = value.get("content")
        tool_calls = value.get("tool_calls")
    else:
        kind = getattr(value, "type", None)
        if not isinstance(kind, str) or not hasattr(value, "content"):
            return None
        role = _ROLE_BY_LANGCHAIN_TYPE.get(kind, kind)
        content = value.content
        # Only assistant messages make tool calls; asking another object (a pydantic model without the field)
        # costs a raised AttributeError.
        tool_calls = getattr(value, "tool_calls", None) if role == "assistant" else None
    if role == "tool":
        parts: list[Part] = [{"type": "tool_call_response", "id": field_of(value, "tool_call_id"),
                              "response": content if isinstance(content, str) else to_text(content)[0]}]
    else:
        parts = _text_parts(content) + _tool_call_parts(tool_calls)
    return {"role": role, "parts": parts}


def _plain_fields(value: Any) -> tuple[str, Any, Any] | None:
    """(role, content, tool calls, or for a tool result its call id) of a string or a LangChain-style message
    (``.type``, ``.content``): the messages written directly (``message_json``, ``captured_message_json``);
    ``None`` for any other value."""
    if isinstance(value, str):
        return "user", value, None
    if type(value) not in _OBJECT_CLASSES:
        if isinstance(value, tuple | Mapping):
            return None
        _OBJECT_CLASSES.add(type(value))
    kind = getattr(value, "type", None)
    content = getattr(value, "content", _MISSING)
    if not isinstance(kind, str) or content is _MISSING:
        return None
    role = _ROLE_BY_LANGCHAIN_TYPE.get(kind, kind)
    if role == "tool":
        return role, content, field_of(value, "tool_call_id")
    # Only assistant messages make tool calls (as ``to_message`` reads them).
    return role, content, getattr(value, "tool_calls", None) if role == "assistant" else None


def message_json(value: Any) -> str | None:
    """The canonical JSON (``content_ref``'s serialization) of ``to_message(value)``, written directly for the
    commonest messages: a string, or a LangChain-style message (``.type``, ``.content``) with text content,
    a tool result with text content, or tool calls (LangChain's ``{"name", "args", "id"}``) whose arguments
    are a flat dict of texts, integers, booleans and nulls. ``None`` for any other value, and for texts too
    long to hash in one piece (``content_ref`` streams those).

    Skips building the message dict, the size walk and the JSON encoder: the ref of a model call's prompt
    or completion costs half of ``content_ref(to_message(value))`` (an agent's prompt, full of tool calls
    and results, a fifth). Keys in sorted order: ``parts`` < ``role``; ``content`` < ``type``;
    ``id`` < ``response`` < ``type``; ``arguments`` < ``id`` < ``name`` < ``type``."""
    fields = _plain_fields(value)
    if fields is None:
        return None
    role, content, extra = fields
    if role == "tool":
        return _tool_result_json(extra, content)
    if extra:
        return _tool_calls_json(content, extra)
    if content is None or content == "":
        return f'{{"parts":[],"role":{encode_basestring(role)}}}'
    if type(content) is not str or len(content) > CHUNK:
        return None
    text = encode_basestring(content)
    return f'{{"parts":[{{"content":{text},"type":"text"}}],"role":{encode_basestring(role)}}}'


_LONG_INT = 1 << 63


def _json_scalar(value: Any) -> str | None:
    """The canonical JSON of a text, integer, boolean or null (as ``json`` writes them), else ``None``."""
    kind = type(value)
    if kind is str:
        return encode_basestring(value) if len(value) <= CHUNK else None
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int and -_LONG_INT < value < _LONG_INT:  # longer ones may be too long for ``repr``
        return int.__repr__(value)
    return None


def _tool_result_json(call_id: Any, content: Any) -> str | None:
    """``message_json`` of a tool result (GenAI ``tool_call_response``) with text content."""
    id_json = _json_scalar(call_id)
    if id_json is None or type(content) is not str or len(content) > CHUNK:
        return None
    return (f'{{"parts":[{{"id":{id_json},"response":{encode_basestring(content)},'
            f'"type":"tool_call_response"}}],"role":"tool"}}')


def _tool_calls_json(content: Any, calls: Any) -> str | None:
    """``message_json`` of an assistant message making tool calls: its text part, when it has text, then one
    ``tool_call`` part per call (``_tool_call_parts``' LangChain form with flat arguments only)."""
    parts: list[str] = []
    if content is not None and content != "":
        if type(content) is not str or len(content) > CHUNK:
            return None
        parts.append(f'{{"content":{encode_basestring(content)},"type":"text"}}')
    if type(calls) is not list:
        return None
    for call in calls:
        if type(call) is not dict or call.get("function") is not None:
            return None  # OpenAI's form, or an object: converted
        arguments = _flat_object_json(call.get("args", call.get("arguments")))
        call_id, name = _json_scalar(call.get("id")), _json_scalar(call.get("name"))
        if arguments is None or call_id is None or name is None:
            return None
        parts.append(f'{{"arguments":{arguments},"id":{call_id},"name":{name},"type":"tool_call"}}')
    return f'{{"parts":[{",".join(parts)}],"role":"assistant"}}'


def _flat_object_json(value: Any, canonical: bool = True) -> str | None:
    """The canonical JSON of a dict of texts, integers, booleans and nulls under text keys (keys sorted),
    else ``None``; not ``canonical``: as ``json.dumps`` writes it (keys in their order, ``", "`` and
    ``": "``)."""
    if type(value) is not dict:
        return None
    items: list[str] = []
    if all(type(k) is str for k in value):
        separator = ":" if canonical else ": "
        for key in sorted(value) if canonical else value:
            item = _json_scalar(value[key])
            if item is None:
                return None
            items.append(f"{encode_basestring(key)}{separator}{item}")
    if len(items) != len(value):
        return None
    return f"{{{','.join(items)}}}" if canonical else f"{{{', '.join(items)}}}"


def captured_message_json(value: Any) -> str | None:
    """``capture_messages``' JSON of ``to_message(value)`` alone (keys in their order, ``json.dumps``'
    separators), for the messages ``message_json`` writes directly; its texts whole, as they are when
    nothing is redacted or cut (see :func:`captured_list`). ``None`` for any other value.

    With capture on, a model call's prompt is written twice, for its refs and for the span: directly both
    times, never converted to GenAI dicts and encoded."""
    fields = _plain_fields(value)
    if fields is None:
        return None
    role, content, extra = fields
    if role == "tool":
        id_json = _json_scalar(extra)
        if id_json is None or type(content) is not str or len(content) > CHUNK:
            return None
        return (f'{{"role": "tool", "parts": [{{"type": "tool_call_response", "id": {id_json}, '
                f'"response": {encode_basestring(content)}}}]}}')
    parts: list[str] = []
    if content is not None and content != "":
        if type(content) is not str or len(content) > CHUNK:
            return None
        parts.append(f'{{"type": "text", "content": {encode_basestring(content)}}}')
    if extra:
        if type(extra) is not list:
            return None
        for call in extra:
            if type(call) is not dict or call.get("function") is not None:
                return None  # OpenAI's form, or an object: converted
            part = _captured_call(call.get("id"), call.get("name"), call.get("args", call.get("arguments")))
            if part is None:
                return None
            parts.append(part)
    return f'{{"role": {encode_basestring(role)}, "parts": [{", ".join(parts)}]}}'


def _captured_call(call_id: Any, name: Any, arguments: Any) -> str | None:
    """A ``tool_call`` part as ``capture_messages`` writes it: arguments given as JSON text or null are kept,
    a flat dict is written in its order (its JSON round trip changes nothing)."""
    id_json, name_json = _json_scalar(call_id), _json_scalar(name)
    args_json = (_flat_object_json(arguments, canonical=False) if type(arguments) is dict
                 else _json_scalar(arguments) if arguments is None or type(arguments) is str else None)
    if id_json is None or name_json is None or args_json is None:
        return None
    return f'{{"type": "tool_call", "id": {id_json}, "name": {name_json}, "arguments": {args_json}}}'


def captured_reply_json(reply: Reply) -> str | None:
    """``capture_messages``' JSON of ``reply.message()`` alone, written directly (see
    :func:`captured_message_json`); ``None`` when a text is too long or a call's arguments are not flat."""
    parts: list[str] = []
    for kind, text in (("reasoning", reply.reasoning), ("text", reply.text)):
        if text:
            if type(text) is not str or len(text) > CHUNK:
                return None
            parts.append(f'{{"type": "{kind}", "content": {encode_basestring(text)}}}')
    for call in reply.tool_calls:
        part = _captured_call(call.id, call.name, call.arguments)
        if part is None:
            return None
        parts.append(part)
    return (f'{{"role": "assistant", "parts": [{", ".join(parts)}], '
            f'"finish_reason": {encode_basestring(reply.final_reason())}}}')


def captured_list(texts: Sequence[str | None], capture: CaptureConfig) -> str | None:
    """``capture_messages(messages, capture).text`` for messages whose captured forms (the functions above)
    are ``texts``, when every one was written and nothing in them can be redacted or cut: no redaction hook,
    and all of it within a quarter of the size limit (a text's UTF-8 bytes are at most four per character).
    ``None`` otherwise."""
    written = [text for text in texts if text is not None]
    if (len(written) != len(texts) or capture.redact is not None
            or 4 * sum(map(len, written)) > capture.max_content_bytes):
        return None
    return f"[{', '.join(written)}]"


def genai_message(message: Any) -> Message:
    """A message (a string or LangChain-style) in the GenAI shape (role + parts), ids and provider metadata
    left out.

    A message's ref is the ref of this shape, so the collector can recompute it from captured messages;
    convert each message once and take refs before ``capture_messages``, which clips the texts in place."""
    return to_message(message) or {"role": "user", "parts": []}


def message_ref(message: Any, converted: Message | None = None) -> str:
    """``content_ref(genai_message(message))``; a plain text message is not converted to get it.
    ``converted``: ``genai_message(message)``, when the caller already has it (not converted twice)."""
    text = message_json(message)
    if text is not None:
        return json_ref(text)
    return content_ref(converted if converted is not None else genai_message(message))


def _plain_texts(messages: Sequence[Any]) -> list[str] | None:
    """Each message's ``message_json`` when every one is plain text and all of them are small enough to hash
    in one piece (``content_ref`` streams larger values), else ``None``."""
    texts: list[str] = []
    size = 0
    for message in messages:
        text = message_json(message)
        if text is None or size + len(text) > CHUNK:
            return None
        texts.append(text)
        size += len(text)
    return texts


def messages_ref(messages: Sequence[Any]) -> str:
    """``content_ref([genai_message(m) for m in messages])``, from the messages' JSON when they are plain."""
    texts = _plain_texts(messages)
    if texts is None:
        return content_ref([genai_message(m) for m in messages])
    return json_ref(f"[{','.join(texts)}]")


class PromptRefs(NamedTuple):
    whole: str  # messages_ref(messages)
    each: list[str]  # every message's message_ref
    converted: list[Message] | None  # the GenAI messages, when they had to be converted for the refs


def prompt_refs(messages: Sequence[Any]) -> PromptRefs:
    """The prompt's ref and its messages', each message serialized once; the converted messages are kept
    so that capturing them later does not convert them again."""
    texts = _plain_texts(messages)
    if texts is not None:
        return PromptRefs(json_ref(f"[{','.join(texts)}]"), [json_ref(text) for text in texts], None)
    converted = [genai_message(m) for m in messages]
    each = [message_ref(m, c) for m, c in zip(messages, converted, strict=True)]
    return PromptRefs(content_ref(converted), each, converted)


def input_messages(value: Any) -> list[Message]:
    """Messages for a call's input (``value`` as given by ``content.call_input``)."""
    if isinstance(value, Mapping) and "messages" in value and "role" not in value:
        value = value["messages"]
    if isinstance(value, list | tuple) and value and not (isinstance(value, tuple) and len(value) == 2
                                                             and isinstance(value[0], str)):
        converted = [to_message(item) for item in value]
        if all(message is not None for message in converted):
            return [message for message in converted if message is not None]
    return [to_message(value) or {"role": "user", "parts": _text_parts(to_text(value)[0])}]


def output_messages(result: Any) -> list[Message]:
    """Messages for a call's result: a model reply of any known shape (``replies.normalize``), the last
    message of a state with ``messages``, else the result's text as an assistant message."""
    if isinstance(result, Mapping) and isinstance(result.get("messages"), list) and result["messages"]:
        result = result["messages"][-1]
    reply = normalize(result)
    if reply is not None:
        return [reply.message()]
    message = to_message(result, "assistant") or {"role": "assistant",
                                                  "parts": _text_parts(to_text(result)[0])}
    message["finish_reason"] = "stop"
    return [message]


def _clip(text: str, budget: int, capture: CaptureConfig) -> tuple[str, int]:
    """``text`` redacted and cut to ``budget`` bytes, and the number of its UTF-8 bytes left out."""
    if capture.redact is None and len(text) * 4 <= budget:  # the common case: kept whole, as it is
        return text, 0
    # Only a prefix of a huge text is redacted and kept.
    window, cut = to_text(text, budget + 1024)
    captured = capture_text(window, dataclasses.replace(capture, max_content_bytes=budget), cut)
    kept = captured.text if captured else ""
    if captured is not None and not captured.truncated:
        return kept, 0
    return kept, max(1, _utf8_len(text) - _utf8_len(kept))


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


#: ``json.dumps(..., ensure_ascii=False, default=str)`` without making an encoder at every call.
_MESSAGES_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


def capture_messages(messages: list[Message], capture: CaptureConfig) -> Captured | None:
    """The messages as a JSON attribute value: every text redacted, all texts together cut to the size
    limit (the JSON itself stays valid), with the number of bytes cut. ``None`` when capture is off."""
    if not capture.capture_content:
        return None
    budget = capture.max_content_bytes
    cut_bytes = 0
    for message in messages:
        for part in message["parts"]:
            for key in ("content", "response"):
                if isinstance(part.get(key), str):
                    part[key], cut = _clip(part[key], budget, capture)
                    budget = max(0, budget - _utf8_len(part[key]))
                    cut_bytes += cut
            if part.get("arguments") is not None and not isinstance(part["arguments"], str):
                part["arguments"] = json.loads(json.dumps(part["arguments"], default=str))
    return Captured(_MESSAGES_ENCODER.encode(messages), cut_bytes > 0, cut_bytes)
