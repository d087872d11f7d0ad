#!/usr/bin/env bash
# The whole test suite: formatting, vet, then every test with the race
# detector against a real PostgreSQL and Redis (started if needed).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi
go vet ./...
# The fault tests append their figures here; shown after a passing run.
FLUXORA_FIGURES=$(mktemp)
export FLUXORA_FIGURES
trap 'rm -f "$FLUXORA_FIGURES"' EXIT
go test -race -count=1 -parallel 8 -timeout 20m "$@" ./...
if [ -s "$FLUXORA_FIGURES" ]; then
  echo "== fault suite figures"
  sort -s -k1,1 "$FLUXORA_FIGURES"
fi
