"""Where a LanceDB store lives: a local folder or an object-store prefix (``s3://bucket/prefix``).

The tables are Lance datasets, which LanceDB reads and writes on either (its object-store
support, with the storage options of ``Settings.store_options``). Beside them the store keeps a
few small files — ``CURRENT``, each view's ``meta.json`` — and lists its views and shards; this
module does that through pyarrow's filesystems, so the store's code is the same for both. On an
object store a file is replaced by one PUT (atomic for readers); a local file by a rename.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

from pyarrow import fs as pafs

from adamem.errors import ConfigError

__all__ = ["Location"]


class Location:
    """A store root, local or on an object store; paths below it are relative, ``/``-separated."""

    def __init__(self, root: str | Path, storage_options: dict[str, str] | None = None) -> None:
        text = str(root)
        self.options = dict(storage_options or {})
        self.remote = text.startswith("s3://")
        if self.remote:
            bucket_prefix = text.removeprefix("s3://").strip("/")
            if not bucket_prefix:
                raise ConfigError(f"store URL {text!r} names no bucket: use s3://bucket/prefix")
            self.url = f"s3://{bucket_prefix}"
            o = self.options
            self.fs: pafs.FileSystem = pafs.S3FileSystem(
                access_key=o.get("access_key_id") or None,
                secret_key=o.get("secret_access_key") or None,
                region=o.get("region") or "us-east-1",
                endpoint_override=o.get("endpoint") or None,
                scheme="http" if o.get("allow_http") == "true" else "https",
            )
            self.base = bucket_prefix
        else:
            self.url = str(Path(text))
            self.fs = pafs.LocalFileSystem()
            self.base = str(Path(text).absolute())

    def __str__(self) -> str:
        return self.url

    def uri(self, rel: str) -> str:
        """The URI (or local path) of ``rel`` below the root, for LanceDB and Lance."""
        return f"{self.url}/{rel}" if rel else self.url

    def _path(self, rel: str) -> str:
        return f"{self.base}/{rel}" if rel else self.base

    def read_text(self, rel: str) -> str | None:
        """A small file's text, or None when it does not exist."""
        try:
            with self.fs.open_input_stream(self._path(rel)) as f:
                return bytes(f.read()).decode()
        except FileNotFoundError:
            return None
        except OSError as exc:  # pyarrow's S3 reports a missing key as OSError with "NoSuchKey"/"Path does not exist"
            if "does not exist" in str(exc) or "NoSuchKey" in str(exc) or "not found" in str(exc).lower():
                return None
            raise

    def write_text(self, rel: str, text: str) -> None:
        """Replace a small file atomically: readers see the old text or the new, never a part."""
        if self.remote:
            with self.fs.open_output_stream(self._path(rel)) as f:
                f.write(text.encode())
            return
        path = Path(self._path(rel))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")  # writers never share one
        with tmp.open("w") as fo:
            fo.write(text)
            fo.flush()
            os.fsync(fo.fileno())
        tmp.replace(path)

    def dirs(self, rel: str) -> list[str]:
        """Names of the folders (prefixes) directly below ``rel``; [] when there is none."""
        return self._names(rel, pafs.FileType.Directory)

    def files(self, rel: str) -> list[str]:
        """Names of the files directly below ``rel`` (one listing); [] when there is none."""
        return self._names(rel, pafs.FileType.File)

    def _names(self, rel: str, kind: pafs.FileType) -> list[str]:
        selector = pafs.FileSelector(self._path(rel), allow_not_found=True, recursive=False)
        return sorted(i.base_name for i in self.fs.get_file_info(selector) if i.type == kind)

    def exists(self, rel: str) -> bool:
        return bool(self.fs.get_file_info(self._path(rel)).type != pafs.FileType.NotFound)

    def remove_file(self, rel: str) -> None:
        """Remove a small file; nothing when it does not exist."""
        self._remove(self.fs.delete_file, rel)

    def remove_tree(self, rel: str) -> None:
        self._remove(self.fs.delete_dir, rel)

    def _remove(self, delete: Callable[[str], None], rel: str) -> None:
        try:
            delete(self._path(rel))
        except FileNotFoundError:
            pass
        except OSError:
            if self.exists(rel):
                raise

    def local(self, rel: str = "") -> Path | None:
        """The local path of ``rel``, or None on an object store."""
        return None if self.remote else Path(self._path(rel))
