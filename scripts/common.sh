# Shared by scripts/setup and scripts/test: environment and idempotent set-up.
# shellcheck shell=bash

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# One target directory outside the clone, shared by developers' builds and CI.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/cowork-target}"
export COWORK_BIN="$CARGO_TARGET_DIR/debug/cowork"
# What users run: the `user` profile (Cargo.toml), built by scripts/setup.
export COWORK_USER_BIN="$CARGO_TARGET_DIR/user/cowork"
MCP_DIR="$HOME/.cache/cowork-test/mcp"
APPS_TOOLCHAIN_DIR="$HOME/.cache/cowork-test/apps"
COMPONENTIZE_JS_VERSION="0.23.0"
# componentize-py builds the Python example app (assets/sdk/examples/window-log), in its own venv.
APPS_PY_VENV="$HOME/.cache/cowork-test/apps-py"
COMPONENTIZE_PY_PACKAGES="componentize-py==0.25.1"
MCP_EVERYTHING_VERSION="2026.8.31"
MCP_INSPECTOR_VERSION="2.12.0"
MCP_FILESYSTEM_VERSION="2026.8.31"
# The built-in Browser integration (src/mcp/browser.rs PLAYWRIGHT_MCP_VERSION).
MCP_PLAYWRIGHT_VERSION="0.0.83"
TEST_VENV="$HOME/.cache/cowork-test/venv"
# Real LLM servers for the provider tests: llama.cpp's server (OpenAI and
# Anthropic formats) and the LiteLLM proxy in front of it (Gemini format).
TEST_PYTHON_PACKAGES="xllamacpp==2026.10.11549 litellm[proxy]==1.106.2 mcp==2.3.0"
# A real ActivityWatch server for the export test, in its own venv: it needs
# peewee<4 and flask<2.3 (see ../shared/PEERS.md), which the LLM servers must not get.
AW_VENV="$HOME/.cache/cowork-test/aw-venv"
AW_PYTHON_PACKAGES="aw-server==0.12.0 aw-client==0.5.15 peewee<4 flask<2.3"
# The documents tests' independent implementations (issue 44): openpyxl, python-docx and
# python-pptx write and read back what cowork reads and writes; pypdf encrypts a PDF.
DOCS_VENV="$HOME/.cache/cowork-test/docs-venv"
DOCS_PYTHON_PACKAGES="openpyxl==3.1.5 python-docx==1.1.2 python-pptx==1.0.2 pypdf==5.1.0"
# uv, whose uvx starts the integrations catalog's Python reference servers (issue 45), in its
# own venv; only uv and uvx go on the suite's PATH (the venv's python must not shadow Debian's).
UV_VENV="$HOME/.cache/cowork-test/uv-venv"
# A real CalDAV server for the calendar test (issue 58), in its own venv.
CAL_VENV="$HOME/.cache/cowork-test/cal-venv"
CAL_PYTHON_PACKAGES="radicale==3.2.3"
UV_PYTHON_PACKAGES="uv==0.13.9"

BUILD_PACKAGES="build-essential pkg-config cmake clang libclang-dev libopenblas-dev libx11-dev libxi-dev libxtst-dev
  libxkbcommon-dev libwayland-dev libasound2-dev libssl-dev mold git python3 python3-pip ca-certificates"
RUNTIME_PACKAGES="libopenblas0 libgomp1 libx11-6 libxkbcommon-x11-0 libxcursor1 libxrandr2 libxi6 libgl1 libegl1 libgl1-mesa-dri
  libasound2 libssl3 dbus at-spi2-core libtesseract5 tesseract-ocr-eng"
