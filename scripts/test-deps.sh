#!/usr/bin/env bash
# Installs what the test suite needs on a fresh machine, once, before the
# tests start (so parallel test packages never race on apt):
#   - ZooKeeper 3.8 from Debian's `zookeeper` package (Java 17 is present);
#   - a Consul agent built from the MPL-2.0 release pinned in tools/consul;
#   - headless Chromium from Debian's `chromium` package (the ui package's
#     browser tests drive it).
# etcd needs nothing: the tests embed it.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -f /usr/share/java/zookeeper.jar ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "test-deps: installing ZooKeeper (Debian package zookeeper)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq zookeeper >/dev/null
  else
    echo "test-deps: ZooKeeper is missing: run 'sudo apt-get install zookeeper' (Debian/Ubuntu)" >&2
    exit 1
  fi
fi
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    echo "test-deps: installing Chromium (Debian package chromium)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium >/dev/null
  else
    echo "test-deps: Chromium is missing: run 'sudo apt-get install chromium' (Debian/Ubuntu)" >&2
    exit 1
  fi
fi

command -v java >/dev/null || { echo "test-deps: java is missing (ZooKeeper needs a JRE)" >&2; exit 1; }

bash tools/consul/build.sh
