#!/usr/bin/env bash
# Builds, offline, the base container image metaeval's container tests use, and tags
# it with the names test tasks put in FROM. There is no image registry on this kind of
# machine, so the image is a Debian bookworm root made by debootstrap from the Debian
# mirror and imported into Podman. Cached: a second run only re-applies the tags.
#
#   bash scripts/container-base-image.sh          # build (once) and tag
#   METAEVAL_BASE_ROOTFS=DIR  where the debootstrap tree is kept (default below)
#
# Needs root, podman, runc and debootstrap (installed with apt-get when missing).
set -euo pipefail

IMAGE=localhost/metaeval-base:bookworm
# Names test tasks use in FROM. bookworm's python3 is 3.11, so python:3.11 is honest;
# the other names only need "a Debian with python3" in the tests.
TAGS=(python:3.11-slim python:3.11 python:3.12-slim debian:bookworm debian:bookworm-slim ubuntu:22.04)
ROOTFS=${METAEVAL_BASE_ROOTFS:-/var/cache/metaeval/bookworm-rootfs}
MIRROR=${METAEVAL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PACKAGES=python3,python3-pytest,ca-certificates

if [ "$(id -u)" != 0 ]; then
  echo "container-base-image: needs root (podman as root with the runc runtime)" >&2
  exit 1
fi

missing=()
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v runc >/dev/null 2>&1 || [ -x /usr/sbin/runc ] || missing+=(runc)
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# crun cannot create containers on a cgroups-hybrid host and the default ulimits are
# refused inside an unprivileged parent; a drop-in makes runc and no ulimits the default.
conf_dir=/etc/containers/containers.conf.d
if [ ! -f "$conf_dir/50-metaeval.conf" ]; then
  mkdir -p "$conf_dir"
  cat >"$conf_dir/50-metaeval.conf" <<'EOF'
# written by metaeval scripts/container-base-image.sh
[containers]
default_ulimits = []

[engine]
runtime = "runc"
EOF
fi

# The tags are stand-ins (a Debian root is not the real python:3.11-slim): the label tells
# the audit so, and it trusts what it sees in such an image no more than a bubblewrap run.
LABEL_KEY=org.metaeval.stand-in-for
LABEL_VALUE=$(IFS=,; echo "${TAGS[*]}")
if podman image exists "$IMAGE" &&
  [ "$(podman image inspect --format "{{index .Config.Labels \"$LABEL_KEY\"}}" "$IMAGE")" != "$LABEL_VALUE" ]; then
  podman rmi -f "$IMAGE" "${TAGS[@]}" >/dev/null 2>&1 || true  # made before the label existed
fi

if ! podman image exists "$IMAGE"; then
  if [ ! -x "$ROOTFS/usr/bin/python3" ]; then
    rm -rf "$ROOTFS.partial"
    mkdir -p "$(dirname "$ROOTFS")"
    echo "container-base-image: debootstrap bookworm into $ROOTFS (a few minutes)" >&2
    debootstrap --variant=minbase --include="$PACKAGES" bookworm "$ROOTFS.partial" "$MIRROR" \
      >"$(dirname "$ROOTFS")/debootstrap.log" 2>&1 || {
      echo "container-base-image: debootstrap failed, see $(dirname "$ROOTFS")/debootstrap.log" >&2
      exit 1
    }
    rm -rf "$ROOTFS.partial/var/cache/apt/archives/"*.deb
    mv "$ROOTFS.partial" "$ROOTFS"
  fi
  tar -C "$ROOTFS" -c . | podman import --change 'CMD ["/bin/bash"]' \
    --change "LABEL $LABEL_KEY=$LABEL_VALUE" - "$IMAGE" >/dev/null
fi

for tag in "${TAGS[@]}"; do
  podman tag "$IMAGE" "$tag"
done
echo "container-base-image: $IMAGE tagged as ${TAGS[*]}"