# chromium (AT-SPI browser URLs), mpv + mpv-mpris (a real MPRIS player), GTK via python3-gi (password fields),
# pulseaudio + pulseaudio-utils (a real sound server with null sinks as the microphone and speakers; paplay);
# sway, foot, wtype, wl-clipboard, xwayland (wlroots headless, its clients and XWayland beside it), weston
# (the compositor cowork has no backend for), wayland-utils (wayland-info, to see what a compositor offers),
# kwin-wayland (KDE Plasma's compositor, headless with --virtual: cowork's KWin script; libkf5service-bin's
# kbuildsycoca5 builds the service cache KWin's screenshot permission reads), gnome-shell and gjs
# (GNOME Shell 43 headless with cowork's extension; gjs runs its notification helper), desktop-file-utils
# (desktop-file-validate checks the desktop entry the portal's host registry needs); appstream and man-db
# (the package check validates the metainfo and finds the man page as a user would); tesseract-ocr
# (the CLI, the peer's way of reading screenshots, side by side in scripts/measure-ocr).
TEST_PACKAGES="xvfb xauth xdotool openbox xterm x11-utils xclip espeak-ng sox nodejs time faketime
  dbus-daemon wmctrl chromium mpv mpv-mpris python3-gi gir1.2-gtk-3.0 python3-venv gnome-keyring iproute2
  pulseaudio pulseaudio-utils dunst sqlite3 sway foot wtype wl-clipboard xwayland weston wayland-utils
  kwin-wayland libkf5service-bin gnome-shell gjs desktop-file-utils appstream man-db
  libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui tesseract-ocr"

# The Debian package's builder (scripts/package), installed with cargo when missing.
CARGO_DEB_VERSION="3.8.0"

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# Runs one named step of the set-up, saying when it starts and how long it took,
# and remembers the time for the summary at the end. A failing step ends the
# script (set -e stays in force inside it); the EXIT trap names it.
STEP_TIMES=()
CURRENT_STEP=""
step() {
  CURRENT_STEP="$1"; shift
  CURRENT_STEP_START=$SECONDS
  log "$CURRENT_STEP"
  "$@"
  record_step done
  CURRENT_STEP=""
}

record_step() {
  local took=$((SECONDS - CURRENT_STEP_START))
  STEP_TIMES+=("$(printf '%-48s %3d min %02d s  %s' "$CURRENT_STEP" $((took / 60)) $((took % 60)) "$1")")
  printf '    %s: %s in %d min %02d s\n' "$CURRENT_STEP" "$1" $((took / 60)) $((took % 60)) >&2
}

on_exit() {
  local status=$?
  if [ "$status" -ne 0 ] && [ -n "$CURRENT_STEP" ]; then
    record_step "FAILED (exit $status)"
    step_summary
  fi
}
trap on_exit EXIT

step_summary() {
  log "time per step"
  printf '    %s\n' "${STEP_TIMES[@]}" >&2
}

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
  if [ "${#wanted[@]}" -eq 0 ]; then
    echo "    all ${#@} packages are installed" >&2
  else
    echo "    installing ${#wanted[@]} missing packages: ${wanted[*]}" >&2
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

build() {
  local with_tests="$1"
  if [ ! -x "$COWORK_BIN" ]; then
    log "first build: about 20 minutes on a 2-core machine (less with more cores); cargo shows its progress"
  fi
  log "target dir $CARGO_TARGET_DIR"
  if [ "$with_tests" = yes ]; then
    cargo test --no-run
  else
    cargo build --profile user --bin cowork
  fi
}

# CI builds and smoke-tests the user build only when an earlier build left its
# dependencies compiled (a cold one would add ~23 min to CI); scripts/setup builds it.
smoke_user_build() {
  if [ ! -x "$COWORK_USER_BIN" ]; then
    echo "    no earlier user build in $CARGO_TARGET_DIR/user: skipped (scripts/setup builds it)" >&2
    return 0
  fi
  cargo build --profile user --bin cowork
  local data answer
  data="$(mktemp -d)"
  local run=("$COWORK_USER_BIN" --data-dir "$data" --models-dir "$REPO/models")
  # Capture to the store, embeddings and the vector index, search, the local model.
  COWORK_LOG=error "${run[@]}" capture simulate --script "$REPO/assets/scripts/grounded-morning.jsonl" >&2
  COWORK_LOG=error "${run[@]}" memory embed >&2
  grep -q LH1723 <<< "$(COWORK_LOG=error "${run[@]}" search "flight to Lisbon")" || { echo "search did not find the flight" >&2; rm -rf "$data"; return 1; }
  answer="$(COWORK_LOG=error "${run[@]}" ask --forget --json --local-model smollm2-135m-instruct "Which flight was I looking at?")"
  rm -rf "$data"
  echo "    $answer" >&2
  python3 -c 'import json, sys; a = json.loads(sys.argv[1]); sys.exit(0 if a["answer"].strip() and a["completion_tokens"] > 0 else "empty answer")' "$answer"
}

