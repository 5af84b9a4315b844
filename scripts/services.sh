#!/usr/bin/env bash
# Start PostgreSQL and Redis when they are not answering on 127.0.0.1 (the machine's own
# services), and install Prometheus, Alertmanager and node-exporter when missing (the tests
# start their own servers of them). The tests decide what a missing service means: skip, or fail under CI=true.
set -u

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }

wait_for() {  # name, check function
  for _ in $(seq 1 30); do "$2" && return 0; sleep 0.5; done
  echo "services: $1 did not come up" >&2
  return 1
}

if ! pg_up; then
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    echo "services: starting PostgreSQL" >&2
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start || true
    wait_for PostgreSQL pg_up || true
  else
    echo "services: PostgreSQL is not answering and pg_ctlcluster is not installed" >&2
  fi
fi

if ! redis_up; then
  if command -v redis-server >/dev/null 2>&1; then
    echo "services: starting Redis" >&2
    mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" \
      --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
    wait_for Redis redis_up || true
  else
    echo "services: Redis is not answering and redis-server is not installed" >&2
  fi
fi

"$(dirname "$0")/ensure_prometheus.sh" || true

# The browser tests (tests/web) drive Debian's Chromium; Playwright never downloads one.
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "services: installing chromium" >&2
    export DEBIAN_FRONTEND=noninteractive
    chromium() { apt-get install -y -q --no-install-recommends chromium >/dev/null; }
    chromium || { apt-get update -q >/dev/null && chromium; } \
      || echo "services: apt-get install chromium failed" >&2
  else
    echo "services: /usr/bin/chromium is missing and this is not root: install chromium" >&2
  fi
fi
exit 0
