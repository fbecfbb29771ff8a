"""The keystore: one data key per message, kept outside the log, destroyed by a forget (crypto-shredding).

**Why one key per message, kept in one file per owner.** The log is immutable (and copied: Kafka
replicas and segment files, backups), so erasing text from it means making every copy unreadable:
each message's free text, and everything the analyzer derived from it, is sealed under a key that
is not on the log (``adamem.schemas.sealing``). Forgetting *one* message must erase just that
message, so each message has its own random 256-bit key; forgetting an owner erases all of
theirs, so an owner's keys live together, in one file, and forgetting the owner removes the file.
The alternative — one key per owner and per-message keys derived from it plus a "tombstone" list —
keeps the owner key, from which a forgotten message's key can still be derived: a message
forget would then rest on a list being honoured, not on key material being gone. Wrapping the
message keys with an owner key stored beside them would add nothing (whoever reads one reads the
other); a KMS-held wrapping key is where that would help, and is not offered.

**Layout** (a folder, ``ADAMEM_KEYSTORE``; by default ``<log folder>.keys`` beside an embedded log,
``~/.adamem/keys/<topic prefix>`` for Kafka): ``<sha256(owner key)>.keys`` per owner, a header
``ADAMEMK1`` + the owner key's length (2 bytes, big-endian) + the owner key, then 48-byte entries,
the message event id (16 bytes) and its key (32 bytes). New keys are appended and fsynced
(``flush``) before the events sealed with them go on the log, so no event is written that its key
could not outlive. Forgetting a message rewrites the owner's file without its entry (a new file,
fsynced, renamed over the old one, directory fsynced); forgetting an owner deletes the file.
Writers take ``.lock`` (``flock``); readers notice another process's change by the file's
identity (inode, size, mtime) on every lookup, so a forget in one process shreds the message for
all of them.

A key that is not there opens nothing: the event decodes ``shredded``. That is what a forget
means, and what a *lost* keystore means too — back it up (README, "Keys").
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from adamem.errors import ConfigError, LogError
from adamem.events import MemoryForgotten
from adamem.locations import LogLocation

if TYPE_CHECKING:
    from adamem.settings import Settings
    from adamem.streams.log import EventLog

__all__ = ["KEY_BYTES", "InMemoryKeyRing", "KeyRingLike", "Keystore", "destroy_keys", "keystore_for", "keystore_path"]

KEY_BYTES = 32
MAGIC = b"ADAMEMK1"
_ENTRY = 16 + KEY_BYTES


@dataclass(slots=True)
class _Owner:
    keys: dict[str, bytes]
    stamp: tuple[int, int, int] | None  # (inode, size, mtime_ns) of the file these keys were read from


class Keystore:
    """Message keys in a folder, one file per owner (see the module docstring)."""

    def __init__(self, root: str | Path, *, fsync: bool = True) -> None:
        self.root = Path(root)
        self.fsync = fsync
        self._owners: dict[str, _Owner] = {}
        self._pending: dict[str, dict[str, bytes]] = {}  # made, not yet durable
        # Each owner's file name, made once: a lookup per event (a replay's) only stats the file.
        self._files: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"Keystore({str(self.root)!r})"

    def path_of(self, owner: str) -> Path:
        """The file of ``owner``'s keys."""
        return self.root / f"{hashlib.sha256(owner.encode()).hexdigest()}.keys"

    # -- reading --------------------------------------------------------------------------------

    def _file(self, owner: str) -> str:
        file = self._files.get(owner)
        if file is None:
            file = self._files[owner] = str(self.path_of(owner))
        return file

    @staticmethod
    def _stamp(file: str) -> tuple[int, int, int] | None:
        try:
            st = os.stat(file)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _load(self, owner: str) -> dict[str, bytes]:
        file = self._file(owner)
        stamp = self._stamp(file)
        cached = self._owners.get(owner)
        if cached is not None and cached.stamp == stamp:
            return cached.keys
        keys = _parse(Path(file), owner) if stamp is not None else {}
        self._owners[owner] = _Owner(keys, stamp)
        return keys

    def get(self, owner: str, message: str) -> bytes | None:
        """The key of ``owner``'s message, or None (forgotten, lost, never made)."""
        pending = self._pending.get(owner)
        if pending is not None and message in pending:
            return pending[message]
        return self._load(owner).get(message)

    def get_or_create(self, owner: str, message: str) -> bytes:
        """The message's key; a new random one when it has none (durable after ``flush``)."""
        key = self.get(owner, message)
        if key is None:
            uuid.UUID(message)  # a message event id is a UUID: refuse anything else before it is stored
            key = os.urandom(KEY_BYTES)
            self._pending.setdefault(owner, {})[message] = key
        return key

    def owners_files(self) -> list[Path]:
        """Every owner file in the keystore."""
        return sorted(self.root.glob("*.keys")) if self.root.is_dir() else []

    # -- writing --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def flush(self) -> None:
        """Make every key made since the last flush durable (before the events sealed with them are appended)."""
        if not self._pending:
            return
        with self._locked():
            for owner, made in sorted(self._pending.items()):
                path = self.path_of(owner)
                have = _parse(path, owner) if path.exists() else {}
                fresh = {m: k for m, k in made.items() if m not in have}
                if len(fresh) != len(made):  # another process made some of them first: theirs are on the log
                    raise LogError(
                        f"keystore {self.root}: another process made keys for {len(made) - len(fresh)} of the same "
                        f"messages of owner {owner!r} concurrently; publish each message from one process"
                    )
                data = b"".join(uuid.UUID(m).bytes + k for m, k in fresh.items())
                with open(path, "ab") as f:
                    if f.tell() == 0:
                        f.write(_header(owner))
                    f.write(data)
                    f.flush()
                    if self.fsync:
                        os.fsync(f.fileno())
                self._owners.pop(owner, None)
            if self.fsync:
                _fsync_dir(self.root)
        self._pending.clear()

    def forget_message(self, owner: str, message: str) -> bool:
        """Destroy one message's key; True when it had one."""
        self._pending.get(owner, {}).pop(message, None)
        with self._locked():
            path = self.path_of(owner)
            if not path.exists():
                return False
            keys = _parse(path, owner)
            if keys.pop(message, None) is None:
                return False
            tmp = path.with_name(path.name + ".tmp")
            with open(tmp, "wb") as f:
                f.write(_header(owner) + b"".join(uuid.UUID(m).bytes + k for m, k in keys.items()))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            _fsync_dir(self.root)
            self._owners.pop(owner, None)
        return True

    def forget_owner(self, owner: str) -> bool:
        """Destroy every key of an owner; True when it had any."""
        self._pending.pop(owner, None)
        with self._locked():
            path = self.path_of(owner)
            self._owners.pop(owner, None)
            if not path.exists():
                return False
            path.unlink()
            _fsync_dir(self.root)
        return True


