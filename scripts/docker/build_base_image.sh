#!/usr/bin/env bash
# Build the offline CPU base image for PostTrainBench task environments.
#
#   scripts/docker/build_base_image.sh [--force] [--image NAME]
#
# Stage 1: `debootstrap --variant=minbase bookworm` (+ python3, venv, pip, certificates,
#          procps) -> `docker import` as NAME-rootfs. The debootstrap tree is cached as a
#          tarball under $PTB_DOCKER_CACHE (default /var/cache/ptb-docker), so reruns skip it.
# Stage 2: `docker build --network host` on top: installs torch 2.13.0 CPU from the
#          local wheel (copied out with `python3.11 -m pip download`, no CUDA download),
#          then the task's heavy requirements into the system python3.11, so that a task
#          build's `python3 -m venv --system-site-packages` + `pip install -r` is a no-op.
#          A second layer adds what agent tasks need (src/posttrainbench/service): git
#          (apt) and the evaluation service's requirements (fastapi, uvicorn, ...), so an
#          agent task's image also builds without reaching the package index. A third
#          adds the agent CLIs (Claude Code, Codex, Gemini CLI, OpenCode) at the versions
#          pinned in src/posttrainbench/host/tasks/data/gpu_image.json with their lock file,
#          on the pinned Node.js (the npm registry's `node` package), under
#          /opt/agent-clis (on PATH): Harbor's installed agents find them there and skip
#          their own download.
#
# Idempotent: skips when NAME exists and carries the label of the same requirements
# (sha256 of the requirement files), unless --force. Prints the elapsed time.
set -euo pipefail
source "$(dirname "$0")/../lib/help.sh"
print_help_if_asked "$0" "$@"

image=posttrainbench/cpu-base:bookworm
force=0
while [ $# -gt 0 ]; do
    case "$1" in
        --force) force=1 ;;
        --image) image=$2; shift ;;
        *) echo "build_base_image: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${PTB_DOCKER_CACHE:-/var/cache/ptb-docker}
suite=bookworm
# The Debian archive and security archive this machine's apt uses (deb822 `URIs:` or
# one-line `deb` sources); PTB_DEBIAN_MIRROR and PTB_DEBIAN_SECURITY override them.
host_apt_uris() {
    { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}'
      grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}'; } || true
}
mirror=${PTB_DEBIAN_MIRROR:-$(host_apt_uris | grep -v -- '-security' | head -n1 || true)}
security=${PTB_DEBIAN_SECURITY:-$(host_apt_uris | grep -- '-security' | head -n1 || true)}
torch_version=2.13.0
rootfs_image="${image%%:*}-rootfs:${image##*:}"
start=$(date +%s)

die() { echo "build_base_image: $*" >&2; exit 1; }
docker info >/dev/null 2>&1 || die "no Docker engine; run scripts/docker/setup_engine.sh"
[ -n "$mirror" ] || die "no Debian archive in this machine's apt sources; set PTB_DEBIAN_MIRROR"

# The requirements baked in: the task payload's (the compiler copies the same files).
eval_dir="$repo/src/posttrainbench/task/evaluation"
reqs="$eval_dir/requirements.txt"
nodeps="$eval_dir/requirements-nodeps.txt"   # optional
judge="$eval_dir/requirements-judge.txt"     # LLM-judged benchmarks' verifier needs
[ -f "$reqs" ] || die "missing $reqs"
# The agent CLIs: the task template's lock file and install step, and the pins' package.json.
clis="$repo/src/posttrainbench/host/tasks/templates/environment/agent_clis"
[ -x "$repo/.venv/bin/python" ] || die "run scripts/setup.sh first (the pins are read with the package)"
clis_package=$("$repo/.venv/bin/python" -m posttrainbench.host.tasks.gpu_image package-json) \
    || die "could not read the agent CLI pins"
node_version=$("$repo/.venv/bin/python" -m posttrainbench.host.tasks.gpu_image node) || die "could not read the Node.js pin"
# A Mode A agent task's evaluation service requirements, as the agent-task compiler writes them.
service=$("$repo/.venv/bin/python" -c 'from posttrainbench.host.agent_tasks.compiler import SERVICE_REQUIREMENTS as r; print("\n".join(r))') \
    || die "could not read the agent-task service requirements"
