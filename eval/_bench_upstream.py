"""The fake upstream as the overhead benchmark runs it: the same server, recording nothing.

    python -m eval._bench_upstream --port 9100 --delay-ms 20

:mod:`eval.fake_upstream` keeps every request it answers, for tests to inspect.
Over a benchmark's tens of thousands of requests that list grows until the
garbage collector's full passes stall every answer in flight for 100 ms and more,
a stall that lands in the p99 of whichever target is being measured at the time.
"""

from __future__ import annotations

import argparse
import asyncio

from eval.fake_upstream import FakeUpstream, RecordedRequest, Script


class _Unrecorded(list[RecordedRequest]):
    """A request log that keeps nothing."""

    def append(self, item: RecordedRequest, /) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description="The fake upstream, recording nothing.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, required=True, help="wait before answering")
    args = parser.parse_args()
    fake = FakeUpstream(Script(delay=args.delay_ms / 1000))
    fake.requests = _Unrecorded()
    asyncio.run(fake.serve_forever(args.port))


if __name__ == "__main__":
    main()
