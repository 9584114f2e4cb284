"""The joiner: the upstream model answers from the tools' results.

The pipeline hands a joiner the answering call's body (``answer.answer_body``);
the joiner makes the call and delivers the answer its own way: whole, for a
non-streamed request (:class:`WholeAnswer`), or relayed chunk by chunk into the
client's stream (``stream.RelayedAnswer``). Either times the ``answer`` stage and
adds the call's usage to the turn's.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from proxy.orchestrate.turn import Turn
from proxy.protocol.chat import ChatCompletion, read_completion


class Joiner(Protocol):
    async def answer(self, turn: Turn, body: dict[str, Any]) -> str:
        """Call the upstream with ``body`` and deliver its answer; return the answer's text."""
        ...


class WholeAnswer:
    """The joiner of a non-streamed request: one completion, kept for the reply."""

    completion: ChatCompletion

    async def answer(self, turn: Turn, body: dict[str, Any]) -> str:
        started = time.perf_counter()
        with turn.stage("answer"):
            reply = await turn.upstream.complete(turn.target, body, None, turn.context)
        self.completion = read_completion(reply.content)
        usage = self.completion.usage
        seconds = time.perf_counter() - started
        turn.usage.add(usage.model_dump() if usage else None, "answer", seconds=seconds)
        return self.completion.text()