req_sha=$( { cat "$reqs"; [ -f "$nodeps" ] && cat "$nodeps"; [ -f "$judge" ] && cat "$judge"; echo "$service"; cat "$0";
             cat "$clis/package-lock.json" "$clis/install.sh"; echo "$clis_package $node_version"; } \
    | sha256sum | cut -c1-16)

if [ "$force" = 0 ] && docker image inspect "$image" >/dev/null 2>&1; then
    have=$(docker image inspect -f '{{ index .Config.Labels "ptb.requirements-sha" }}' "$image")
    if [ "$have" = "$req_sha" ]; then
        echo "base image $image is up to date (requirements $req_sha); --force rebuilds"
        exit 0
    fi
    echo "base image $image has requirements ${have:-?}, want $req_sha: rebuilding"
fi

# Stage 1: the Debian root filesystem (cached).
mkdir -p "$cache"
rootfs_tar="$cache/$suite-minbase-python3.tar"
if [ "$force" = 1 ] || [ ! -s "$rootfs_tar" ]; then
    command -v debootstrap >/dev/null || {
        apt-get update -qq >/dev/null; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    }
    dir=$(mktemp -d "$cache/rootfs.XXXXXX")
    echo "debootstrap $suite into $dir ..."
    debootstrap --variant=minbase \
        --include=python3,python3-venv,python3-pip,ca-certificates,procps,bash \
        "$suite" "$dir" "$mirror" > "$cache/debootstrap.log" 2>&1 \
        || { rm -rf "$dir"; die "debootstrap failed; see $cache/debootstrap.log"; }
    # Same apt sources as a stock debian image; drop apt's package lists to stay small.
    cat > "$dir/etc/apt/sources.list" <<SOURCES
