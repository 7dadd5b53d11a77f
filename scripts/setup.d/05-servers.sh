#!/usr/bin/env bash
# needed by: test
# The local object-storage test servers: moto (S3) into .venv and Azurite into
# .tools/azurite (scripts/servers.sh install; TESSERA_SKIP_SERVERS=1 skips them). In CI a
# failed install is an error; elsewhere their storage tests are skipped with a warning.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "${TESSERA_SKIP_SERVERS:-0}" != 1 ] || exit 0
if ! bash scripts/servers.sh install; then
  case ${CI:-} in
    ""|false|0) echo "setup: WARNING: test servers not installed; S3/Azure storage tests will be skipped" >&2 ;;
    *) echo "setup: installing the S3/Azure test servers failed (scripts/servers.sh install)" >&2; exit 1 ;;
  esac
fi
