#!/usr/bin/env bash
# Start the local servers the integration tests need, if they are installed and down.
# (On the development and CI machines they are normally already running.)
set -u
up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The Redis Cluster tests start redis-server processes of their own (tests/conftest.py,
# `redis_cluster`), so the binaries must be here even where Redis itself runs elsewhere.
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  { (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq redis-server >/dev/null; } \
    || echo "redis-server: not installed (the Redis Cluster tests skip, or fail in CI)"
fi

if ! up 6379 && command -v redis-server >/dev/null; then
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" \
    --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
fi
if ! up 5432 && command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
fi
if ! up 5672 && command -v rabbitmq-server >/dev/null; then
  rabbitmq-server -detached
fi
for i in $(seq 1 30); do
  up 6379 && up 5432 && break
  sleep 1
done
up 6379 && echo "redis: up" || echo "redis: down"
up 5432 && echo "postgres: up" || echo "postgres: down"
up 5672 && echo "rabbitmq: up" || echo "rabbitmq: down (RabbitMQ tests will skip or fail in CI)"
exit 0
