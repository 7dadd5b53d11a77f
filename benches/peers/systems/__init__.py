"""One module per system measured by ``benches/peers/run.py``.

Each module has ``NAME`` (the table's row), ``FORMAT`` (the dataset folder it reads, written
by the module that defines ``write``), ``CONFIG`` (what the system is configured to do, for
the README), ``CHECKED`` (whether the harness can check that it delivers each row once per
epoch), optionally ``PADS`` (its last batch is filled up with rows already delivered),
``REMOTE`` (it reads an ``s3://`` URL under ``run.py --remote``, with ``args.cache`` as its
cache folder where it has one), ``REMOTE_ONLY`` (measured only from a bucket) and ``IMPORTS``
(modules imported before its clock starts), and either ``open(path, args)`` returning a
reader with ``epoch(e)`` (an iterable of batches in the form of ``workload.collate``) and
``close()``, ``run(path, rows, args)`` returning its figures, or ``command(path, args)`` for a
system measured as an external program.
"""

ORDER = (
    "read_limit",
    "tessera_rust",
    "tessera_python",
    "tessera_rust_block",
    "lance_take",
    "lance_torch",
    "mosaic_mds",
    "lit_data",
    "web_dataset",
)