# CI builds the Debian package from the warm user build, installs it, checks
# it as a fresh unprivileged user and removes it (scripts/package, scripts/check-package).
package_when_warm() {
  if [ ! -x "$COWORK_USER_BIN" ]; then
    echo "    no earlier user build in $CARGO_TARGET_DIR/user: skipped (scripts/setup builds it)" >&2
    return 0
  fi
  "$REPO/scripts/package" > /dev/null
  "$REPO/scripts/check-package"
}

setup_common() {
  local with_tests="$1"
  require_avx2
  require_rust
  if [ "$with_tests" = yes ]; then
    step "Debian packages" install_packages $BUILD_PACKAGES $RUNTIME_PACKAGES $TEST_PACKAGES
  else
    step "Debian packages" install_packages $BUILD_PACKAGES $RUNTIME_PACKAGES
  fi
  cd "$REPO"
  step "build" build "$with_tests"
  [ "$with_tests" = yes ] || COWORK_BIN="$COWORK_USER_BIN"
  [ "$with_tests" = yes ] || step "the Browser integration (@playwright/mcp $MCP_PLAYWRIGHT_VERSION, driving Debian's chromium)" setup_browser_integration
  # The tests also exercise the optional multilingual speech model (its conversion, install and accuracy).
  local optional=()
  [ "$with_tests" = yes ] && optional=(--with whisper-base)
  step "models (chat, embeddings, speech; about 760 MB, 1.4 GB once converted)" python3 models/fetch --cowork "$COWORK_BIN" "${optional[@]}"
}

# The built-in Browser integration for the user: Playwright's MCP server where
# cowork looks for it (src/mcp/browser.rs). It needs npm and chromium; without
# them it says how, and the rest of cowork works as before.
setup_browser_integration() {
  local prefix="${XDG_DATA_HOME:-$HOME/.local/share}/cowork/integrations/playwright-mcp"
  if ! command -v npm >/dev/null || [ ! -x /usr/bin/chromium ]; then
    echo "    skipped: it needs npm and chromium (apt install npm chromium), then run scripts/setup again" >&2
    return 0
  fi
  npm install --silent --no-audit --no-fund --prefix "$prefix" "@playwright/mcp@$MCP_PLAYWRIGHT_VERSION" >/dev/null
  echo "    installed in $prefix; Settings → Integrations → Add the Browser turns it on" >&2
}

