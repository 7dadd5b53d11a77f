"""moto's S3 server with every write made atomic, for the storage suites.

moto checks `If-None-Match: *` and `If-Match` and then writes, with no lock between the two
(moto/s3/responses.py, `put_object`). Real S3 makes the check and the write one step, and the
commit protocol stands on that (SPEC.md [VER-04]). Under load two racing creates of one key can
both succeed on bare moto; CI once saw two writers each win version 19. This launcher runs the
same WSGI application as `moto_server`, with one lock around every request that writes (PUT,
POST, DELETE), so each conditional write is checked and applied as one step. Reads stay
concurrent.

Usage: python scripts/moto_server.py -H HOST -p PORT
"""

import argparse
import os
import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple

WRITES = frozenset({"PUT", "POST", "DELETE"})


class AtomicWrites:
    """WSGI middleware: one write at a time, its response produced inside the lock."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        if environ.get("REQUEST_METHOD") not in WRITES:
            return self.app(environ, start_response)
        with self.lock:
            body = self.app(environ, start_response)
            try:
                return [b"".join(body)]
            finally:
                close = getattr(body, "close", None)
                if close is not None:
                    close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=5555)
    args = parser.parse_args()
    os.environ.setdefault("MOTO_PORT", str(args.port))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(args.host, args.port, AtomicWrites(app), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
