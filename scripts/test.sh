#!/usr/bin/env bash
# The whole test suite: formatting, vet, then every test with the race
# detector against a real PostgreSQL and Redis (started if needed).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi
go vet ./...
go test -race -count=1 -parallel 8 -timeout 20m "$@" ./...
