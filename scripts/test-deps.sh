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

# need PACKAGE WHAT: installs the Debian package PACKAGE with apt-get when
# running as root, else fails naming it (WHAT says what it is for).
need() {
  if [ "$(id -u)" = 0 ]; then
    echo "test-deps: installing $2 (Debian package $1)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "$1" >/dev/null
  else
    echo "test-deps: $2 is missing: run 'sudo apt-get install $1' (Debian/Ubuntu)" >&2
    exit 1
  fi
}

[ -f /usr/share/java/zookeeper.jar ] || need zookeeper ZooKeeper
command -v chromium >/dev/null || need chromium Chromium

command -v java >/dev/null || { echo "test-deps: java is missing (ZooKeeper needs a JRE)" >&2; exit 1; }

bash tools/consul/build.sh
