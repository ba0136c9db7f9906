#!/usr/bin/env bash
# Check apparmor/mcpsum-launch with an AppArmor 4.x parser, without AppArmor in the kernel (CI).
#
# usage: scripts/check-apparmor.sh
#
# The profile uses `abi <abi/4.0>` and the `userns,` rule, which only parser 4.x understands.
# `apparmor_parser -Q -K` compiles a profile without loading it and without the cache, so it works
# on any kernel. Order of preference for the parser:
#   1. $MCPSUM_APPARMOR_PARSER, or `apparmor_parser` on PATH, if it is version 4 or later;
#   2. Debian 13's parser, fetched with apt from Debian's package registry into a private
#      directory (the system's apt sources and state are not touched), unpacked with
#      `dpkg-deb -x` together with Debian 13's libc6 (the parser needs glibc >= 2.38) and run
#      through that libc's own loader. Cached under target/apparmor-4/.
# Checks: the rendered profile is accepted, and a copy with a typo (`usernz,`) is rejected, so a
# parser that silently accepts anything cannot make this pass; the profile attaches to the
# launcher `mcpsum-launch` only, never to `mcpsum` (which runs arbitrary commands), and the
# install script (as root, against fakes of the kernel files) attaches it to the launcher beside
# a given `mcpsum`, refuses a launcher that is not root-owned, and removes the older profile that
# attached to `mcpsum` itself.
# When no 4.x parser can be had, it prints one `skipped: <why>` line and exits 0.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
template="$root/apparmor/mcpsum-launch"
cache="${MCPSUM_APPARMOR_CACHE:-$root/target/apparmor-4}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

say() { printf 'check-apparmor: %s\n' "$*" >&2; }
skip() { printf 'skipped: %s\n' "$*"; exit 0; }

# parser_major CMD... -> prints the major version of an apparmor_parser invocation, or nothing.
parser_major() {
  "$@" --version 2>/dev/null | sed -n 's/.*version \([0-9][0-9]*\)\..*/\1/p' | head -n1
}

# The command that runs a 4.x parser, as an array: parser=(...); extra include dirs in incl=(...).
parser=()
incl=()

use_system_parser() {
  local cand="${MCPSUM_APPARMOR_PARSER:-}"
  if [[ -z "$cand" ]]; then cand=$(command -v apparmor_parser || true); fi
  [[ -n "$cand" ]] || return 1
  local major
  major=$(parser_major "$cand")
  if [[ -n "$major" && "$major" -ge 4 ]]; then
    parser=("$cand")
    say "using $cand (parser $major.x)"
    return 0
  fi
  say "$cand is parser ${major:-unknown}.x; need 4.x"
  return 1
}

# The Debian archive URI this machine already uses, so no host name is hard-coded here.
debian_uri() {
  if [[ -n "${MCPSUM_DEBIAN_MIRROR:-}" ]]; then echo "$MCPSUM_DEBIAN_MIRROR"; return; fi
  local f uri=""
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -r "$f" ]] || continue
    uri=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' "$f")
    [[ -n "$uri" ]] && break
  done
  if [[ -z "$uri" ]]; then
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
      [[ -r "$f" ]] || continue
      uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { if ($i !~ /security/) print $i; break } }' "$f" | head -n1)
      [[ -n "$uri" ]] && break
    done
  fi
  echo "$uri"
}

