"""The lab's stand-in for the Hugging Face Hub's HTTP API: what the real `hf download`
(huggingface_hub 1.33, the lab image's) asks of a hub, served from this machine to the lab's
nodes, counting every byte of a file it sends, so a test can measure what the cluster fetched
from outside.

Each contract names the huggingface_hub file it comes from:
- `GET /api/models/REPO/revision/REV`: the repository's info, `sha` the commit
  (`hf_api.py`, `HfApi.model_info`; `_snapshot_download.py` needs `sha`);
- `GET /api/models/REPO/tree/REV`: the recursive listing, LFS entries with their sha256
  (`hf_api.py`, `list_repo_tree`, `RepoFile`);
- `HEAD|GET /REPO/resolve/REV/FILE`: `X-Repo-Commit`, `ETag` (the git blob id) or for LFS files
  `X-Linked-Etag` (the sha256) and `X-Linked-Size` (`file_download.py`,
  `get_hf_file_metadata`; the cache names a blob by that etag).
No Xet headers: huggingface_hub then downloads over plain HTTP, as from a hub without Xet.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from lab import throttle
from lab.places import LAB_DIR

LFS_SUFFIXES = (".safetensors", ".bin")  # what a hub keeps in LFS: weights
CHUNK = 64 * 1024  # a body is sent in these, the lab's throttle read before each


@dataclass(frozen=True)
class Repo:
    commit: str
    files: dict[str, bytes]

    def etag(self, name: str) -> str:
        data = self.files[name]
        if name.endswith(LFS_SUFFIXES):
            return hashlib.sha256(data).hexdigest()
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Hub(ThreadingHTTPServer):
    """Serves `repos` (id -> Repo) on `address`; `sent` counts file bytes per file path. Its
    bodies go at most at the rate `python -m lab throttle` stored in `rate_file` (the lab's)."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        repos: dict[str, Repo],
        rate_file: Path | None = None,
    ) -> None:
        super().__init__(address, _Handler)
        if rate_file is None:
            rate_file = LAB_DIR / throttle.RATE_FILE
        self.repos = repos
        self.rate_file = rate_file
        self.sent: Counter[str] = Counter()
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def bytes_sent(self) -> int:
        with self.lock:
            return sum(self.sent.values())

    def start(self) -> Hub:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: Hub

    def log_message(self, format: str, *args) -> None:  # http.server's own signature
        pass  # a test reads the counters, not a log on stderr

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _answer(self, body: bool) -> None:
        parts = [unquote(p) for p in urlsplit(self.path).path.strip("/").split("/")]
        if parts[:2] == ["api", "models"] and len(parts) >= 6:
            self._api(parts[2] + "/" + parts[3], parts[4], body)
        elif len(parts) >= 5 and parts[2] == "resolve":
            self._file(parts[0] + "/" + parts[1], "/".join(parts[4:]), body)
        else:
            self._json(404, {"error": "Not found"}, body)

    def _api(self, repo_id: str, kind: str, body: bool) -> None:
        repo = self.server.repos.get(repo_id)
        if repo is None:
            self._json(
                404, {"error": "Repository not found"}, body, {"X-Error-Code": "RepoNotFound"}
            )
        elif kind == "revision":
            siblings = [{"rfilename": name} for name in sorted(repo.files)]
            info = {"_id": repo.commit[:24], "id": repo_id, "modelId": repo_id}
            self._json(
                200, {**info, "sha": repo.commit, "private": False, "siblings": siblings}, body
            )
        elif kind == "tree":
            self._json(200, [_tree_entry(repo, name) for name in sorted(repo.files)], body)
        else:
            self._json(404, {"error": "Not found"}, body)

    def _file(self, repo_id: str, name: str, body: bool) -> None:
        repo = self.server.repos.get(repo_id)
        if repo is None or name not in repo.files:
            self._json(404, {"error": "Entry not found"}, body, {"X-Error-Code": "EntryNotFound"})
            return
        data = repo.files[name]
        etag = repo.etag(name)
        headers = {"X-Repo-Commit": repo.commit, "ETag": f'"{etag}"'}
        if name.endswith(LFS_SUFFIXES):
            headers |= {"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(len(data))}
        self._send(200, data, "application/octet-stream", body, headers)
        if body:
            with self.server.lock:
                self.server.sent[f"{repo_id}/{name}"] += len(data)

    def _json(self, code: int, value, body: bool, headers: dict | None = None) -> None:
        self._send(code, json.dumps(value).encode(), "application/json", body, headers or {})

    def _send(self, code: int, data: bytes, kind: str, body: bool, headers: dict) -> None:
        self.send_response(code)
        for key, value in {
            "Content-Type": kind,
            "Content-Length": str(len(data)),
            **headers,
        }.items():
            self.send_header(key, value)
        self.end_headers()
        for start in range(0, len(data) if body else 0, CHUNK):
            self.wfile.write(data[start : start + CHUNK])
            rate = throttle.current(self.server.rate_file)
            if rate:
                time.sleep(len(data[start : start + CHUNK]) / rate)


def _tree_entry(repo: Repo, name: str) -> dict:
    data = repo.files[name]
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    entry = {"type": "file", "oid": blob, "size": len(data), "path": name}
    if name.endswith(LFS_SUFFIXES):
        entry["lfs"] = {"oid": repo.etag(name), "size": len(data), "pointerSize": 134}
    return entry
