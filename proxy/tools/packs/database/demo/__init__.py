"""The demo music-store database shipped with the package (``url: demo``): see README.md."""

from __future__ import annotations

from pathlib import Path

#: The committed file; ``python -m proxy.tools.packs.database.demo.generate`` writes it again.
DEMO = Path(__file__).parent / "shop.sqlite"
DEMO_URL = "demo"


def demo_url() -> str:
    """The SQLAlchemy URL of the shipped file."""
    return f"sqlite:///{DEMO}"
