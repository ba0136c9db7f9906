#!/usr/bin/env bash
# Install (or remove) the AppArmor profile that lets mcpsum's launcher create user namespaces on
# Ubuntu >= 23.10.
#
# usage: sudo scripts/install-apparmor.sh [--dry-run] [--uninstall] [--force] [PATH]
#
# Why: with kernel.apparmor_restrict_unprivileged_userns = 1 (Ubuntu 23.10 and later), a process
# that creates a user namespace without a profile granting `userns` loses every capability inside
# it, so the launcher cannot build the network namespace that a server with `network.allow` hosts
# runs in. This installs apparmor/mcpsum-launch, attached to the resolved path of `mcpsum-launch`
# (the launcher beside `mcpsum`) and to nothing else, which stays unconfined and gains only
# `userns`. `mcpsum` itself gets no profile. See apparmor/README.md.
#
#   --dry-run     print every step, change nothing
#   --uninstall   unload and remove the profile
#   --force       install even where the kernel does not restrict user namespaces
#   PATH          `mcpsum-launch`, or the `mcpsum` binary it sits beside (default:
#                 `command -v mcpsum`); the launcher and every directory above it must be
#                 root-owned and not writable by others
#
# An older install that attached a profile named `mcpsum` to the `mcpsum` binary itself is
# unloaded and removed on install and on uninstall.
#
# Environment (for tests and packagers): APPARMOR_PARSER (default apparmor_parser),
# MCPSUM_APPARMOR_DIR (default /etc/apparmor.d), MCPSUM_APPARMOR_TEMPLATE (default: the
# repository's apparmor/mcpsum-launch); scripts/check-apparmor.sh also points
# MCPSUM_APPARMOR_SYSCTL and MCPSUM_APPARMOR_PROFILES at fakes to exercise the install steps
# without a kernel.
#
# Idempotent: running it again with the same binary changes nothing.
set -euo pipefail

prog=install-apparmor.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
template="${MCPSUM_APPARMOR_TEMPLATE:-$here/../apparmor/mcpsum-launch}"
profile_dir="${MCPSUM_APPARMOR_DIR:-/etc/apparmor.d}"
name=mcpsum-launch
dest="$profile_dir/$name"
# The profile of older installs: it attached to `mcpsum` itself, which runs arbitrary commands.
legacy_name=mcpsum
legacy_dest="$profile_dir/$legacy_name"
parser_cmd="${APPARMOR_PARSER:-apparmor_parser}"
sysctl_file="${MCPSUM_APPARMOR_SYSCTL:-/proc/sys/kernel/apparmor_restrict_unprivileged_userns}"
profiles_file="${MCPSUM_APPARMOR_PROFILES:-/sys/kernel/security/apparmor/profiles}"

dry_run=0
uninstall=0
force=0
bin_arg=""

