#!/usr/bin/env bash
# Makes a release, every artifact stamped with the same VERSION:
#   dist/VERSION/worker-linux-amd64, worker-linux-arm64   static binaries
#   dist/VERSION/fluxora-webhook-worker-VERSION.oci.tar   the image (podman load -i)
#   dist/VERSION/fluxora-webhook-worker-CHART.tgz         the Helm chart
#   dist/VERSION/SHA256SUMS                               their checksums
# and leaves the image tagged fluxora-webhook-worker:VERSION in podman's
# storage (scripts/image.sh), ready to push.
#
#   scripts/release.sh VERSION      e.g. v1.4.0 (SemVer, an optional v)
#
# DIST overrides dist/. Nothing is pushed or published.
set -euo pipefail
cd "$(dirname "$0")/.."

version="${1:-}"
if ! [[ "$version" =~ ^v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "usage: scripts/release.sh VERSION (SemVer such as v1.4.0 or 1.4.0-rc.1), got \"$version\"" >&2
  exit 2
fi
out="${DIST:-dist}/$version"
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)

for arch in amd64 arm64; do
  echo "release: worker-linux-$arch" >&2
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=true \
    -ldflags "-s -w -X main.stampedVersion=$version" -o "$out/worker-linux-$arch" ./cmd/worker
done

image=$(scripts/image.sh "$version")
echo "release: saving $image" >&2
podman --runtime runc --cgroup-manager cgroupfs save --quiet --format oci-archive \
  -o "$out/fluxora-webhook-worker-$version.oci.tar" "$image"

echo "release: packaging the chart" >&2
(cd tools && go run ./cmd/chartpkg ../deploy/helm/fluxora-webhook-worker "$version" "$out") >/dev/null

(cd "$out" && sha256sum -- * >SHA256SUMS)
echo "release: $out" >&2
ls -1 "$out"
