"""Log and store URLs, parsed once into what the factories, commands and services read."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from adamem.errors import ConfigError
from adamem.locations import LogLocation, StoreLocation
from adamem.settings import Settings


@pytest.mark.parametrize(
    ("url", "kind", "folder", "bootstrap", "here"),
    [
        ("./data/log", "embedded", Path("data/log"), "", True),
        ("file:///srv/日志", "embedded", Path("/srv/日志"), "", True),
        ("kafka://127.0.0.1:9092/", "kafka", None, "127.0.0.1:9092", False),
        ("kafka://a:1,b:2", "kafka", None, "a:1,b:2", False),
        ("memory://", "memory", None, "", True),
    ],
)
def test_a_log_url_names_its_kind_folder_and_brokers(
    url: str, kind: str, folder: Path | None, bootstrap: str, here: bool
) -> None:
    log = LogLocation.parse(url)
    assert (log.kind, log.folder, log.bootstrap, log.projected_here, str(log)) == (kind, folder, bootstrap, here, url)


@pytest.mark.parametrize(("url", "says"), [("kafka://", "names no broker"), ("http://x/log", "is not kafka://")])
def test_a_log_url_no_adapter_reads_is_refused(url: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        LogLocation.parse(url)


def test_a_store_url_carries_the_object_stores_options() -> None:
    settings = Settings(store_url="s3://bucket/prefix", store_endpoint="http://127.0.0.1:9000", store_allow_http=True)
    store = settings.store
    assert (store.kind, store.root, store.folder) == ("s3", "s3://bucket/prefix", None)
    assert store.options["endpoint"] == "http://127.0.0.1:9000" and store.options["allow_http"] == "true"
    assert StoreLocation.parse("lancedb:///tmp/s").folder == Path("/tmp/s")
    assert StoreLocation.parse("memory://").kind == "memory"
    with pytest.raises(ConfigError, match="is not memory://"):
        StoreLocation.parse("postgres://db")


def test_settings_parse_their_urls_once_and_a_changed_copy_again() -> None:
    settings = Settings(log_url="kafka://h:1")
    assert settings.log is settings.log
    other = dataclasses.replace(settings, log_url="./elsewhere")
    assert (other.log.kind, settings.log.kind) == ("embedded", "kafka")
    assert other == dataclasses.replace(other)  # the parsed values are no part of equality
