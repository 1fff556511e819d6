"""``graphrag-ext serve``: the JSON API, streamed answers, updates while serving, the page."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from llama_index.core.llms import MockLLM
from starlette.testclient import TestClient

from llama_index_graphrag_ext.cli import main
from llama_index_graphrag_ext.serve import make_app

EMBED = ["--embed-model", "hash:384", "--quiet"]
TEXTS = {
    "curie.txt": "Marie Curie studied radioactivity in Paris and won two Nobel prizes.\n",
    "parkes.txt": "The Parkes radio telescope stands in New South Wales, Australia.\n",
    "bohr.txt": "Niels Bohr founded an institute in Copenhagen.\n",
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    docs = root / "docs"
    docs.mkdir()
    for name, text in TEXTS.items():
        (docs / name).write_text(text)
    out = {}
    for method in ("bm25", "cue", "fgrag"):
        out[method] = root / method
        argv = ["index", str(docs), "--method", method, "--out", str(out[method]), *EMBED]
        assert main(argv) == 0
    return out


def test_the_api_answers_as_query_json_does(folders, capsys):
    client = TestClient(make_app([folders["bm25"], folders["cue"]]))
    listed = client.get("/api/indexes").json()["indexes"]
    assert [i["name"] for i in listed] == ["bm25", "cue"]
    assert listed[1]["method"] == "cue" and listed[1]["chunks"] == 3
    body = {"index": "cue", "question": "telescope in Australia", "top_k": 2, "answer": False}
    served = client.post("/api/query", json=body).json()
    capsys.readouterr()
    argv = ["query", str(folders["cue"]), "telescope in Australia", "--top-k", "2"]
    assert main([*argv, "--no-answer", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert served == printed
    assert Path(served["passages"][0]["file"]).name == "parkes.txt"


def test_bad_requests_get_a_status_and_a_message(folders):
    client = TestClient(make_app([folders["bm25"]]))
    assert client.post("/api/query", json={"index": "nope", "question": "x"}).status_code == 404
    empty = client.post("/api/query", json={"index": "bm25", "question": " "})
    assert empty.status_code == 400 and "empty" in empty.json()["error"]
    assert (
        client.post("/api/query", json={"index": "bm25", "question": "x", "top_k": 0}).status_code
        == 400
    )
    assert client.post("/api/query", content=b"not json").status_code == 400


def _events(text: str) -> list[tuple[str, dict]]:
    out = []
    for frame in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in frame.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_answers_stream_as_server_sent_events(folders):
    client = TestClient(make_app([folders["bm25"]], llm=MockLLM(max_tokens=12)))
    body = {"index": "bm25", "question": "Who studied radioactivity?", "stream": True}
    with client.stream("POST", "/api/query", json=body) as reply:
        assert reply.headers["content-type"].startswith("text/event-stream")
        events = _events(reply.read().decode())
    kinds = [k for k, _ in events]
    assert kinds[0] == "passages" and kinds[-1] == "done" and "token" in kinds
    done = events[-1][1]
    assert done["answer"] == "".join(d["text"] for k, d in events if k == "token")
    assert done["answer"].strip() and done["llm"].startswith("MockLLM")
    assert done["passages"] == events[0][1]["passages"]


def test_updates_while_serving_are_picked_up_and_no_question_fails(folders, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in TEXTS.items():
        (docs / name).write_text(text)
    served = tmp_path / "served"
    shutil.copytree(folders["cue"], served)
    client = TestClient(make_app([served]))
    failures, seen = [], set()
    stop = threading.Event()

    def ask() -> None:
        while not stop.is_set():
            reply = client.post(
                "/api/query",
                json={"index": "served", "question": "Lise Meitner fission", "answer": False},
            )
            if reply.status_code != 200:
                failures.append(reply.text)
            else:
                seen.update(Path(p["file"]).name for p in reply.json()["passages"])

    readers = [threading.Thread(target=ask) for _ in range(3)]
    for thread in readers:
        thread.start()
    try:
        for n in range(3):
            (docs / f"meitner{n}.txt").write_text(f"Lise Meitner explained fission, note {n}.\n")
            assert main(["index", str(docs), "--update", str(served), "--quiet"]) == 0
            time.sleep(0.2)
    finally:
        stop.set()
        for thread in readers:
            thread.join()
    assert failures == []
    assert "meitner2.txt" in {
        Path(p["file"]).name
        for p in client.post(
            "/api/query",
            json={"index": "served", "question": "Lise Meitner fission note 2", "answer": False},
        ).json()["passages"]
    }
    assert client.get("/api/indexes").json()["indexes"][0]["reloads"] >= 1


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def live_server(folders):
    import uvicorn

    port = _free_port()
    app = make_app([folders["bm25"], folders["cue"]])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    BROWSER is None and not os.environ.get("GRAPHRAG_BROWSER_REQUIRED"),
    reason="no chromium (.ci/run installs Debian's and requires it)",
)
def test_the_page_shows_two_indexes_side_by_side_in_a_real_browser(live_server, tmp_path):
    assert BROWSER is not None, "chromium is required here (GRAPHRAG_BROWSER_REQUIRED)"
    url = f"{live_server}/?q=telescope+in+Australia&index=bm25&index=cue&answer=0&k=2"
    shot = tmp_path / "page.png"
    common = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=20000"]
    dom = subprocess.run(
        [*common, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert 'data-answered="1"' in dom
    assert dom.count('class="column"') == 2
    assert 'data-index="bm25"' in dom and 'data-index="cue"' in dom
    assert dom.count('class="passage"') == 4  # two per index
    assert "parkes.txt" in dom and "no answer: no LLM" not in dom
    assert "linked in the graph to: " in dom and "Australia (entity)" in dom  # cue's graph
    subprocess.run(
        [*common, f"--screenshot={shot}", "--window-size=1400,900", url],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.stat().st_size > 10_000


def test_fgrag_passages_say_what_they_are_linked_to(folders):
    client = TestClient(make_app([folders["fgrag"]]))
    body = {"index": "fgrag", "question": "Marie Curie radioactivity", "top_k": 1, "answer": False}
    passage = client.post("/api/query", json=body).json()["passages"][0]
    assert any(n["kind"] == "entity" for n in passage["graph"]["nodes"])
