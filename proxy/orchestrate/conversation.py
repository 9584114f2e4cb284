"""Tool results a follow-up may reuse: kept per answered turn of a conversation.

After an orchestrated answer, the calls it made (tool, arguments, output and the
compressed text) are stored under a hash of the conversation as it now stands,
the assistant's answer included. A follow-up sends that same history back, so the
hash of its messages up to an earlier assistant answer finds them: the argument
writer reads them as earlier results, and a call with the same tool and
arguments is answered from them instead of running again. Results carry over
from turn to turn, newest kept, up to ``orchestrate.max_reused_results``. The
client's key is part of the hash: one client never sees another's results.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from proxy import json_codec
from proxy.execute.runner import call_key
from proxy.execute.scheduler import Outcome
from proxy.execute.service import ExecutedPlan
from proxy.kv import KeyValue
from retriever.conversation import message_text

#: Assistant answers looked up, newest first: a follow-up usually answers the last one.
LOOK_BACK = 3


@dataclass(frozen=True, slots=True)
class EarlierCall:
    tool: str
    arguments: dict[str, JsonValue]
    output: JsonValue
    text: str  # compressed: what prompts read

    def key(self) -> str:
        return call_key(self.tool, self.arguments)

    def as_json(self) -> JsonValue:
        return {
            "tool": self.tool,
            "arguments": self.arguments,
            "output": self.output,
            "text": self.text,
        }


def succeeded_calls(executed: ExecutedPlan) -> list[EarlierCall]:
    """The calls of ``executed`` that succeeded, as a later turn may reuse them."""
    calls = []
    for node_id, record in executed.run.records.items():
        compressed = executed.compressed.get(node_id)
        if record.outcome is Outcome.OK and compressed is not None:
            calls.append(
                EarlierCall(record.node.tool, record.arguments, record.output, compressed.text)
            )
    return calls


class ConversationResults:
    def __init__(self, store: KeyValue, ttl: int, limit: int) -> None:
        self._store = store
        self._ttl = ttl
        self.limit = limit

    async def earlier(
        self, messages: Sequence[Mapping[str, JsonValue]], client: str
    ) -> list[EarlierCall]:
        """The results stored for the newest earlier answer of this conversation."""
        if self.limit == 0:
            return []
        answers = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        for index in reversed(answers[-LOOK_BACK:]):
            raw = await self._store.get(_key(messages[: index + 1], client))
            if raw is not None:
                return [_decode(item) for item in json_codec.loads(raw) if isinstance(item, dict)]
        return []

    async def remember(
        self,
        messages: Sequence[Mapping[str, JsonValue]],
        answer: str,
        client: str,
        calls: Sequence[EarlierCall],
    ) -> None:
        """Keep ``calls`` (earlier ones first) for follow-ups of this answered turn."""
        if self.limit == 0 or not calls:
            return
        kept: dict[str, EarlierCall] = {}
        for call in calls:
            kept.pop(call.key(), None)
            kept[call.key()] = call
        newest = list(kept.values())[-self.limit :]
        history = [*messages, {"role": "assistant", "content": answer}]
        data = json_codec.dumps([call.as_json() for call in newest])
        await self._store.put(_key(history, client), data, self._ttl, tenant=client)


def _key(messages: Sequence[Mapping[str, JsonValue]], client: str) -> str:
    turns = [(str(m.get("role")), message_text(m)) for m in messages]
    digest = hashlib.sha256(json_codec.dumps([client, turns])).hexdigest()
    return f"turn:{digest}"


def _decode(item: dict[str, JsonValue]) -> EarlierCall:
    arguments = item.get("arguments")
    return EarlierCall(
        tool=str(item.get("tool")),
        arguments=arguments if isinstance(arguments, dict) else {},
        output=item.get("output"),
        text=str(item.get("text") or ""),
    )
