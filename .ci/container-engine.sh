#!/usr/bin/env bash
# A container engine for test/package/container.test.ts (issue 14: packaging/Containerfile built
# and run): podman, and the Containerfile's base image. Prints, on stdout, the lines to eval
# (an `export CONTAINERS_CONF=…` when this machine needs one); everything else goes to stderr.
#
# This CI machine reaches Debian's archive but no container registry, so when the base image
# cannot be pulled it is made with debootstrap (minbase) from that archive and imported under
# the Containerfile's FROM name. And the sandbox CI runs in lacks CAP_SYS_RESOURCE and cgroup v2
# controllers: crun refuses to start a container (setrlimit, "cgroups in hybrid mode"). There,
# containers run under runc with the OCI config's rlimits left out, through a containers.conf of
# our own. On a normal machine neither workaround is used.
set -euo pipefail
BASE=docker.io/library/debian:bookworm-slim
MIRROR=${OB_PROXY_CI_DEBIAN_MIRROR:-http://deb.debian.org/debian}
log() { echo "container-engine: $*" >&2; }

need=()
for tool in podman runc debootstrap jq; do command -v "$tool" >/dev/null 2>&1 || need+=("$tool"); done
if [ "${#need[@]}" -gt 0 ]; then
  log "installing ${need[*]}"
  (apt-get update -qq && apt-get install -y -qq "${need[@]}") >/dev/null 2>&1 || log "could not install ${need[*]}"
fi
command -v podman >/dev/null 2>&1 || { log "no podman: the container test will fail"; exit 0; }

if ! podman image exists "$BASE"; then
  if ! timeout 60 podman pull -q "$BASE" >/dev/null 2>&1; then
    log "no registry: building $BASE with debootstrap from $MIRROR"
    root=$(mktemp -d)
    if debootstrap --variant=minbase bookworm "$root" "$MIRROR" >/dev/null 2>&1; then
      rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
      tar -C "$root" -c . | podman import -q - "$BASE" >/dev/null
    else
      log "debootstrap failed: the container test will fail"
    fi
    rm -rf "$root"
  fi
fi

if ! timeout 60 podman run --rm "$BASE" true >/dev/null 2>&1; then
  dir=/usr/local/lib/ob-proxy-ci
  mkdir -p "$dir"
  cat >"$dir/runc" <<'EOF'
#!/bin/sh
# runc, with the rlimits left out of the OCI config (run, create) or process (exec) it is given:
# no CAP_SYS_RESOURCE here.
prev=""
for a in "$@"; do
  file=""
  case "$prev" in
    --bundle | -b) file="$a/config.json" ;;
    --process | -p) file="$a" ;;
  esac
  if [ -n "$file" ] && [ -f "$file" ]; then
    jq 'del(.process.rlimits) | del(.rlimits)' "$file" >"$file.ci" && mv "$file.ci" "$file"
  fi
  prev="$a"
done
exec runc "$@"
EOF
  chmod 755 "$dir/runc"
  cat >"$dir/containers.conf" <<EOF
[engine]
runtime = "ci-runc"
[engine.runtimes]
ci-runc = ["$dir/runc"]
EOF
  if CONTAINERS_CONF="$dir/containers.conf" timeout 60 podman run --rm "$BASE" true >/dev/null 2>&1; then
    log "containers run under runc without rlimits here ($dir/containers.conf)"
    echo "export CONTAINERS_CONF=$dir/containers.conf"
  else
    log "podman cannot run a container here: the container test will fail"
  fi
fi
