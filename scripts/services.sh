#!/usr/bin/env bash
# Makes sure PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) answer,
# starting or installing them when they do not, and that the pgbouncer
# binary is installed (the tests start private ones: internal/pgbouncer),
# chromium (the console's browser test), podman with runc (the image
# test builds and runs the worker's container image), and promtool
# (internal/doccheck checks deploy/prometheus/alerts.yml with it), node and
# python3 with its cryptography package (internal/docsnippets).
# Exits non-zero when one cannot be had: tests must fail, never skip,
# without their services.
# Honors TEST_DATABASE_URL / TEST_REDIS_URL only for the checks' hosts when
# they point elsewhere (then nothing is started).
set -euo pipefail

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
redis_up() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = "PONG" ]; }

wait_for() { # name check
  for _ in $(seq 1 60); do "$2" && return 0; sleep 0.5; done
  echo "services: $1 did not come up" >&2; return 1
}

if ! command -v pg_isready >/dev/null || ! command -v redis-server >/dev/null; then
  echo "services: installing postgresql and redis-server" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql redis-server) >&2
fi

have_pgbouncer() { command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ]; }
if ! have_pgbouncer; then
  echo "services: installing pgbouncer" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer) >&2
  # The package's own service is not ours: it must not hold port 6432.
  { systemctl disable pgbouncer; systemctl stop pgbouncer; /etc/init.d/pgbouncer stop; } >/dev/null 2>&1 || true
fi
have_pgbouncer || { echo "services: pgbouncer is missing and could not be installed" >&2; exit 1; }

# The console's browser test (console/browser_test.go) drives Debian's
# chromium, headless.
if ! command -v chromium >/dev/null; then
  echo "services: installing chromium" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >&2
fi
command -v chromium >/dev/null || { echo "services: chromium is missing and could not be installed" >&2; exit 1; }

# The image test (cmd/worker/image_test.go) builds the image with
# scripts/image.sh and runs it with Debian's podman under runc.
if ! command -v podman >/dev/null || ! command -v runc >/dev/null; then
  echo "services: installing podman and runc" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc) >&2
fi
command -v podman >/dev/null && command -v runc >/dev/null ||
  { echo "services: podman or runc is missing and could not be installed" >&2; exit 1; }

# internal/doccheck runs promtool (Debian's prometheus package) on
# deploy/prometheus/alerts.yml and its unit tests.
if ! command -v promtool >/dev/null; then
  echo "services: installing prometheus (for promtool)" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus) >&2
  # The package's own server is not ours: it must not hold port 9090.
  { systemctl disable prometheus; systemctl stop prometheus; /etc/init.d/prometheus stop; } >/dev/null 2>&1 || true
  prometheus_on_9090() { command -v ss >/dev/null && ss -ltnpH 'sport = :9090' 2>/dev/null | grep -q prometheus; }
  for _ in $(seq 1 20); do prometheus_on_9090 || break; sleep 0.5; done
  ! prometheus_on_9090 || { echo "services: Debian's prometheus server still listens on :9090" >&2; exit 1; }
fi
command -v promtool >/dev/null || { echo "services: promtool is missing and could not be installed" >&2; exit 1; }

# internal/docsnippets runs the ed25519 snippets of docs/consumers.md with
# node and with a python3 that has the cryptography package (the one on
# PATH, or Debian's /usr/bin/python3 with python3-cryptography).
if ! command -v node >/dev/null; then
  echo "services: installing nodejs" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs) >&2
fi
command -v node >/dev/null || { echo "services: node is missing and could not be installed" >&2; exit 1; }
has_crypto() { command -v "$1" >/dev/null && "$1" -c 'import cryptography.hazmat.primitives.asymmetric.ed25519' 2>/dev/null; }
if ! has_crypto python3 && ! has_crypto /usr/bin/python3; then
  echo "services: installing python3-cryptography" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-cryptography) >&2
fi
has_crypto python3 || has_crypto /usr/bin/python3 ||
  { echo "services: no python3 with the cryptography package, and it could not be installed" >&2; exit 1; }

if [ -z "${TEST_DATABASE_URL:-}" ] && ! pg_up; then
  echo "services: starting PostgreSQL" >&2
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main start >&2 || true
  wait_for PostgreSQL pg_up
fi
if [ -z "${TEST_REDIS_URL:-}" ] && ! redis_up; then
  echo "services: starting Redis" >&2
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >&2
  wait_for Redis redis_up
fi
if [ -z "${TEST_DATABASE_URL:-}" ]; then pg_up || { echo "services: PostgreSQL unreachable" >&2; exit 1; }; fi
if [ -z "${TEST_REDIS_URL:-}" ]; then redis_up || { echo "services: Redis unreachable" >&2; exit 1; }; fi
echo "services: PostgreSQL and Redis are up; pgbouncer, chromium, podman, promtool, node and python3-cryptography are installed" >&2
