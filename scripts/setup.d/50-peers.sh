#!/usr/bin/env bash
# needed by: bench test
# The peers of benches/peers/ (Lance, MosaicML Streaming, LitData, WebDataset), Grain and
# torchvision for benches/augment/, and the photos
# of its workload (scikit-image's sample data), pinned, in their own virtualenv .venv-peers.
#
# .venv-peers sees .venv's packages (torch 2.11.0, numpy, pyarrow, pytest) through a .pth
# file and installs everything with --no-deps, from the explicit list below: the peers'
# declared dependencies would pull another torch (torchvision's newest) and older numpy, and
# .venv's torch is the libtorch the Rust build links. Only what the harness imports is listed;
# of the cloud back-ends the peers declare, only S3's (boto3, for `run.py --remote`) is here,
# and the packages the peers import that `test` would otherwise bring into .venv (moto's boto3
# and requests, Ray's pyyaml), so that the `bench` purpose works on its own.
# Idempotent: a second run only checks the pins.
set -euo pipefail
cd "$(dirname "$0")/../.."

PINS=(
  pylance==14.0.2 lance-namespace==0.13.0 lance-namespace-urllib3-client==0.13.0
  mosaicml-streaming==0.13.0 torchvision==0.26.0 transformers==4.57.6 huggingface_hub==0.36.2
  safetensors==0.8.0 tokenizers==0.22.2 xxhash==3.8.2 zstd==1.5.7.2 brotli==1.2.1
  python-snappy==0.7.3 cramjam==2.14.0 tqdm==4.70.1 catalogue==2.0.10
  litdata==0.2.76 lightning-utilities==0.15.3
  webdataset==1.0.2 braceexpand==0.1.7
  scikit-image==0.26.0 pillow==13.0.0
  grain==0.2.18 array_record==0.8.6 cloudpickle==3.1.3 etils==1.15.0 portpicker==1.6.0 psutil==7.2.2
  zipp==4.1.2 absl-py==2.5.1
  packaging==25.0 boto3==1.44.8 botocore==1.44.8 s3transfer==0.19.3 jmespath==1.1.0
  python-dateutil==2.9.0.post0 six==1.17.0 urllib3==2.8.0 requests==2.34.2 certifi==2026.10.19.post1
  charset-normalizer==3.5.3 idna==3.20 pyyaml==6.0.4 regex==2026.11.19 lazy-loader==0.6
)
# .venv's own packages the peers use (installed there by scripts/setup.sh and scripts/python.sh).
BASE=(pyarrow==26.0.1 pytest==8.4.2)

test -x .venv/bin/python || { echo "50-peers: .venv is missing; scripts/setup.sh makes it first" >&2; exit 1; }
if [ ! -x .venv-peers/bin/python ]; then
  echo "setup: creating .venv-peers (the benchmark's peers)"
  .venv/bin/python -m venv .venv-peers
fi
SITE=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
PEERS_SITE=$(.venv-peers/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$SITE" >"$PEERS_SITE/_tessera_venv.pth"

pinned() { # exit 0 when every NAME==VERSION given is installed at that version
  .venv-peers/bin/python - "$@" <<'PYTHON'
import sys
from importlib.metadata import PackageNotFoundError, version
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    try:
        if version(name) != want:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PYTHON
}
if ! pinned "${BASE[@]}"; then
  .venv-peers/bin/pip install --quiet --disable-pip-version-check --no-deps "${BASE[@]}"
fi
if ! pinned "${PINS[@]}"; then
  echo "setup: installing the benchmark's peers into .venv-peers"
  .venv-peers/bin/pip install --quiet --disable-pip-version-check --no-deps "${PINS[@]}"
fi
.venv/bin/python -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '2.11.0')" ||
  { echo "50-peers: .venv's torch is no longer 2.11.0" >&2; exit 1; }
