# Shared by scripts/setup and scripts/test: environment and idempotent set-up.
# shellcheck shell=bash

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# One target directory outside the clone, shared by developers' builds and CI.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/cowork-target}"
export COWORK_BIN="$CARGO_TARGET_DIR/debug/cowork"
MCP_DIR="$HOME/.cache/cowork-test/mcp"
MCP_EVERYTHING_VERSION="2026.8.31"
TEST_VENV="$HOME/.cache/cowork-test/venv"
# Real LLM servers for the provider tests: llama.cpp's server (OpenAI and
# Anthropic formats) and the LiteLLM proxy in front of it (Gemini format).
TEST_PYTHON_PACKAGES="xllamacpp==2026.10.11549 litellm[proxy]==1.106.2"

BUILD_PACKAGES="build-essential pkg-config cmake clang libclang-dev libopenblas-dev libx11-dev libxi-dev libxtst-dev
  libxkbcommon-dev libwayland-dev mold git python3 python3-pip ca-certificates"
RUNTIME_PACKAGES="libopenblas0 libgomp1 libx11-6 libxkbcommon-x11-0 libxcursor1 libxrandr2 libxi6 libgl1 libegl1 libgl1-mesa-dri
  dbus at-spi2-core"
# chromium (AT-SPI browser URLs), mpv + mpv-mpris (a real MPRIS player), GTK via python3-gi (password fields).
TEST_PACKAGES="xvfb xauth xdotool openbox xterm x11-utils xclip espeak-ng sox nodejs
  dbus-daemon wmctrl chromium mpv mpv-mpris python3-gi gir1.2-gtk-3.0 python3-venv gnome-keyring iproute2"

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Installs whichever of the given Debian packages are missing (apt-get update only when needed).
install_packages() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  # node may come from elsewhere (nodesource, a developer's own install); npm then comes with it.
  if command -v node >/dev/null 2>&1; then
    missing=("${missing[@]/nodejs}")
  fi
  local wanted=()
  for pkg in "${missing[@]}"; do [ -n "$pkg" ] && wanted+=("$pkg"); done
  if [ "${#wanted[@]}" -gt 0 ]; then
    log "installing Debian packages: ${wanted[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${wanted[@]}" >/dev/null
  fi
  if command -v node >/dev/null 2>&1 && ! command -v npm >/dev/null 2>&1; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
  fi
}

require_rust() {
  if ! command -v cargo >/dev/null 2>&1; then
    echo "cowork needs Rust 1.95 or newer: install it with rustup (https://rustup.rs), then run this again" >&2
    exit 1
  fi
  local version
  version="$(rustc --version | awk '{print $2}')"
  if [ "$(printf '%s\n1.95.0\n' "$version" | sort -V | head -n1)" != "1.95.0" ]; then
    echo "cowork needs Rust 1.95 or newer, found $version: run 'rustup update'" >&2
    exit 1
  fi
}

# The AVX2 build flag in .cargo/config.toml needs a CPU that has it.
require_avx2() {
  if ! grep -q avx2 /proc/cpuinfo; then
    echo "this CPU lacks AVX2, which the build enables for fast local inference (.cargo/config.toml)" >&2
    exit 1
  fi
}

setup_common() {
  local with_tests="$1"
  require_avx2
  if [ "$with_tests" = yes ]; then
    install_packages $BUILD_PACKAGES $RUNTIME_PACKAGES $TEST_PACKAGES
  else
    install_packages $BUILD_PACKAGES $RUNTIME_PACKAGES
  fi
  require_rust
  cd "$REPO"
  log "building (target dir $CARGO_TARGET_DIR)"
  if [ "$with_tests" = yes ]; then
    cargo test --no-run --quiet
  else
    cargo build --quiet --bin cowork
  fi
  log "installing models"
  python3 models/fetch --cowork "$COWORK_BIN"
}

setup_mcp_server() {
  local entry="$MCP_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
  if [ ! -f "$entry" ]; then
    log "installing the reference MCP server for tests"
    mkdir -p "$MCP_DIR"
    npm install --silent --no-audit --no-fund --prefix "$MCP_DIR" "@modelcontextprotocol/server-everything@$MCP_EVERYTHING_VERSION" >/dev/null
  fi
  export COWORK_TEST_MCP_EVERYTHING="$entry"
}

setup_llm_servers() {
  local stamp="$TEST_VENV/.cowork-installed"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$TEST_PYTHON_PACKAGES" ]; then
    log "installing llama.cpp's server (xllamacpp) and the LiteLLM proxy for tests"
    python3 -m venv "$TEST_VENV"
    # shellcheck disable=SC2086
    "$TEST_VENV/bin/pip" install --quiet $TEST_PYTHON_PACKAGES
    echo "$TEST_PYTHON_PACKAGES" > "$stamp"
  fi
  export COWORK_TEST_PYTHON="$TEST_VENV/bin/python"
}