deb $mirror $suite main
deb $mirror $suite-updates main
SOURCES
    if [ -n "$security" ]; then echo "deb $security $suite-security main" >> "$dir/etc/apt/sources.list"; fi
    rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/archives/*.deb
    tar -C "$dir" -cf "$rootfs_tar.tmp" . && mv "$rootfs_tar.tmp" "$rootfs_tar"
    rm -rf "$dir"
fi
if [ "$force" = 1 ] || ! docker image inspect "$rootfs_image" >/dev/null 2>&1; then
    docker import -c 'CMD ["bash"]' -c 'ENV LANG=C.UTF-8' "$rootfs_tar" "$rootfs_image" >/dev/null
fi

# Stage 2: torch CPU from the local wheel + the heavy requirements.
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/wheels"
wheel_cache="$cache/wheels"
mkdir -p "$wheel_cache"
if ! ls "$wheel_cache"/torch-"$torch_version"+cpu-cp311-*.whl >/dev/null 2>&1; then
    command -v python3.11 >/dev/null || die "python3.11 is needed to fetch the CPU torch wheel"
    python3.11 -m pip download --quiet "torch==$torch_version" --no-deps -d "$wheel_cache"
fi
wheel=$(ls "$wheel_cache"/torch-"$torch_version"*cp311*.whl | head -n1)
case "$wheel" in *+cpu*) ;; *) die "torch wheel $wheel is not a CPU build" ;; esac
ln "$wheel" "$ctx/wheels/" 2>/dev/null || cp "$wheel" "$ctx/wheels/"
# torch is pinned, and never taken from the requirement files (it comes from the wheel).
{ cat "$reqs"; [ -f "$judge" ] && cat "$judge"; } | grep -viE '^\s*torch([<>=!~ ;[]|$)' > "$ctx/requirements.txt" || true
if [ -f "$nodeps" ]; then cp "$nodeps" "$ctx/requirements-nodeps.txt"; else : > "$ctx/requirements-nodeps.txt"; fi
echo "torch==$torch_version" > "$ctx/constraints.txt"
echo "$service" > "$ctx/requirements-service.txt"
mkdir -p "$ctx/agent-clis"
cp "$clis/package-lock.json" "$clis/install.sh" "$ctx/agent-clis/"
echo "$clis_package" > "$ctx/agent-clis/package.json"
# The build reaches the package index through this host's network, which may intercept
# TLS with its own CA: trust the host's bundle during the build only (not in the image).
host_ca=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
cp "$host_ca" "$ctx/host-ca.crt"
cat > "$ctx/Dockerfile" <<DOCKERFILE
FROM $rootfs_image
ENV LANG=C.UTF-8 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY wheels/ /tmp/wheels/
COPY requirements.txt requirements-nodeps.txt constraints.txt host-ca.crt /tmp/ptb-base/
RUN export PIP_CERT=/tmp/ptb-base/host-ca.crt PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore \\
           PIP_BREAK_SYSTEM_PACKAGES=1 PIP_PROGRESS_BAR=off \\
    && python3 -m pip install --quiet /tmp/wheels/torch-*.whl \\
    && python3 -m pip install --quiet -c /tmp/ptb-base/constraints.txt -r /tmp/ptb-base/requirements.txt \\
    && if [ -s /tmp/ptb-base/requirements-nodeps.txt ]; then \\
           python3 -m pip install --quiet --no-deps -r /tmp/ptb-base/requirements-nodeps.txt; fi \\
    && python3 -c "import torch; assert not torch.version.cuda, torch.version.cuda; print('torch', torch.__version__)" \\
    && rm -rf /tmp/wheels /tmp/ptb-base /root/.cache
# Agent tasks: a separate layer, so that changing it reuses the (large) layer above. It
# adds packages but never changes an installed one (their versions are the constraints).
COPY requirements-service.txt host-ca.crt /tmp/ptb-agent/
RUN export DEBIAN_FRONTEND=noninteractive PIP_CERT=/tmp/ptb-agent/host-ca.crt PIP_NO_CACHE_DIR=1 \\
           PIP_ROOT_USER_ACTION=ignore PIP_BREAK_SYSTEM_PACKAGES=1 PIP_PROGRESS_BAR=off \\
    && apt-get update -qq && apt-get install -y -qq --no-install-recommends git >/dev/null \\
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \\
    && python3 -m pip list --format=freeze > /tmp/ptb-agent/installed.txt \\
    && python3 -m pip install --quiet -c /tmp/ptb-agent/installed.txt -r /tmp/ptb-agent/requirements-service.txt \\
    && git --version && setpriv --version && python3 -c "import fastapi, uvicorn, yaml" \\
    && rm -rf /tmp/ptb-agent /root/.cache
# The agent CLIs: Debian's npm installs the pinned Node.js (the registry's `node` package;
# Debian's own is too old for Gemini CLI), then the CLIs from the lock file (their native
# parts from their platform packages; no download script runs).
COPY agent-clis/ /opt/agent-clis/
COPY host-ca.crt /tmp/ptb-clis/
RUN export DEBIAN_FRONTEND=noninteractive npm_config_cafile=/tmp/ptb-clis/host-ca.crt \\
    && apt-get update -qq && apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null \\
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \\
    && npm install -g --no-fund --no-audit --loglevel=error node@$node_version \\
    && hash -r && test "\$(node --version)" = "v$node_version" \\
    && bash /opt/agent-clis/install.sh \\
    && chmod -R a+rX /opt/agent-clis && rm -rf /tmp/ptb-clis /root/.npm
ENV PATH=\$PATH:/opt/agent-clis/node_modules/.bin
LABEL ptb.requirements-sha=$req_sha ptb.torch=$torch_version+cpu
CMD ["bash"]
DOCKERFILE
echo "docker build $image (torch $torch_version CPU + $(basename "$reqs")) ..."
old_id=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
DOCKER_BUILDKIT=0 docker build --network host --force-rm -q -t "$image" "$ctx" \
    >/dev/null 2>"$cache/build.log" || { cat "$cache/build.log" >&2; die "docker build failed"; }
if [ -n "$old_id" ] && [ "$old_id" != "$(docker image inspect -f '{{.Id}}' "$image")" ]; then
    docker rmi "$old_id" >/dev/null 2>&1 || true   # the replaced image, unless still in use
fi
echo "built $image in $(( $(date +%s) - start ))s ($(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%.1f GB", $1/1e9}'))"