setup_mcp_server() {
  local entry="$MCP_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
  local inspector="$MCP_DIR/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
  local filesystem="$MCP_DIR/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
  local playwright="$MCP_DIR/node_modules/@playwright/mcp/cli.js"
  local stamp="$MCP_DIR/.cowork-installed"
  local wanted="everything@$MCP_EVERYTHING_VERSION inspector@$MCP_INSPECTOR_VERSION filesystem@$MCP_FILESYSTEM_VERSION playwright-mcp@$MCP_PLAYWRIGHT_VERSION"
  if [ -f "$entry" ] && [ -f "$inspector" ] && [ -f "$filesystem" ] && [ -f "$playwright" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$wanted" ]; then
    echo "    installed in $MCP_DIR" >&2
  else
    echo "    npm install server-everything@$MCP_EVERYTHING_VERSION, server-filesystem@$MCP_FILESYSTEM_VERSION and inspector@$MCP_INSPECTOR_VERSION into $MCP_DIR" >&2
    mkdir -p "$MCP_DIR"
    npm install --silent --no-audit --no-fund --prefix "$MCP_DIR" \
      "@modelcontextprotocol/server-everything@$MCP_EVERYTHING_VERSION" "@modelcontextprotocol/server-filesystem@$MCP_FILESYSTEM_VERSION" \
      "@modelcontextprotocol/inspector@$MCP_INSPECTOR_VERSION" "@playwright/mcp@$MCP_PLAYWRIGHT_VERSION" >/dev/null
    echo "$wanted" > "$stamp"
  fi
  # The integrations catalog starts reference servers with `npx -y package@version`: its pinned
  # Files server is put in an npx cache here once, and the suite's npx uses that cache (no network).
  local npx_cache="$MCP_DIR/npx-cache"
  local catalog_files
  catalog_files="$(python3 -c 'import json; e=[i for i in json.load(open("assets/integrations.json"))["integrations"] if i["id"]=="filesystem"][0]; print(e["package"] + "@" + e["version"])')"
  if [ "$(cat "$npx_cache/.cowork-warmed" 2>/dev/null)" != "$catalog_files" ]; then
    echo "    npx cache: $catalog_files" >&2
    mkdir -p "$npx_cache"
    timeout 300 env npm_config_cache="$npx_cache" npx -y "$catalog_files" "$MCP_DIR" < /dev/null > /dev/null 2>&1 || true
    echo "$catalog_files" > "$npx_cache/.cowork-warmed"
  fi
  export npm_config_cache="$npx_cache" npm_config_prefer_offline=true npm_config_update_notifier=false
  export COWORK_TEST_MCP_EVERYTHING="$entry"
  # The reference filesystem server: paths outside its roots are refused.
  export COWORK_TEST_MCP_FILESYSTEM="$filesystem"
  # Playwright's MCP server for the built-in Browser (it drives Debian's chromium).
  export COWORK_PLAYWRIGHT_MCP="$playwright"
  # The MCP Inspector's command-line client (`--cli`): a client no one here wrote.
  export COWORK_TEST_MCP_INSPECTOR="$inspector"
}

# The JavaScript toolchain the tests build the example apps with (npm's
# @bytecodealliance/componentize-js: JavaScript to a WebAssembly component).
setup_app_toolchain() {
  local entry="$APPS_TOOLCHAIN_DIR/node_modules/@bytecodealliance/componentize-js/package.json"
  local stamp="$APPS_TOOLCHAIN_DIR/.cowork-installed"
  if [ -f "$entry" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$COMPONENTIZE_JS_VERSION" ]; then
    echo "    installed in $APPS_TOOLCHAIN_DIR" >&2
  else
    echo "    npm install @bytecodealliance/componentize-js@$COMPONENTIZE_JS_VERSION into $APPS_TOOLCHAIN_DIR" >&2
    mkdir -p "$APPS_TOOLCHAIN_DIR"
    npm install --silent --no-audit --no-fund --prefix "$APPS_TOOLCHAIN_DIR" "@bytecodealliance/componentize-js@$COMPONENTIZE_JS_VERSION" >/dev/null
    echo "$COMPONENTIZE_JS_VERSION" > "$stamp"
  fi
  export COWORK_TEST_COMPONENTIZE_JS="$APPS_TOOLCHAIN_DIR/node_modules"
  setup_venv "$APPS_PY_VENV" "$COMPONENTIZE_PY_PACKAGES"
  export COWORK_TEST_COMPONENTIZE_PY="$APPS_PY_VENV/bin/componentize-py"
}

# A Python venv at $1 holding the packages $2, (re)installed when $2 changed.
setup_venv() {
  local venv="$1" packages="$2"
  local stamp="$venv/.cowork-installed"
  if [ "$(cat "$stamp" 2>/dev/null)" = "$packages" ]; then
    echo "    installed in $venv" >&2
  else
    echo "    pip install $packages into $venv" >&2
    python3 -m venv "$venv"
    # shellcheck disable=SC2086
    "$venv/bin/pip" install --quiet $packages
    echo "$packages" > "$stamp"
  fi
}

setup_llm_servers() {
  setup_venv "$TEST_VENV" "$TEST_PYTHON_PACKAGES"
  export COWORK_TEST_PYTHON="$TEST_VENV/bin/python"
}

setup_uv() {
  setup_venv "$UV_VENV" "$UV_PYTHON_PACKAGES"
  local bin="$HOME/.cache/cowork-test/uv-bin" cache="$HOME/.cache/cowork-test/uv-cache"
  mkdir -p "$bin" "$cache"
  ln -sf "$UV_VENV/bin/uv" "$bin/uv"
  ln -sf "$UV_VENV/bin/uvx" "$bin/uvx"
  # The catalog's pinned Time server, fetched into uv's cache once; the suite's uvx then runs offline.
  local catalog_time
  catalog_time="$(python3 -c 'import json; e=[i for i in json.load(open("assets/integrations.json"))["integrations"] if i["id"]=="time"][0]; print(e["package"] + "@" + e["version"])')"
  if [ "$(cat "$cache/.cowork-warmed" 2>/dev/null)" != "$catalog_time" ]; then
    echo "    uv cache: $catalog_time" >&2
    timeout 300 env UV_CACHE_DIR="$cache" "$bin/uvx" "$catalog_time" --help > /dev/null 2>&1 || true
    echo "$catalog_time" > "$cache/.cowork-warmed"
  fi
  export PATH="$bin:$PATH" UV_CACHE_DIR="$cache" UV_OFFLINE=1
}

setup_docs_tools() {
  setup_venv "$DOCS_VENV" "$DOCS_PYTHON_PACKAGES"
  export COWORK_TEST_DOCS_PYTHON="$DOCS_VENV/bin/python"
}

setup_calendar_server() {
  setup_venv "$CAL_VENV" "$CAL_PYTHON_PACKAGES"
  export COWORK_TEST_RADICALE="$CAL_VENV/bin/radicale"
}

setup_aw_server() {
  setup_venv "$AW_VENV" "$AW_PYTHON_PACKAGES"
  export COWORK_TEST_AW_SERVER="$AW_VENV/bin/aw-server"
}

# Runs the test suite with its own empty home and none of the caller's desktop
# (session bus, display, runtime directory). Toolchains keep their real homes.
# BROWSER=true: no test opens the user's browser (a sign-in test plays it).
SUITE_MARK=""
# A fixed-offset time zone in which it is now about noon: tests seed "today"
# as local midnight plus minutes, which near a real midnight would lie in the
# future (the suite once failed at 00:13 UTC). An IANA name (tzdata's
# Etc/GMT-5 is UTC+5; the sign is POSIX's), since Python's tzlocal, which
# LiteLLM starts with, refuses a bare POSIX rule such as "COW-5".
midday_tz() {
  local offset
  offset=$((12 - $(date -u +%-H)))
  if [ "$offset" -gt 0 ]; then
    echo "Etc/GMT-$offset"
  elif [ "$offset" -lt 0 ]; then
    echo "Etc/GMT+$((-offset))"
  else
    echo "Etc/GMT"
  fi
}

run_suite_hermetically() {
  local home
  home="$(mktemp -d /tmp/cowork-suite-home.XXXXXX)"
  SUITE_MARK="cowork-suite-$$-$RANDOM"
  local keep=(CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}" RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}")
  [ -d "${PYENV_ROOT:-$HOME/.pyenv}" ] && keep+=(PYENV_ROOT="${PYENV_ROOT:-$HOME/.pyenv}")
  local status=0
  env -u DBUS_SESSION_BUS_ADDRESS -u DISPLAY -u WAYLAND_DISPLAY -u XDG_RUNTIME_DIR -u XAUTHORITY \
    -u XDG_SESSION_TYPE -u XDG_CURRENT_DESKTOP -u SWAYSOCK -u HYPRLAND_INSTANCE_SIGNATURE -u NIRI_SOCKET \
    "${keep[@]}" HOME="$home" XDG_CONFIG_HOME="$home/.config" XDG_CACHE_HOME="$home/.cache" \
    XDG_DATA_HOME="$home/.local/share" XDG_STATE_HOME="$home/.local/state" COWORK_SUITE_MARK="$SUITE_MARK" BROWSER=true \
    PULSE_SERVER="unix:$home/pulse/native" TZ="$(midday_tz)" \
    "$@" || status=$?
  rm -rf "$home"
  return "$status"
}

# Processes that carry this suite's mark in their environment: started by a
# test (or by a daemon a test started) and still alive.
suite_processes() {
  local environ pid
  for environ in /proc/[0-9]*/environ; do
    if { tr '\0' '\n' < "$environ"; } 2>/dev/null | grep -qx "COWORK_SUITE_MARK=$SUITE_MARK"; then
      pid="${environ#/proc/}"; pid="${pid%/environ}"
      printf '%s %s\n' "$pid" "$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-120)"
    fi
  done
}

# Every daemon a test needs is started by the test and stopped afterwards:
# anything of the suite's still running after 10 s is reported, ended, and fails the run.
no_leftover_processes() {
  [ -n "$SUITE_MARK" ] || return 0
  local left=""
  for _ in $(seq 1 20); do
    left="$(suite_processes)"
    [ -z "$left" ] && return 0
    sleep 0.5
  done
  echo "    the test suite left these running:" >&2
  printf '      %s\n' "$left" >&2
  awk '{print $1}' <<< "$left" | xargs -r kill 2>/dev/null || true
  return 1
}

ensure_cargo_deb() {
  if [ "$(cargo deb --version 2>/dev/null | awk '{print $NF}')" = "$CARGO_DEB_VERSION" ]; then
    echo "    installed" >&2
  else
    # Its own target directory: the shared one is the app's.
    env -u CARGO_TARGET_DIR cargo install --quiet --locked --version "$CARGO_DEB_VERSION" cargo-deb
  fi
}

# What the package ships besides the binary, made from this build: the man
# pages (gzipped, as Debian's man-db reads them), the completions, and every
# crate the binary is built from with its licence.
package_files() {
  local dir="$CARGO_TARGET_DIR/user/package"
  rm -rf "$dir"
  "$COWORK_USER_BIN" package-files "$dir"
  gzip -9n "$dir"/man/*.1
  cargo metadata --format-version 1 --locked --filter-platform "$(rustc -vV | sed -n 's/^host: //p')" | python3 -c '
import json, sys
meta = json.load(sys.stdin)
root = meta["resolve"]["root"]
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
packages = {p["id"]: p for p in meta["packages"]}
# What the binary links: the normal and build dependencies reachable from cowork (not its dev-dependencies).
seen, todo = set(), [root]
while todo:
    node = nodes[todo.pop()]
    for dep in node["deps"]:
        if any(kind["kind"] in (None, "build") for kind in dep["dep_kinds"]) and dep["pkg"] not in seen:
            seen.add(dep["pkg"])
            todo.append(dep["pkg"])
print("cowork is licensed under the Apache License 2.0 (/usr/share/common-licenses/Apache-2.0).")
print("It is built from these crates, each under the licence named (SPDX expressions):\n")
for pkg in sorted((packages[i] for i in seen), key=lambda p: (p["name"], p["version"])):
    print("%s %s: %s" % (pkg["name"], pkg["version"], pkg.get("license") or "see its licence file (%s)" % pkg.get("license_file")))
' > "$dir/third-party-licences.txt"
  echo "    $(ls "$dir"/man | wc -l) man pages, 3 completions, $(($(wc -l < "$dir/third-party-licences.txt") - 3)) crates' licences" >&2
}
