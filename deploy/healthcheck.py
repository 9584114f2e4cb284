"""Exit 0 when toolgraph answers ``/healthz``; the image's HEALTHCHECK and the chart's test.

    python healthcheck.py                      # http://127.0.0.1:$TOOLGRAPH_PORT/healthz
    python healthcheck.py http://host:8000/healthz

Standard library only: the image carries no curl or wget.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request


def main(argv: list[str]) -> int:
    url = argv[1] if len(argv) > 1 else _local_url()
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.loads(response.read())
    except (OSError, ValueError) as exc:
        print(f"unhealthy: {url}: {exc}", file=sys.stderr)
        return 1
    if body.get("status") != "ok":
        print(f"unhealthy: {url}: {body!r}", file=sys.stderr)
        return 1
    return 0


def _local_url() -> str:
    port = os.environ.get("TOOLGRAPH_PORT", "8000")
    return f"http://127.0.0.1:{port}/healthz"


if __name__ == "__main__":
    sys.exit(main(sys.argv))
