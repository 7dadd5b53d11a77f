"""A dataset root on the local filesystem, seen as an object store (LAY-01): whole GET,
size (HEAD) and a one-level LIST of the version keys of a branch.

Keys are `/`-separated; callers only pass keys built from names and paths that passed
LAY-07 / LAY-09 and LIM-12, so a key never leaves the root (SEC-02)."""

import errno
import os
import re

from .errors import TesseraError

VERSION_KEY = re.compile(r"[0-9]{20}\.tsm")
U64_MAX = (1 << 64) - 1

_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.EISDIR)


class Store:
    def __init__(self, root: str):
        self.root = root

    def _path(self, key: str) -> str:
        return os.path.join(self.root, *key.split("/"))

    def _linked(self, key: str) -> bool:
        """LAY-11: a key that reaches a symbolic link, as the object or as a directory on its
        path, names no object."""
        p = self.root
        for seg in key.split("/"):
            p = os.path.join(p, seg)
            if os.path.islink(p):
                return True
        return False

    def get(self, key: str, bound=None):
        """The object's bytes, or None if no object has this key. With `bound` (ENV-10: 28 +
        the body limit of the enveloped type expected), an object larger than `bound` is
        `limit`, found from its size before its bytes are read, and never read past `bound`."""
        path = self._path(key)
        if self._linked(key):
            return None
        try:
            if os.path.isdir(path):
                return None
            with open(path, "rb") as f:
                if bound is None:
                    return f.read()
                size = os.fstat(f.fileno()).st_size
                data = f.read(bound + 1)
                if size > bound or len(data) > bound:
                    raise TesseraError("limit", f"object {key}: size {max(size, len(data))} is over "
                                                f"{bound}, 28 + its type's body limit (ENV-10)")
                return data
        except OSError as e:
            if e.errno in _ABSENT:
                return None
            raise TesseraError("io", f"reading {key}: {e}") from None

    def size(self, key: str):
        """The object's size in bytes, or None if no object has this key."""
        path = self._path(key)
        if self._linked(key):
            return None
        try:
            st = os.stat(path)
        except OSError as e:
            if e.errno in _ABSENT:
                return None
            raise TesseraError("io", f"stat {key}: {e}") from None
        if os.path.isdir(path):
            return None
        return st.st_size

    def list_versions(self, branch: str) -> list:
        """VER-02 / LAY-08: version numbers of the keys `branches/<branch>/<v:20>.tsm`,
        ignoring every other key, 0, and numbers above 2^64 − 1."""
        path = self._path(f"branches/{branch}")
        if self._linked(f"branches/{branch}"):
            return []
        try:
            names = os.listdir(path)
        except OSError as e:
            if e.errno in _ABSENT:
                return []
            raise TesseraError("io", f"listing branches/{branch}/: {e}") from None
        out = []
        for name in names:
            if not VERSION_KEY.fullmatch(name):
                continue
            if os.path.isdir(os.path.join(path, name)) or os.path.islink(os.path.join(path, name)):
                continue  # a "directory" is a prefix, not an object; a link is no object (LAY-11)
            v = int(name[:20])
            if 1 <= v <= U64_MAX:
                out.append(v)
        return out
