"""`halo-cluster fit`'s model: its config.json and its weights' size, read without the weights.

MODEL is a folder holding config.json and model.safetensors.index.json (its metadata.total_size)
or *.safetensors (their sizes); or a hub id, found in the controller's Hugging Face cache as
huggingface_hub lays it out ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub:
models--ORG--NAME/snapshots/REV/, refs/main naming REV); or, when not there, those two small
files fetched with huggingface_hub's hf_hub_download, else the safetensors' sizes in the hub's
file list (online only; NOT VERIFIED here, where the
hub cannot be reached). The estimate itself: fitestimate.py."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from halo_cluster.config.quoting import quote

CONFIG, INDEX = "config.json", "model.safetensors.index.json"


class ModelNotFound(Exception):
    """The one line naming MODEL and what was looked for."""


@dataclass(frozen=True)
class Model:
    name: str
    config: dict
    weights: int  # bytes of every tensor
    source: str  # where the files were read


def hub_caches() -> list[Path]:
    if cache := os.environ.get("HF_HUB_CACHE"):
        return [Path(cache)]
    home = os.environ.get("HF_HOME")
    return [Path(home) / "hub" if home else Path.home() / ".cache" / "huggingface" / "hub"]


def _snapshot(model: str) -> Path | None:
    for cache in hub_caches():
        repo = cache / f"models--{model.replace('/', '--')}"
        ref = repo / "refs" / "main"
        if ref.is_file():
            snapshot = repo / "snapshots" / ref.read_text().strip()
            if (snapshot / CONFIG).is_file():
                return snapshot
        found = sorted((repo / "snapshots").glob(f"*/{CONFIG}"))
        if found:  # no refs/main (a revision fetched by hash): the newest snapshot
            return max(found, key=lambda p: p.stat().st_mtime).parent
    return None


def _json(path: Path) -> dict:
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ModelNotFound(f"{path}: not readable JSON ({error})") from error
    if not isinstance(found, dict):
        raise ModelNotFound(f"{path}: not a JSON object")
    return found


def _weights(folder: Path, index: Path | None) -> int:
    """The index's metadata.total_size, else the *.safetensors files' sizes."""
    if index is not None and index.is_file():
        total = _json(index).get("metadata", {}).get("total_size")
        if isinstance(total, int) and total > 0:
            return total
    sizes = [p.stat().st_size for p in folder.glob("*.safetensors")]
    if not sizes:
        raise ModelNotFound(
            f"{folder}: neither {INDEX} (with metadata.total_size) nor *.safetensors"
        )
    return sum(sizes)


def _fetched(model: str) -> Model:
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as error:
        raise ModelNotFound(
            f"{quote(model)}: not a folder nor in {hub_caches()[0]}, and huggingface_hub is not "
            "installed to fetch its config.json"
        ) from error
    try:
        config = Path(hf_hub_download(model, CONFIG))
    except Exception as error:  # offline, gated, no such repository: huggingface_hub's words
        raise ModelNotFound(f"{quote(model)}: {CONFIG} not fetched: {error}") from error
    try:
        index = Path(hf_hub_download(model, INDEX))
        return Model(model, _json(config), _weights(index.parent, index), "the hub")
    except Exception:  # one model.safetensors, no index: the sizes in the hub's file list
        return Model(model, _json(config), _hub_sizes(model), "the hub")


def _hub_sizes(model: str) -> int:
    from huggingface_hub import HfApi

    try:
        info = HfApi().model_info(model, files_metadata=True)
    except Exception as error:
        raise ModelNotFound(f"{quote(model)}: the hub's file list not read: {error}") from error
    sizes = [f.size or 0 for f in info.siblings or [] if f.rfilename.endswith(".safetensors")]
    if not sum(sizes):
        raise ModelNotFound(f"{quote(model)}: no {INDEX} nor *.safetensors on the hub")
    return sum(sizes)


def read(model: str) -> Model:
    folder = Path(model).expanduser()
    if folder.is_dir():
        if not (folder / CONFIG).is_file():
            raise ModelNotFound(f"{folder}: no {CONFIG}")
        return Model(model, _json(folder / CONFIG), _weights(folder, folder / INDEX), str(folder))
    if model.startswith(("/", ".", "~")) or model.count("/") != 1:
        raise ModelNotFound(f"{quote(model)}: not a folder, nor a hub id ORG/NAME")
    snapshot = _snapshot(model)
    if snapshot is not None:
        return Model(
            model, _json(snapshot / CONFIG), _weights(snapshot, snapshot / INDEX), str(snapshot)
        )
    return _fetched(model)
