"""Create-if-absent on a local file system (VER-04, VER-11).

Each object is written to a temporary file in its destination directory, under a name no
pattern of §4 matches (it starts with `.` and ends with `.tmp`), fsynced, then linked to its
final name with `link(2)`, which fails with "already exists" instead of replacing. The
temporary name is always removed, linked or not, and the directory is fsynced, so after a
successful operation no temporary file remains and the new name is durable.
"""

import errno
import os
import secrets

from tessera_py.errors import TesseraError


def _io(what: str, e: OSError) -> TesseraError:
    return TesseraError("io", f"{what}: {e}")


def _fsync_dir(path: str):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FsStore:
    """The objects of a dataset root directory, created once each (LAY-06, LAY-11)."""

    def __init__(self, root: str):
        self.root = root

    def path(self, key: str) -> str:
        return os.path.join(self.root, *key.split("/"))

    def _ensure_dir(self, d: str):
        """Creates directory `d` and its missing parents, fsyncing each parent that gained
        an entry."""
        if os.path.isdir(d):
            return
        parent = os.path.dirname(d)
        self._ensure_dir(parent)
        try:
            os.mkdir(d)
        except FileExistsError:
            return
        _fsync_dir(parent)

    def create(self, key: str, data: bytes) -> bool:
        """Creates object `key` with `data` if no object has that key: True if this call
        created it, False if it already existed (its bytes are left alone)."""
        dest = self.path(key)
        d = os.path.dirname(dest)
        try:
            self._ensure_dir(d)
            tmp = os.path.join(d, f".tessera-py-{os.getpid()}-{secrets.token_hex(8)}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view):]
                    os.fsync(fd)
                finally:
                    os.close(fd)
                try:
                    os.link(tmp, dest)
                    created = True
                except FileExistsError:
                    created = False
                except OSError as e:
                    if e.errno in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EXDEV):
                        # No link(2) here: no create-if-absent, so no commits (VER-04).
                        raise TesseraError("unsupported", f"creating {key}: the file system "
                                           f"cannot link(2) ({e}), so it offers no "
                                           f"create-if-absent") from None
                    raise
            finally:
                try:
                    os.unlink(tmp)
                except FileNotFoundError:
                    pass
            _fsync_dir(d)
        except OSError as e:
            raise _io(f"creating {key}", e) from None
        return created

    def size(self, key: str) -> int:
        try:
            return os.path.getsize(self.path(key))
        except OSError as e:
            raise _io(f"stat {key}", e) from None

    def get(self, key: str):
        """The bytes of object `key`, or None if it does not exist."""
        try:
            with open(self.path(key), "rb") as f:
                return f.read()
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ENOTDIR):
                return None
            raise _io(f"reading {key}", e) from None
