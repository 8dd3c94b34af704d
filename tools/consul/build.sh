#!/usr/bin/env bash
# Builds the Consul agent used by topokit's tests, once, into a cache dir.
#
#   tools/consul/build.sh          # prints the binary's path on stdout
#
# The binary goes to $TOPOKIT_CONSUL when set, else to
# ${XDG_CACHE_HOME:-$HOME/.cache}/topokit/consul-v1.13.9/consul. When that
# file already exists and is executable nothing is built, so the script is
# idempotent and cheap to call from make and from the test helpers. Concurrent
# callers are serialised with flock (when available) and the binary is
# installed with an atomic rename, so nobody ever runs a half-written file.
#
# Before building, the script checks that the pinned module is
# github.com/hashicorp/consul v1.13.9 and that its LICENSE in the module cache
# is the Mozilla Public License 2.0: later Consul releases are under the
# Business Source License, which topokit must never use.
set -euo pipefail

want_version=v1.13.9
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${TOPOKIT_CONSUL:-${XDG_CACHE_HOME:-$HOME/.cache}/topokit/consul-${want_version}/consul}

if [[ -x $bin ]]; then
	echo "$bin"
	exit 0
fi

mkdir -p "$(dirname "$bin")"

# Serialise builds: the first caller builds, the others wait and reuse it.
if command -v flock >/dev/null 2>&1; then
	exec 9>"$bin.lock"
	flock 9
	if [[ -x $bin ]]; then
		echo "$bin"
		exit 0
	fi
fi

cd "$here"
# The tools module is separate from topokit's; ignore a workspace and any
# GOFLAGS that would let the build rewrite go.mod/go.sum.
export GOWORK=off
export GOFLAGS=-mod=readonly

go mod download github.com/hashicorp/consul
read -r mod_dir mod_version < <(go list -m -f '{{.Dir}} {{.Version}}' github.com/hashicorp/consul)
if [[ $mod_version != "$want_version" ]]; then
	echo "build.sh: tools/consul pins github.com/hashicorp/consul $mod_version, want $want_version" >&2
	exit 1
fi
license=$mod_dir/LICENSE
if [[ ! -f $license ]]; then
	echo "build.sh: $license is missing; refusing to build a Consul of unknown license" >&2
	exit 1
fi
if ! grep -q 'Mozilla Public License, version 2.0' "$license" || grep -qi 'Business Source License' "$license"; then
	echo "build.sh: $license is not MPL-2.0; refusing to build a BUSL-licensed Consul" >&2
	exit 1
fi

tmp=$bin.tmp.$$
trap 'rm -f "$tmp"' EXIT
echo "build.sh: building Consul $want_version (MPL-2.0) into $bin; this takes several minutes" >&2
go build -o "$tmp" github.com/hashicorp/consul
"$tmp" version >/dev/null
mv -f "$tmp" "$bin"
echo "$bin"
