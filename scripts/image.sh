#!/usr/bin/env bash
# Builds the worker's container image: a static binary (CGO_ENABLED=0,
# -trimpath, the version stamped so that `worker version` names it) on an
# empty base (Dockerfile), tagged fluxora-webhook-worker:VERSION.
#
#   scripts/image.sh [VERSION]
#
# VERSION defaults to `git describe --tags --always --dirty`. Podman (Debian's,
# with runc and the cgroupfs cgroup manager) is installed with apt-get when
# missing. Nothing is pulled: the Dockerfile copies the binary built here.
# Prints the image's name (fluxora-webhook-worker:VERSION) on stdout; the
# rest goes to stderr. IMAGE_NAME overrides the repository part of the name.
set -euo pipefail
cd "$(dirname "$0")/.."

version="${1:-$(git describe --tags --always --dirty)}"
if ! [[ "$version" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]]; then
  echo "image: version $version is not a valid image tag" >&2; exit 2
fi
image="${IMAGE_NAME:-fluxora-webhook-worker}:$version"

if ! command -v podman >/dev/null || ! command -v runc >/dev/null; then
  echo "image: installing podman and runc" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc) >&2
fi
command -v podman >/dev/null && command -v runc >/dev/null ||
  { echo "image: podman or runc is missing and could not be installed" >&2; exit 1; }

# The build context holds only what the Dockerfile copies.
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
echo "image: building the worker $version" >&2
CGO_ENABLED=0 go build -trimpath -buildvcs=true -ldflags "-s -w -X main.stampedVersion=$version" \
  -o "$ctx/worker" ./cmd/worker
chmod 0555 "$ctx/worker"
cp /etc/ssl/certs/ca-certificates.crt "$ctx/ca-certificates.crt"
printf 'root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n' >"$ctx/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$ctx/group"
chmod 0444 "$ctx/ca-certificates.crt" "$ctx/passwd" "$ctx/group"

echo "image: building $image" >&2
podman --runtime runc --cgroup-manager cgroupfs build --quiet --layers=false \
  --build-arg "VERSION=$version" -f Dockerfile -t "$image" "$ctx" >&2
echo "$image"
