"""Ray Data -> Tessera: 8 Ray tasks write in parallel, one commit; then a parallel read back.

usage: python ray_ingest.py DATASET_URL [RAY_ADDRESS]   (a local 2-CPU Ray without an address)
"""

import sys

import numpy as np
import ray

import tessera
import tessera.ray

url = sys.argv[1]
if len(sys.argv) > 2:
    ray.init(address=sys.argv[2])  # a running cluster; its workers need the store's credentials
else:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)


def features(batch):  # runs inside the Ray tasks: decode / compute per-row values here
    ids = batch["id"]
    emb = np.sin(np.outer(ids, np.arange(8))).astype(np.float32)
    return {"id": ids, "emb": emb}


sink = tessera.ray.Sink(url, schema=[{"name": "id", "dtype": "i64"}, {"name": "emb", "dtype": "f32", "shape": [8]}])
ray.data.range(10_000, override_num_blocks=8).map_batches(features).write_datasink(sink)
print(f"committed version {sink.version} of {url} from {sink.tasks} write tasks")

back = ray.data.read_datasource(tessera.ray.Source(url, version=sink.version, columns=["id"]))
print(f"read back {back.count()} rows in parallel")
