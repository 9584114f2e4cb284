"""``python -m eval.replay`` on a small BEIR folder written here: requests about parcels
that this company routes to a tool whose document says nothing of parcels. Retrieval
misses it before the traffic and finds it after; a conflicting tenant changes none of
the first's rankings; bad input is one line and a non-zero exit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.replay import main

TOOLS = {
    "get_weather": "Get the weather forecast for a city",
    "book_flight": "Book a flight between two airports on a date",
    "book_hotel": "Book a hotel room in a city for some nights",
    "convert_currency": "Convert an amount of money from one currency to another",
    "send_sms": "Send a text message to a phone number",
    "translate_text": "Translate a text into another language",
    "find_restaurant": "Find restaurants near a place",
    "open_ticket": "Open a ticket in the operations queue",
}
GOLD = "open_ticket"
ASKED = [
    "where is my parcel",
    "track my parcel",
    "has my parcel arrived",
    "what is the status of my parcel",
    "my parcel is late, where is it",
    "find my parcel",
    "is my parcel on its way",
    "show my parcel's tracking",
    "tell me where the parcel is",
    "locate the parcel I sent",
    "where's the parcel I ordered",
    "follow my parcel",
    "did my parcel ship",
    "parcel status please",
    "check on my parcel",
    "the parcel has not come, where is it",
]
LATER = [
    "could you tell me where my parcel is now",
    "I want to track the parcel I was sent",
    "what happened to my parcel",
    "has the parcel been delivered",
]


def write_beir(folder: Path, *, test_file: bool = True) -> Path:
    (folder / "qrels").mkdir(parents=True)
    rows = [{"_id": name, "name": name, "description": text} for name, text in TOOLS.items()]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    queries = [{"_id": f"q{i}", "text": t} for i, t in enumerate(ASKED + LATER)]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    header = "query-id\tcorpus-id\tscore\n"
    train = [f"q{i}\t{GOLD}\t1\n" for i in range(len(ASKED))]
    test = [f"q{len(ASKED) + i}\t{GOLD}\t1\n" for i in range(len(LATER))]
    if test_file:
        (folder / "qrels" / "train.tsv").write_text(header + "".join(train))
        (folder / "qrels" / "test.tsv").write_text(header + "".join(test))
    else:
        (folder / "qrels" / "train.tsv").write_text(header + "".join(train + test))
    return folder


def test_the_replay_learns_the_tenants_routing_and_isolates_tenants(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "parcels")
    out, curve = tmp_path / "replay.json", tmp_path / "curve.png"
    argv = ["--corpus", str(folder), "--json", str(out), "--plot", str(curve)]
    assert main([*argv, "--cache-dir", str(tmp_path / "cache")]) == 0
    found = json.loads(out.read_text())
    assert (found["traffic"], found["evaluated"]) == (len(ASKED), len(LATER))
    assert "train.tsv is the traffic" in found["split"]
    assert found["after"]["ndcg@5"] >= found["before"]["ndcg@5"] + 20
    assert found["after"]["recall@5"] >= found["before"]["recall@5"]
    assert found["isolation"]["rankings_that_differ"] == 0
    assert found["noise"] == 0.2
    assert set(found["noisy"]) == {"ndcg@5", "recall@5"}
    assert found["curve"][0]["replayed"] == 0
    assert found["curve"][-1]["replayed"] == len(ASKED)
    assert curve.stat().st_size > 0


def test_a_folder_with_one_qrels_file_is_split_in_order(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "parcels", test_file=False)
    out = tmp_path / "replay.json"
    assert main(["--corpus", str(folder), "--json", str(out), "--noise", "0"]) == 0
    found = json.loads(out.read_text())
    half = (len(ASKED) + len(LATER)) // 2
    assert (found["traffic"], found["evaluated"]) == (half, len(ASKED) + len(LATER) - half)
    assert "split in order" in found["split"]


@pytest.mark.parametrize("broken", ["missing", "no_qrels", "no_corpus"])
def test_bad_input_is_one_line_and_a_non_zero_exit(
    tmp_path: Path, broken: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "set"
    if broken != "missing":
        write_beir(folder)
    if broken == "no_qrels":
        for path in (folder / "qrels").iterdir():
            path.unlink()
    if broken == "no_corpus":
        (folder / "corpus.jsonl").unlink()
    out = tmp_path / "replay.json"
    assert main(["--corpus", str(folder), "--json", str(out)]) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1
    assert said[0].startswith("eval.replay: ")
    assert not out.exists()