class InMemoryKeyRing:
    """Keys in a dict: the keystore of a ``memory://`` log (unit tests), with the same operations."""

    def __init__(self) -> None:
        self._keys: dict[tuple[str, str], bytes] = {}

    def get(self, owner: str, message: str) -> bytes | None:
        """The key of ``owner``'s message, or None."""
        return self._keys.get((owner, message))

    def get_or_create(self, owner: str, message: str) -> bytes:
        """The message's key; a new random one when it has none."""
        return self._keys.setdefault((owner, message), os.urandom(KEY_BYTES))

    def flush(self) -> None:
        """Nothing to make durable."""

    def forget_message(self, owner: str, message: str) -> bool:
        """Destroy one message's key."""
        return self._keys.pop((owner, message), None) is not None

    def forget_owner(self, owner: str) -> bool:
        """Destroy every key of an owner."""
        gone = [k for k in self._keys if k[0] == owner]
        for k in gone:
            del self._keys[k]
        return bool(gone)


def _header(owner: str) -> bytes:
    name = owner.encode()
    return MAGIC + len(name).to_bytes(2, "big") + name


def _parse(path: Path, owner: str) -> dict[str, bytes]:
    data = path.read_bytes()
    head = _header(owner)
    if not data.startswith(head) or (len(data) - len(head)) % _ENTRY:
        raise LogError(
            f"keystore file {path} is damaged or not {owner!r}'s ({len(data)} bytes): its messages cannot be "
            "opened. Restore it from the keystore's backup (README, 'Keys')."
        )
    out: dict[str, bytes] = {}
    for at in range(len(head), len(data), _ENTRY):
        out[str(uuid.UUID(bytes=data[at : at + 16]))] = data[at + 16 : at + _ENTRY]
    return out


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


KeyRingLike = Keystore | InMemoryKeyRing


def keystore_path(where: str | LogLocation, settings: Settings) -> Path | None:
    """Where the keystore of a log is: ``ADAMEM_KEYSTORE``, else beside an embedded log (None for ``memory://``)."""
    if settings.keystore:
        return Path(settings.keystore)
    location = where if isinstance(where, LogLocation) else LogLocation.parse(where)
    if location.kind == "memory":
        return None
    if location.kind == "kafka":  # not relative to the working folder: workers start anywhere
        return Path(settings.home).expanduser() / "keys" / settings.topic_prefix
    assert location.folder is not None
    root = location.folder.resolve()
    if not root.name:
        raise ConfigError(f"log folder {location.url!r} has no name to put its keystore beside; set ADAMEM_KEYSTORE")
    return root.with_name(root.name + ".keys")


def keystore_for(log: EventLog, settings: Settings) -> KeyRingLike:
    """The key ring of a log: its own (a ``memory://`` log holds one), else the keystore folder's.

    Call it once per unit of work and keep the object: keys it makes are durable only after its
    ``flush``. Each call opens the folder afresh (no state outside the objects).
    """
    own = getattr(log, "keyring", None)
    if isinstance(own, InMemoryKeyRing):
        return own
    path = keystore_path(log.url, settings)
    if path is None:
        raise ConfigError(f"log {log.url} has no keystore; set ADAMEM_KEYSTORE")
    return Keystore(path, fsync=settings.fsync)


def destroy_keys(keys: KeyRingLike, event: MemoryForgotten) -> bool:
    """Destroy the keys a forget names: one message's, or all of the owner's (an item forget names none).

    True when a key was destroyed now (False: already gone, never made, or an item forget).
    """
    if event.scope == "user":
        return keys.forget_owner(event.owner_id)
    if event.scope == "message" and event.target_id:
        return keys.forget_message(event.owner_id, event.target_id)
    return False