usage() { sed -n '2,30p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
say() { printf '%s: %s\n' "$prog" "$*"; }
die() { printf '%s: error: %s\n' "$prog" "$1" >&2; [[ $# -gt 1 ]] && printf '\nhint: %s\n' "$2" >&2; exit 1; }
# run CMD...: print the step; execute it unless --dry-run.
run() {
  if [[ $dry_run -eq 1 ]]; then printf '  would run: %s\n' "$*"; else printf '  + %s\n' "$*"; "$@"; fi
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --uninstall) uninstall=1 ;;
    --force) force=1 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; bin_arg="${1:-}"; break ;;
    -*) usage >&2; die "unknown option \`$1\`" ;;
    *) [[ -z "$bin_arg" ]] || die "more than one path given"; bin_arg="$1" ;;
  esac
  shift
done
[[ $dry_run -eq 1 ]] && say "dry run: nothing will be changed"

# loaded [NAME]: whether the kernel lists the profile NAME (default: the launcher's).
loaded() { [[ -r "$profiles_file" ]] && grep -q "^${1:-$name} (" "$profiles_file"; }

# remove_profile NAME FILE: unload the profile NAME (from FILE when it exists) and remove FILE.
remove_profile() {
  local pname="$1" file="$2"
  if loaded "$pname"; then
    say "unloading the $pname profile from the kernel"
    if [[ -e "$file" ]]; then run "$parser_cmd" -R "$file"; else
      run sh -c "printf 'profile $pname {}' | $parser_cmd -R"; fi
  fi
  if [[ -e "$file" ]]; then
    say "removing $file"
    run rm -f "$file"
  fi
  [[ $dry_run -eq 1 ]] || ! loaded "$pname" || die "the $pname profile is still loaded" "check \`aa-status\`"
}

legacy_present() { [[ -e "$legacy_dest" ]] || loaded "$legacy_name"; }

# --- Uninstall ------------------------------------------------------------------------------------
if [[ $uninstall -eq 1 ]]; then
  if [[ ! -e "$dest" ]] && ! loaded && ! legacy_present; then
    say "no mcpsum profile installed or loaded; nothing to do"
    exit 0
  fi
  [[ $dry_run -eq 1 || $EUID -eq 0 ]] || die "removing the profile needs root" "run: sudo $0 --uninstall"
  remove_profile "$name" "$dest"
  if legacy_present; then remove_profile "$legacy_name" "$legacy_dest"; fi
  say "done: mcpsum's launcher can no longer create user namespaces where the kernel restricts them"
  exit 0
fi

# --- Is it needed here? ---------------------------------------------------------------------------
restricted=0
if [[ -r "$sysctl_file" && "$(cat "$sysctl_file")" == 1 ]]; then restricted=1; fi
if [[ $restricted -eq 0 ]]; then
  say "not needed: this kernel does not restrict unprivileged user namespaces through AppArmor"
  say "($sysctl_file is absent or 0), so mcpsum can sandbox servers with \`network.allow\` hosts as is"
  if [[ $force -eq 0 ]]; then exit 0; fi
  say "--force: installing anyway"
else
  say "this kernel restricts unprivileged user namespaces ($sysctl_file = 1, as on Ubuntu >= 23.10)"
  say "the profile lets mcpsum's launcher, and only it, create the namespace a sandboxed server needs"
fi

# --- The launcher ---------------------------------------------------------------------------------
if [[ -z "$bin_arg" ]]; then
  bin_arg=$(command -v mcpsum || true)
  [[ -n "$bin_arg" ]] || die "\`mcpsum\` is not on PATH" \
    "install mcpsum and mcpsum-launch to a root-owned directory (e.g. \`sudo install -m 0755 target/release/mcpsum target/release/mcpsum-launch /usr/local/bin/\`) or pass the path of mcpsum-launch"
fi
given=$(readlink -f -- "$bin_arg") || die "cannot resolve \`$bin_arg\`"
# The profile goes on the launcher only: given `mcpsum`, use the `mcpsum-launch` beside it.
if [[ "$(basename -- "$given")" == mcpsum-launch ]]; then
  bin="$given"
else
  bin="$(dirname -- "$given")/mcpsum-launch"
  [[ -e "$bin" ]] || die "\`$bin\` does not exist: the profile attaches to mcpsum's launcher, which must sit beside \`$given\`" \
    "install both binaries into the same root-owned directory (e.g. \`sudo install -m 0755 target/release/mcpsum target/release/mcpsum-launch /usr/local/bin/\`)"
  bin=$(readlink -f -- "$bin") || die "cannot resolve the launcher beside \`$given\`"
fi
[[ -f "$bin" && -x "$bin" ]] || die "\`$bin\` is not an executable file"
# AppArmor reads glob characters in the attachment path; quoting rules differ between versions.
[[ "$bin" =~ ^/[A-Za-z0-9._/+-]+$ ]] || die "path \`$bin\` has characters AppArmor would read as a pattern" \
  "install mcpsum-launch to a plain path such as /usr/local/bin/mcpsum-launch"
say "launcher: $bin (the only file the profile attaches to)"

# The profile grants `userns` to whatever file is at that path: a user-writable file or directory
# would let any program put there get it.
check_owner() {
  local path="$1" owner mode
  owner=$(stat -c '%u' -- "$path")
  mode=$(stat -c '%a' -- "$path")
  if [[ "$owner" != 0 ]]; then
    die "\`$path\` is owned by uid $owner, not root: anyone who can replace it would get the profile's \`userns\` permission" \
      "install mcpsum and mcpsum-launch to a root-owned location, e.g. \`sudo install -m 0755 target/release/mcpsum target/release/mcpsum-launch /usr/local/bin/\`, and run this script on that path"
  fi
  if (( (8#$mode & 8#022) != 0 )); then
    die "\`$path\` is writable by group or others (mode $mode)" "run \`sudo chmod go-w $path\`"
  fi
}
check_owner "$bin"
d=$(dirname -- "$bin")
while :; do
  check_owner "$d"
  [[ "$d" == / ]] && break
  d=$(dirname -- "$d")
done

# --- Render and check -----------------------------------------------------------------------------
[[ -r "$template" ]] || die "profile template \`$template\` not found" "run the script from an mcpsum checkout or set MCPSUM_APPARMOR_TEMPLATE"
command -v "$parser_cmd" >/dev/null || die "\`$parser_cmd\` not found" "install it: \`sudo apt-get install apparmor\`"
parser_version=$("$parser_cmd" --version 2>/dev/null | sed -n 's/.*version \([0-9][0-9.]*\).*/\1/p' | head -n1)
if [[ -z "$parser_version" || "${parser_version%%.*}" -lt 4 ]]; then
  die "apparmor_parser ${parser_version:-of unknown version} is too old for the \`userns\` rule (needs 4.x)" \
    "systems that restrict user namespaces ship AppArmor 4; update the apparmor package"
fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
sed "s|@MCPSUM_LAUNCH_PATH@|$bin|" "$template" > "$tmp"
say "rendered profile (attached to $bin):"
grep -v '^#' "$tmp" | sed '/^$/d; s/^/    /'
say "checking the syntax (compile only, nothing loaded)"
printf '  + %s -Q -K %s\n' "$parser_cmd" "$tmp"
"$parser_cmd" -Q -K "$tmp" || die "apparmor_parser rejected the rendered profile" "report this as a bug in mcpsum"

# --- Install and load -----------------------------------------------------------------------------
if [[ ! -r "$profiles_file" ]]; then
  if [[ $dry_run -eq 1 ]]; then
    say "note: AppArmor is not active in this kernel ($profiles_file is missing); a real run would stop here"
  else
    die "AppArmor is not active in this kernel ($profiles_file is missing): there is nothing to load the profile into" \
      "on Ubuntu, AppArmor is on by default; check \`cat /sys/module/apparmor/parameters/enabled\` and the kernel's lsm= list"
  fi
fi
if [[ -e "$dest" ]] && cmp -s "$tmp" "$dest" && loaded && ! legacy_present; then
  say "already installed and loaded: $dest; nothing to do"
  exit 0
fi
[[ $dry_run -eq 1 || $EUID -eq 0 ]] || die "installing the profile needs root" "run: sudo $0${bin_arg:+ $bin_arg}"
if [[ -e "$dest" ]] && ! cmp -s "$tmp" "$dest"; then
  say "replacing $dest (it differs):"
  diff -u "$dest" "$tmp" | sed 's/^/    /' || true
elif [[ -e "$dest" ]]; then
  say "$dest is current but not loaded"
else
  say "installing $dest"
fi
if ! [[ -e "$dest" ]] || ! cmp -s "$tmp" "$dest"; then
  run install -m 0644 -o root -g root "$tmp" "$dest"
fi
if legacy_present; then
  say "an older profile \`$legacy_name\` attaches to the mcpsum binary itself; removing it"
  remove_profile "$legacy_name" "$legacy_dest"
fi
say "loading it into the kernel and caching it"
run "$parser_cmd" -r -W "$dest" || die "apparmor_parser could not load $dest" "check \`sudo aa-status\` and \`journalctl -k | grep -i apparmor\`"

if [[ $dry_run -eq 1 ]]; then
  say "dry run done; would verify that $profiles_file lists \`$name (unconfined)\`"
  exit 0
fi
loaded || die "the profile did not load" "check \`sudo aa-status\` and \`journalctl -k | grep -i apparmor\`"
say "done: \`$name (unconfined)\` is loaded for $bin"
say "servers with \`network.allow\` hosts can now start; after moving or replacing the binaries, run this again"