fetch_trixie_parser() {
  local arch triplet
  arch=$(dpkg --print-architecture 2>/dev/null || true)
  case "$arch" in
    amd64) triplet=x86_64-linux-gnu ;;
    arm64) triplet=aarch64-linux-gnu ;;
    *) return 1 ;;
  esac
  local tree="$cache/root"
  if [[ ! -x "$tree/usr/sbin/apparmor_parser" && ! -x "$tree/sbin/apparmor_parser" ]]; then
    command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || return 1
    local uri keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    uri=$(debian_uri)
    [[ -n "$uri" && -r "$keyring" ]] || { say "no Debian apt source or archive keyring found"; return 1; }
    local apt="$work/apt"
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/parts" "$work/debs"
    echo "deb [signed-by=$keyring] $uri trixie main" > "$apt/sources.list"
    # Private sources, lists and caches: the system's apt configuration and state stay as they are.
    local opts=(
      -o "Dir::Etc::sourcelist=$apt/sources.list" -o "Dir::Etc::sourceparts=$apt/parts"
      -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
      -o "Dir::Cache::pkgcache=$apt/cache/pkgcache.bin"
      -o "Dir::Cache::srcpkgcache=$apt/cache/srcpkgcache.bin"
      -o "APT::Sandbox::User=$(id -un)" -o "Debug::NoLocking=1" -qq
    )
    say "fetching Debian 13 apparmor and libc6 packages (private apt directory)"
    apt-get "${opts[@]}" update >&2 || return 1
    (cd "$work/debs" && apt-get "${opts[@]}" download apparmor libc6 >&2) || return 1
    rm -rf "$cache" && mkdir -p "$tree"
    local deb
    for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$tree"; done
    cp "$work"/debs/*.deb "$cache/" 2>/dev/null || true
  fi
  local bin loader libdir="$tree/usr/lib/$triplet"
  bin="$tree/usr/sbin/apparmor_parser"; [[ -x "$bin" ]] || bin="$tree/sbin/apparmor_parser"
  loader=$(find "$tree/usr/lib/$triplet" "$tree/usr/lib64" "$tree/lib64" -maxdepth 1 \
    -name 'ld-linux*.so.*' 2>/dev/null | head -n1)
  [[ -x "$bin" && -n "$loader" ]] || { say "unpacked packages lack the parser or the loader"; return 1; }
  parser=("$loader" --library-path "$libdir" "$bin")
  # The parser's own abi/ and tunables/ files, not the (3.x or absent) system ones.
  incl=(--base "$tree/etc/apparmor.d" --Include "$tree/etc/apparmor.d")
  local major
  major=$(parser_major "${parser[@]}")
  if [[ -z "$major" || "$major" -lt 4 ]]; then
    say "unpacked parser does not run or is not 4.x"
    return 1
  fi
  say "using Debian 13's apparmor_parser $major.x through its own loader"
}

if ! use_system_parser; then
  fetch_trixie_parser || skip "no AppArmor 4.x parser: none installed, and Debian 13's could not be fetched or run (needs apt-get, dpkg-deb and Debian's package registry)"
fi
if [[ ${#incl[@]} -eq 0 && -d /etc/apparmor.d ]]; then incl=(--base /etc/apparmor.d); fi

# check NAME FILE WANT: WANT is "accept" or "reject".
failures=0
check() {
  local name="$1" file="$2" want="$3" out rc=0
  out=$("${parser[@]}" "${incl[@]}" --config-file=/dev/null -Q -K "$file" 2>&1) || rc=$?
  if [[ "$want" == accept && $rc -eq 0 ]] || [[ "$want" == reject && $rc -ne 0 ]]; then
    echo "ok: $name (${want}ed)"
  else
    echo "FAIL: $name: expected the parser to $want it (exit $rc)"
    printf '%s\n' "$out" | sed 's/^/  /'
    failures=$((failures + 1))
  fi
}

sed 's|@MCPSUM_LAUNCH_PATH@|/usr/local/bin/mcpsum-launch|' "$template" > "$work/mcpsum"
check "rendered profile" "$work/mcpsum" accept
sed 's/^\( *\)userns,/\1usernz,/' "$work/mcpsum" > "$work/mcpsum-typo"
grep -q 'usernz,' "$work/mcpsum-typo"
check "profile with \`usernz,\`" "$work/mcpsum-typo" reject
sed 's/flags=(unconfined)/flags=(unconfinedx)/' "$work/mcpsum" > "$work/mcpsum-flag"
check "profile with \`flags=(unconfinedx)\`" "$work/mcpsum-flag" reject
grep -q '@MCPSUM_LAUNCH_PATH@' "$template" || { echo "FAIL: template lacks @MCPSUM_LAUNCH_PATH@"; failures=$((failures + 1)); }

# The grant reaches the launcher only: one profile, attached to the path of `mcpsum-launch`.
attach_only_launcher() {
  local file="$1" path="$2" profiles
  profiles=$(grep -E '^[[:space:]]*profile[[:space:]]' "$file" || true)
  [[ $(grep -c . <<<"$profiles") -eq 1 ]] \
    && grep -qE "^profile mcpsum-launch ${path//./\\.} flags=\(unconfined\) \{\$" <<<"$profiles" \
    && ! grep -qE '(^|[[:space:]])/[^[:space:]]*/mcpsum([[:space:]]|$)' "$file"
}
if attach_only_launcher "$work/mcpsum" /usr/local/bin/mcpsum-launch; then
  echo "ok: the profile attaches to mcpsum-launch only"
