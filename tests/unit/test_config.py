from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from memray import ConfigError, MemoryConfig
from memray.core.factory import milvus_uri
from memray.settings import load_settings


def test_unknown_keys_are_rejected_at_every_level() -> None:
    with pytest.raises(ValidationError):
        MemoryConfig.model_validate({"recall": {"treshold": 0.5}})
    with pytest.raises(ValidationError):
        MemoryConfig.model_validate({"nope": 1})


def test_yaml_loading_and_bad_files(tmp_path: Path) -> None:
    good = tmp_path / "c.yaml"
    good.write_text("data_dir: /tmp/x\nstore:\n  milvus_uri: http://127.0.0.1:1\n")
    cfg = MemoryConfig.from_file(good)
    assert cfg.store.milvus_uri == "http://127.0.0.1:1"
    bad = tmp_path / "b.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError):
        MemoryConfig.from_file(bad)
    with pytest.raises(ConfigError):
        MemoryConfig.from_file(tmp_path / "missing.yaml")


def test_milvus_uri_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMRAY_MILVUS_URI", raising=False)
    assert milvus_uri(MemoryConfig(data_dir="d"), load_settings()) == "d/milvus.db"
    monkeypatch.setenv("MEMRAY_MILVUS_URI", "http://127.0.0.1:19530")
    assert milvus_uri(MemoryConfig(data_dir="d"), load_settings()) == "http://127.0.0.1:19530"
    explicit = MemoryConfig.model_validate({"store": {"milvus_uri": "http://127.0.0.1:1"}})
    assert milvus_uri(explicit, load_settings()) == "http://127.0.0.1:1"


def test_all_zero_weights_are_refused() -> None:
    with pytest.raises(ValidationError):
        MemoryConfig.model_validate(
            {"recall": {"w_similarity": 0, "w_importance": 0, "w_recency": 0}})


def test_recall_timezone_is_an_iana_zone() -> None:
    cfg = MemoryConfig.model_validate({"recall": {"timezone": "Asia/Shanghai"}})
    assert cfg.recall.timezone == "Asia/Shanghai"
    for bad in ("Mars/Olympus", "../../etc/passwd", "", "America"):  # a folder, too
        with pytest.raises(ValidationError, match="is no IANA time zone"):
            MemoryConfig.model_validate({"recall": {"timezone": bad}})


def test_a_zone_per_search_is_an_iana_zone() -> None:
    from memray.core import validate
    from memray.errors import InvalidInputError

    assert str(validate.zone("Asia/Shanghai")) == "Asia/Shanghai"
    for bad in ("Mars/Olympus", "../../etc/passwd", "", "America", "localtime", "Factory",
                "Asia/Shanghai\x00", "x" * 10_000, None, 8):
        with pytest.raises(InvalidInputError, match="is no IANA time zone"):
            validate.zone(bad)
