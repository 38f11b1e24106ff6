#!/usr/bin/env bash
# Installs the system tools metaeval uses: bubblewrap (sandbox), slirp4netns, iproute2 and
# util-linux (a sandbox allowed the network gets a namespace of its own), git, and chromium
# for the test that attacks the gateway from a real web page (tests/test_gateway_hostile.py),
# and docker-registry, the local registry `audit run --pull` is tested against
# (tests/test_audit_registry_pull.py).
# As root it installs them with apt-get; otherwise it says what to install.
set -euo pipefail
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v git >/dev/null 2>&1 || missing+=(git)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 ||
  missing+=(chromium)
command -v slirp4netns >/dev/null 2>&1 || missing+=(slirp4netns)
command -v nsenter >/dev/null 2>&1 || missing+=(util-linux)
[ -x /usr/bin/docker-registry ] || missing+=(docker-registry)
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || missing+=(iproute2)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "metaeval: please install: ${missing[*]} (e.g. sudo apt-get install ${missing[*]})" >&2
fi