else
  echo "FAIL: the profile must attach to mcpsum-launch and to nothing else:"
  grep -E '^[[:space:]]*profile' "$work/mcpsum" | sed 's/^/  /'
  failures=$((failures + 1))
fi
# ... and the check itself sees a profile attached to `mcpsum` (the old one).
sed 's|@MCPSUM_LAUNCH_PATH@|/usr/local/bin/mcpsum|' "$template" > "$work/mcpsum-general"
if attach_only_launcher "$work/mcpsum-general" /usr/local/bin/mcpsum-launch; then
  echo "FAIL: the attachment check accepts a profile attached to mcpsum"
  failures=$((failures + 1))
fi

# The install script, end to end against fakes of the kernel interfaces: the sysctl reads 1, a
# fake parser records loads in a fake profiles file (and compiles with the real 4.x parser), the
# profile directory is a temp dir. Install twice (the second run must change nothing), uninstall.
if [[ $EUID -eq 0 ]]; then
  fake="$work/fake"
  mkdir -p "$fake/apparmor.d"
  echo 1 > "$fake/sysctl"
  : > "$fake/profiles"
  printf '%q ' "${parser[@]}" "${incl[@]}" > "$fake/real-parser"
  cat > "$fake/parser" <<FAKE
#!/usr/bin/env bash
set -euo pipefail
case "\$1" in
  --version) $(cat "$fake/real-parser") --version ;;
  -Q) $(cat "$fake/real-parser") --config-file=/dev/null "\$@" ;;
  -r) $(cat "$fake/real-parser") --config-file=/dev/null -Q -K "\$3" \
        && echo "\$(basename "\$3") (unconfined)" >> "$fake/profiles" ;;
  -R) if [[ \$# -ge 2 ]]; then n=\$(basename "\$2"); else n=\$(sed -n 's/^profile \([^ ]*\).*/\1/p'); fi
      sed -i "/^\$n (/d" "$fake/profiles" ;;
  *) exit 2 ;;
esac
FAKE
  chmod +x "$fake/parser"
  inst() {
    APPARMOR_PARSER="$fake/parser" MCPSUM_APPARMOR_DIR="$fake/apparmor.d" \
      MCPSUM_APPARMOR_SYSCTL="$fake/sysctl" MCPSUM_APPARMOR_PROFILES="$fake/profiles" \
      "$root/scripts/install-apparmor.sh" "$@" 2>&1
  }
  # A root-owned install directory holding both binaries (stand-ins: copies of `true`).
  sim=$(mktemp -d "$root/target/apparmor-sim.XXXXXX")
  trap 'rm -rf "$work" "$sim"' EXIT
  chmod 0755 "$sim"
  mkdir -m 0755 "$sim/bin"
  install -m 0755 "$(type -P true)" "$sim/bin/mcpsum"
  install -m 0755 "$(type -P true)" "$sim/bin/mcpsum-launch"
  bin="$sim/bin/mcpsum"
  launch="$sim/bin/mcpsum-launch"
  step() {
    local name="$1" pattern="$2" out rc=0
    shift 2
    out=$(inst "$@") || rc=$?
    if [[ $rc -eq 0 ]] && grep -q -- "$pattern" <<<"$out"; then
      echo "ok: install script: $name"
    else
      echo "FAIL: install script: $name (exit $rc)"
      printf '%s\n' "$out" | sed 's/^/  /'
      failures=$((failures + 1))
    fi
  }
  # refuse NAME PATTERN ARGS...: the install script must fail, saying PATTERN.
  refuse() {
    local name="$1" pattern="$2" out rc=0
    shift 2
    out=$(inst "$@") || rc=$?
    if [[ $rc -ne 0 ]] && grep -q -- "$pattern" <<<"$out"; then
      echo "ok: install script: $name"
    else
      echo "FAIL: install script: $name (exit $rc)"
      printf '%s\n' "$out" | sed 's/^/  /'
      failures=$((failures + 1))
    fi
  }
  # An older install: a profile `mcpsum` attached to the general binary, file and kernel.
  printf 'profile mcpsum %s flags=(unconfined) {\n  userns,\n}\n' "$bin" > "$fake/apparmor.d/mcpsum"
  echo 'mcpsum (unconfined)' > "$fake/profiles"
  step "dry run changes nothing" "dry run done" --dry-run "$bin"
  [[ ! -e "$fake/apparmor.d/mcpsum-launch" && -e "$fake/apparmor.d/mcpsum" ]] \
    || { echo "FAIL: dry run changed a file"; failures=$((failures + 1)); }
  step "installs and loads, given mcpsum" "is loaded for $launch" "$bin"
  if attach_only_launcher "$fake/apparmor.d/mcpsum-launch" "$launch"; then
    echo "ok: install script: the installed profile attaches to the launcher only"
  else
    echo "FAIL: installed profile not attached to $launch only"
    sed 's/^/  /' "$fake/apparmor.d/mcpsum-launch"
    failures=$((failures + 1))
  fi
  [[ ! -e "$fake/apparmor.d/mcpsum" ]] && ! grep -q '^mcpsum (' "$fake/profiles" \
    && grep -q '^mcpsum-launch (' "$fake/profiles" \
    || { echo "FAIL: the older profile on mcpsum was not removed"; sed 's/^/  /' "$fake/profiles"; failures=$((failures + 1)); }
  step "second run is a no-op" "nothing to do" "$bin"
  step "given the launcher itself, also a no-op" "nothing to do" "$launch"
  step "uninstall" "done: mcpsum's launcher can no longer" --uninstall
  [[ ! -e "$fake/apparmor.d/mcpsum-launch" && ! -s "$fake/profiles" ]] \
    || { echo "FAIL: uninstall left the profile behind"; failures=$((failures + 1)); }
  # A launcher anyone but root could replace would hand `userns` to whatever is put there.
  chown 65534 "$launch"
  refuse "refuses a launcher not owned by root" "owned by uid 65534, not root" "$bin"
  chown 0 "$launch"
  chmod 0777 "$sim/bin"
  refuse "refuses a launcher in a directory others can write" "writable by group or others" "$bin"
  chmod 0755 "$sim/bin"
  rm "$launch"
  refuse "refuses an mcpsum without a launcher beside it" "mcpsum-launch\` does not exist" "$bin"
  [[ ! -e "$fake/apparmor.d/mcpsum-launch" ]] \
    || { echo "FAIL: a refused install wrote the profile"; failures=$((failures + 1)); }
else
  echo "skipped: install script simulation (needs root for \`install -o root\`)"
fi

if [[ $failures -ne 0 ]]; then
  echo "apparmor profile check: $failures failed"
  exit 1
fi
echo "apparmor profile check: passed"
