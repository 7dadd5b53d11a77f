"""Mixtures: one training order over several sources (dataset versions and saved views, on
any stores), each taking a chosen share of every epoch, with changes of the mix at resume
points.

::

    web, code = tessera.open("s3://bucket/web"), tessera.open("/data/code")
    mix = tessera.mix([web, code, (books, "clean")], weights=[0.6, 0.25, 0.15])
    loader = mix.pytorch(batch_size=64)           # the same loaders as Dataset.pytorch()
    for batch in loader: ...
    state = loader.state_dict()                   # 62-byte position + the mix's history
    # later: anneal towards code from the resume point on
    mix2 = tessera.Mixture.from_state(state).change(state, weights=[0.3, 0.6, 0.1])
    loader = mix2.pytorch(batch_size=64); loader.load_state_dict(state)

Each source is read in its own global-shuffle order, epoch after epoch of the source: no row
repeats before its source wraps, whatever the weights. Every batch carries the mix (the
samples of each source are spread evenly over the epoch), an epoch takes exactly each
source's count, and ranks get disjoint shards of equal batch counts. The order is
deterministic given the seed, and a state resumes on another world size with the same
global batch. A change keeps every source's position; the history (``Mixture.to_json()``,
also in every ``state_dict()``) replays every batch from the start. The core is the Rust
loader's (``tessera_loader::Mixture``).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ._loader import Loader, open_loader
from ._native import UsageError

SourceSpec = Tuple[str, Optional[int], Optional[str], Optional[str], Optional[str], list, list]
StepSpec = Tuple[int, int, str, List[float], Optional[int]]
FORMAT = "tessera-mixture/1"


def _fills(fill: Mapping[str, Any]) -> list:
    out = []
    for column, value in fill.items():
        if isinstance(value, str) and value == "zeros":
            out.append((str(column), "zeros", None))
        elif value is None:
            out.append((str(column), "null", None))
        elif isinstance(value, (bytes, bytearray)):
            out.append((str(column), "row", bytes(value)))
        elif hasattr(value, "tobytes"):  # a numpy row of the column's dtype
            out.append((str(column), "row", value.tobytes()))
        else:
            raise UsageError(f"fill of {column!r}: 'zeros', None (null), or the row's bytes / a numpy row")
    return out


def _source(item: Any) -> SourceSpec:
    """A source as the native loader takes it: ``(location, version, tag, branch, view,
    renames, fills)``. A dict ``{"source": ds or url, "view": name, "columns": {batch name:
    stored name}, "fill": {column: "zeros" | None | row}}`` maps a source's columns onto the
    batch."""
    if isinstance(item, Mapping):
        base = _source(item["source"] if item.get("view") is None else (item["source"], item["view"]))
        renames = [(str(k), str(v)) for k, v in dict(item.get("columns") or {}).items()]
        return base[:5] + (renames, _fills(dict(item.get("fill") or {})))
    view = None
    if isinstance(item, tuple):
        if len(item) != 2 or not isinstance(item[1], str):
            raise UsageError("a view source is a pair (dataset or url, view name)")
        item, view = item
    location = getattr(item, "location", None)
    if location is not None:
        if view is not None:  # a view pins its own version
            return (str(location), None, None, None, view, [], [])
        return (str(location), int(item.version), None, str(item.branch_name), None, [], [])
    if isinstance(item, str):
        return (item, None, None, None, view, [], [])
    raise UsageError(f"a mixture source is a Dataset, a url, or (either, view name), not {type(item).__name__}")


def _step(
    epoch: int, offset: int, weights: Optional[Sequence[float]], samples: Optional[Sequence[int]], epoch_samples
) -> StepSpec:
    if (weights is None) == (samples is None):
        raise UsageError("give weights= or samples= (one per source)")
    if weights is not None:
        return (int(epoch), int(offset), "weights", [float(w) for w in weights], epoch_samples)
    return (int(epoch), int(offset), "samples", [float(int(n)) for n in samples], None)


class Mixture:
    """Sources and the history of their shares (see :func:`mix`)."""

    def __init__(self, sources: Sequence[SourceSpec], steps: Sequence[StepSpec]):
        self.sources: List[SourceSpec] = [tuple(s) for s in sources]  # type: ignore[misc]
        self.steps: List[StepSpec] = [tuple(s) for s in steps]  # type: ignore[misc]

    def change(
        self,
        state: Mapping[str, Any],
        weights: Optional[Sequence[float]] = None,
        samples: Optional[Sequence[int]] = None,
        epoch_samples: Optional[int] = None,
        add: Sequence[Any] = (),
    ) -> "Mixture":
        """A new mixture whose history continues this one's with new shares from the resume
        point ``state`` (a loader's ``state_dict()``) on. ``add`` appends sources (they took
        no samples before); give one weight or count per source, old and added."""
        inner = state.get("state") if isinstance(state, Mapping) else None
        if inner is None:
            epoch, offset = int(state.get("epoch", 0)), 0
        else:
            fields = json.loads(inner)
            epoch, offset = int(fields["epoch"]), int(fields["samples_consumed_global"])
        sources = self.sources + [_source(a) for a in add]
        return Mixture(sources, self.steps + [_step(epoch, offset, weights, samples, epoch_samples)])

    def to_json(self) -> str:
        """The mixture and its history as JSON (kept in every loader ``state_dict()``)."""
        sources = [list(s[:5]) + [s[5], [(c, k, None if r is None else r.hex()) for c, k, r in s[6]]] for s in self.sources]
        return json.dumps({"format": FORMAT, "sources": sources, "steps": self.steps})

    @classmethod
    def from_json(cls, text: str) -> "Mixture":
        """The mixture :meth:`to_json` wrote."""
        data = json.loads(text)
        if data.get("format") != FORMAT:
            raise UsageError(f"not a Tessera mixture (format {FORMAT!r} expected)")
        sources = [
            tuple(s[:5]) + ([tuple(r) for r in s[5]], [(c, k, None if r is None else bytes.fromhex(r)) for c, k, r in s[6]])
            for s in data["sources"]
        ]
        return cls(sources, [tuple(s) for s in data["steps"]])

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> "Mixture":
        """The mixture a mixture loader's ``state_dict()`` was taken with."""
        if "mixture" not in state:
            raise UsageError("the state was not taken by a mixture loader")
        return cls.from_json(state["mixture"])

    def _loader(self, output: str, device: Optional[str], kwargs: Dict[str, Any]) -> Loader:
        if kwargs.pop("view", None) is not None:
            raise UsageError("a mixture names its views per source: (dataset, view name)")
        kwargs["mixture"] = (self.sources, self.steps)
        return open_loader(self.sources[0][0], output, device, kwargs, mixture=self.to_json())

    def pytorch(self, batch_size: int = 32, columns=None, shuffle: Optional[str] = "global", seed: int = 0,
                drop_last: bool = False, workers: int = 2, memory_budget: Optional[int] = None,
                device: Optional[str] = None, rank: Optional[int] = None, world_size: Optional[int] = None,
                **options: Any) -> Loader:
        """A loader of torch tensors over the mixture, as :meth:`tessera.Dataset.pytorch`
        (``shuffle`` is ``"global"`` or ``None``: each source in its own order). Batches
        are dicts as there; ``iter(loader).last_sources`` gives each sample's source."""
        from . import _loader_kwargs

        kwargs = _loader_kwargs(batch_size, columns, shuffle, seed, drop_last, workers, memory_budget, rank,
                                world_size, None, options)
        return self._loader("torch", device, kwargs)

    def numpy(self, batch_size: int = 32, columns=None, shuffle: Optional[str] = "global", seed: int = 0,
              drop_last: bool = False, workers: int = 2, memory_budget: Optional[int] = None,
              rank: Optional[int] = None, world_size: Optional[int] = None, **options: Any) -> Loader:
        """As :meth:`pytorch`, yielding numpy arrays."""
        from . import _loader_kwargs

        kwargs = _loader_kwargs(batch_size, columns, shuffle, seed, drop_last, workers, memory_budget, rank,
                                world_size, None, options)
        return self._loader("numpy", None, kwargs)

    def jax(self, batch_size: int = 32, columns=None, shuffle: Optional[str] = "global", seed: int = 0,
            drop_last: bool = False, workers: int = 2, memory_budget: Optional[int] = None,
            rank: Optional[int] = None, world_size: Optional[int] = None, **options: Any) -> Loader:
        """As :meth:`pytorch`, yielding ``jax.Array``s (see :meth:`tessera.Dataset.jax`)."""
        from . import _loader_kwargs

        kwargs = _loader_kwargs(batch_size, columns, shuffle, seed, drop_last, workers, memory_budget, rank,
                                world_size, None, options)
        return self._loader("jax", None, kwargs)


def mix(
    sources: Sequence[Union[Any, Tuple[Any, str]]],
    weights: Optional[Sequence[float]] = None,
    samples: Optional[Sequence[int]] = None,
    epoch_samples: Optional[int] = None,
) -> Mixture:
    """A mixture of ``sources``: each a :class:`tessera.Dataset` (its pinned version), a url
    (its latest version), ``(dataset or url, view name)`` for a saved view, or a dict
    ``{"source": …, "view": …, "columns": {"image": "img"}, "fill": {"caption": "zeros"}}``
    mapping the source's columns onto the batch's (the first source's) and filling a column it
    lacks with zeros (an empty row where ragged), ``None`` (null; a nullable column) or one
    row's bytes.

    ``weights=[...]`` (one per source, ≥ 0) split each epoch of ``epoch_samples`` samples
    (by default as many as the weighted sources have rows); ``samples=[...]`` give each
    source's count per epoch instead ("choose n"; ``k × rows`` repeats a source ``k`` times).
    """
    return Mixture([_source(s) for s in sources], [_step(0, 0, weights, samples, epoch_samples)])
