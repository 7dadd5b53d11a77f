"""Error classes of SPEC.md §17 (and the caller-side classes of VAL-15)."""

FORMAT_CLASSES = ("malformed", "invalid", "unsupported", "limit", "io")
CALLER_CLASSES = ("not_found", "conflict", "usage")


class TesseraError(Exception):
    """A failure reported in exactly one class (SPEC §17)."""

    def __init__(self, cls: str, message: str):
        assert cls in FORMAT_CLASSES + CALLER_CLASSES, cls
        super().__init__(message)
        self.cls = cls
        self.message = message

    def __str__(self) -> str:
        return f"error[{self.cls}]: {self.message}"


class NotSupportedHere(Exception):
    """Something this implementation does not implement (adapter exit 89).

    Distinct from the `unsupported` class, which is a property of the input."""


def malformed(msg: str) -> TesseraError:
    return TesseraError("malformed", msg)


def invalid(msg: str) -> TesseraError:
    return TesseraError("invalid", msg)


def unsupported(msg: str) -> TesseraError:
    return TesseraError("unsupported", msg)


def limit(msg: str) -> TesseraError:
    return TesseraError("limit", msg)
