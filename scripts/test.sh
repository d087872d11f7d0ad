#!/usr/bin/env bash
# The whole test suite: formatting, vet, then every test with the race
# detector against a real PostgreSQL and Redis (started if needed).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh
# -trimpath (for every go command below, and the worker binary the
# cmd/worker tests build with go build) keeps compiled packages free of the
# checkout's directory: a fresh clone, or another worktree, reuses the
# build cache instead of compiling every package of the module again.
GOFLAGS="$(go env GOFLAGS)"
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi
go vet ./...
# The fault tests append their figures here; shown after a passing run.
FLUXORA_FIGURES=$(mktemp)
export FLUXORA_FIGURES
trap 'rm -f "$FLUXORA_FIGURES"' EXIT
# The longest packages first (cmd/worker, whose soak alone runs 30 s, then
# outbox): go test starts packages in the order they are named, and -p 3
# runs three test binaries at once (the default is one per core, two here),
# which mostly wait on PostgreSQL, Redis and worker processes.
go test -race -count=1 -parallel 8 -p 3 -timeout 20m "$@" ./cmd/worker ./outbox ./...
# tools/ is a module of its own (helm and the Kubernetes API types, kept
# out of the worker's module): the Helm chart's lint, render and checks.
(cd tools && go vet ./... && go test -race -count=1 -timeout 10m ./...)
if [ -s "$FLUXORA_FIGURES" ]; then
  echo "== fault suite figures"
  sort -s -k1,1 "$FLUXORA_FIGURES"
fi
