"""The smaller hints: a model given as a path with a download mode that fetches nothing, and a
secret file with Windows line endings, each said in so many words."""

from __future__ import annotations

from pathlib import Path

from halo_cluster.config.loader import load_cluster
from tests.unit.configs import VALID_ROCE, problems, write


def test_a_model_path_with_a_download_mode_warns_that_nothing_is_fetched(
    tmp_path: Path, capsys
) -> None:
    serve = "serve: {enabled: true, model: /srv/models/qwen%s}\n"
    cluster = load_cluster(write(tmp_path, VALID_ROCE + serve % ""))
    (warning,) = cluster.warnings
    assert warning == (
        f"{tmp_path / 'cluster.yml'}: serve.download: warning: once: nothing is fetched or "
        "copied for a model given as a path (/srv/models/qwen): every node must hold it there "
        "(checked); `never` says so"
    )
    assert warning in capsys.readouterr().err
    quiet = load_cluster(write(tmp_path, VALID_ROCE + serve % ", download: never"))
    assert quiet.warnings == ()


def test_a_token_file_with_crlf_endings_says_why(tmp_path: Path) -> None:
    (tmp_path / "hf.token").write_bytes(b"hf_abcdef\r\n")
    text = VALID_ROCE + "serve: {enabled: true, model: Qwen/Qwen3-14B, hf_token_file: hf.token}\n"
    assert problems(tmp_path, text) == [
        f"{tmp_path / 'cluster.yml'}: serve.hf_token_file: {tmp_path / 'hf.token'} has Windows "
        "line endings (CRLF): save it with LF endings (dos2unix FILE)"
    ]
