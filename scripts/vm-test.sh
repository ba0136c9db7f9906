#!/usr/bin/env bash
# Boots minimal Linux VMs (Debian cloud kernels, busybox initramfs, qemu software emulation) and
# runs mcpsum's sandbox checks inside each: `lock`, `sandbox test --json` and `verify` for a
# policy with `network.allow: []` and one with hosts listed, as root and as an unprivileged
# user, plus the fail-closed cases (user namespaces switched off; a kernel booted without
# Landlock). Prints the layers and compensations per kernel; exits 1 when the sandbox would have
# run weaker than promised or any check fails, 2 when the VMs cannot be run here.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  cat <<'EOF'
Usage: scripts/vm-test.sh [--kernels NAMES] [--binary PATH] [--jobs N] [--keep] [--verbose]

Boots each pinned Debian kernel twice under qemu-system-x86_64 (TCG): once with every check,
once without Landlock (a sandboxed server must then refuse to start), and checks the results.

  --kernels NAMES  comma-separated subset of the pinned kernels (default: all; see below)
  --binary PATH    test this mcpsum binary, with the mcpsum-launch beside it (default:
                   `cargo build --release`, target/release)
  --jobs N         VMs run at the same time (default 2)
  --keep           keep the work directory (initramfs, console and result logs)
  --verbose        print each VM's console log
  -h, --help       this help

Needs: qemu-system-x86_64 (Debian: qemu-system-x86), a static busybox (busybox-static),
dpkg-deb, apt's apt-helper and python3. Kernel packages are fetched from the machine's Debian
mirror (or $MCPSUM_VM_MIRROR), checked against their pinned SHA-256 and cached in target/vm
(or $MCPSUM_VM_CACHE).
Exit status: 0 every check holds, 1 a check failed, 2 the VMs could not be run.
EOF
  printf '\nPinned kernels (name, expected Landlock ABI, package):\n'
  for k in "${KERNELS[@]}"; do
    IFS='|' read -r name abi path _ <<<"$k"
    printf '  %-5s ABI %-3s %s\n' "$name" "$abi" "${path##*/}"
  done
}

# The kernels: NAME|EXPECTED LANDLOCK ABI|PATH IN THE DEBIAN ARCHIVE|SHA-256 of the .deb.
# The ABI is what this kernel must offer: any other is a failure (fewer: the sandbox would be
# weaker than promised). 6.1 is Debian 12's, 6.12 Debian 13's, 7.3 trixie-backports' (since
# 6.19 the vmlinuz is in `linux-binary-*`). To bump one, read Filename and SHA256 from the
# suite's index in a throwaway apt directory (the machine's sources stay as they are;
# MIRROR is the Debian URI of /etc/apt/sources.list.d):
#   d=$(mktemp -d); mkdir -p "$d/lists/partial"
#   echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] MIRROR trixie-backports main" >"$d/list"
#   o="-o Dir::Etc::sourcelist=$d/list -o Dir::Etc::sourceparts=$d -o Dir::State::Lists=$d/lists -o Dir::Cache=$d"
#   apt-get $o update && apt-cache $o show linux-binary-7.3.4+deb13-cloud-amd64
# then change the line, run this script (it prints the ABI it found), commit.
KERNELS=(
  "6.1|2|pool/main/l/linux-signed-amd64/linux-image-6.1.0-50-cloud-amd64_6.1.176-1_amd64.deb|efe19f605b6f54a8352e68d85a629abb2d30b72a085faef603a9152590baa791"
  "6.12|6|pool/main/l/linux-signed-amd64/linux-image-6.12.117+deb13-cloud-amd64_6.12.117-1_amd64.deb|e9893e5295d0549b8852611f12a4b8b5f6cc4b8128dcc2086b9847793b904ab7"
  "7.3|11|pool/main/l/linux-signed-amd64/linux-binary-7.3.4+deb13-cloud-amd64_7.3.4-1~bpo13+1_amd64.deb|c4fbc8e404958693b28825474c20742d70594d65ca58aea7be6a279c81eb6fa0"
)

want_kernels="" binary="" keep=0 verbose=0 jobs=2
while [ $# -gt 0 ]; do
  case $1 in
    --kernels) want_kernels=${2:?--kernels needs a value}; shift 2 ;;
    --binary) binary=${2:?--binary needs a path}; shift 2 ;;
    --jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
    --keep) keep=1; shift ;;
    --verbose | -v) verbose=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "vm-test: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
  esac
done

die() {
  echo "vm-test: $*" >&2
  exit 2
}

# --- what this machine must have ------------------------------------------------------------
missing=()
command -v qemu-system-x86_64 >/dev/null || missing+=("qemu-system-x86_64 (apt-get install qemu-system-x86)")
busybox=$(command -v busybox || true)
if [ -z "$busybox" ] || ldd "$busybox" >/dev/null 2>&1; then
  missing+=("a static busybox (apt-get install busybox-static)")
fi
command -v dpkg-deb >/dev/null || missing+=("dpkg-deb (dpkg)")
[ -x /usr/lib/apt/apt-helper ] || missing+=("/usr/lib/apt/apt-helper (apt)")
command -v python3 >/dev/null || missing+=("python3")
if [ ${#missing[@]} -gt 0 ]; then
  die "missing: $(printf '%s; ' "${missing[@]}")install them (scripts/install-test-deps.sh does, as root)"
fi

selected=()
for k in "${KERNELS[@]}"; do
  name=${k%%|*}
  if [ -z "$want_kernels" ] || [[ ",$want_kernels," == *",$name,"* ]]; then
    selected+=("$k")
  fi
done
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "--jobs needs a positive number, not \`$jobs\`"
[ ${#selected[@]} -gt 0 ] || die "no pinned kernel matches \`$want_kernels\` (see --help)"

cache=${MCPSUM_VM_CACHE:-$here/target/vm}
mkdir -p "$cache/debs" "$cache/kernels"
work=$(mktemp -d "${TMPDIR:-/tmp}/mcpsum-vm.XXXXXX")
if [ "$keep" = 1 ]; then
  echo "vm-test: work directory $work (kept)"
else
  trap 'rm -rf "$work"' EXIT
fi

# --- kernels: pinned .debs from the Debian archive, verified, unpacked -------------------------
mirror=${MCPSUM_VM_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(apt-get indextargets --format '$(LABEL) $(REPO_URI)' 2>/dev/null |
    awk '$1 == "Debian" { print $2; exit }')
fi
mirror=${mirror%/}

kernel_image() { # NAME POOLPATH SHA256 -> sets vmlinuz
  local name=$1 path=$2 sum=$3 deb dir
  deb="$cache/debs/${path##*/}"
  if [ ! -f "$deb" ] || ! echo "$sum  $deb" | sha256sum -c --quiet - >/dev/null 2>&1; then
    [ -n "$mirror" ] || die "no Debian mirror in this machine's apt sources; set MCPSUM_VM_MIRROR"
    rm -f "$deb"
    echo "vm-test: downloading ${path##*/}" >&2
    if ! /usr/lib/apt/apt-helper -o APT::Sandbox::User=root -qq download-file \
      "$mirror/$path" "$deb" "SHA256:$sum" >&2; then
      rm -f "$deb"
      die "kernel $name: cannot download $mirror/$path with SHA-256 $sum (no longer in the archive? pin a newer package: see the KERNELS comment in this script)"
    fi
  fi
  # Only the kernel image is kept (no modules are needed: the VM uses loopback only).
  vmlinuz="$cache/kernels/$sum.vmlinuz"
  if [ ! -f "$vmlinuz" ]; then
    rm -rf "$work/deb"
    dpkg-deb -x "$deb" "$work/deb"
    found=$(find "$work/deb" -type f \( -name 'vmlinuz-*' -o -name vmlinuz \) | head -n1)
    [ -n "$found" ] || die "kernel $name: no vmlinuz in ${path##*/}"
    mv "$found" "$vmlinuz.tmp" && mv "$vmlinuz.tmp" "$vmlinuz"
    rm -rf "$work/deb"
  fi
}

# --- mcpsum --------------------------------------------------------------------------------------
if [ -z "$binary" ]; then
  echo "vm-test: cargo build --release" >&2
  (cd "$here" && cargo build --release --locked --quiet --bin mcpsum --bin mcpsum-launch)
  binary="$here/target/release/mcpsum"
fi
[ -x "$binary" ] || die "no executable mcpsum at $binary"
# mcpsum starts every server through its launcher, which must sit beside it.
launcher="$(dirname "$binary")/mcpsum-launch"
[ -x "$launcher" ] || die "no executable mcpsum-launch beside $binary (build it: cargo build --release --bin mcpsum-launch)"

# --- initramfs: busybox, mcpsum and its libraries, the test server, the init -------------------
root="$work/root"
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,etc,proc,sys,dev,tmp,root,home/tester,srv}
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
  [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
done
cp "$binary" "$root/usr/local/bin/mcpsum"
cp "$launcher" "$root/usr/local/bin/mcpsum-launch"
cp "$here/scripts/vm/mcp-server.sh" "$root/usr/local/bin/mcp-server.sh"
cp "$here/scripts/vm/escape-server.sh" "$root/usr/local/bin/escape-server.sh"
cp "$here/scripts/vm/init" "$root/init"
chmod 0755 "$root/init" "$root/usr/local/bin/"*
# One file per ldd call: given two, ldd heads each list with the file's name and a colon.
for lib in $({ ldd "$binary"; ldd "$launcher"; } | grep -o '/[^ ]*' | sort -u); do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
tester:x:1000:1000:tester:/home/tester:/bin/sh
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
tester:x:1000:
EOF
echo 'hosts: files' >"$root/etc/nsswitch.conf"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$root/etc/hosts"
chmod 1777 "$root/tmp"
(cd "$root" && find . | "$busybox" cpio -o -H newc -R 0:0 2>/dev/null) | gzip -1 >"$work/initrd.gz"

# --- boot each kernel: every check, then without Landlock ---------------------------------------
timeout_s=300
boot() { # NAME VMLINUZ MODE: one VM; logs under $work/NAME-MODE.*
  local name=$1 vmlinuz=$2 mode=$3 log="$work/$1-$3" extra="" start rc=0
  # Landlock left out of the LSM list: the kernel cannot honour any sandbox policy.
  [ "$mode" = nolandlock ] && extra="lsm=lockdown,yama,apparmor"
  start=$EPOCHREALTIME
  # mitigations=off: page-table isolation makes every syscall flush the emulated TLB (2x slower
  # under TCG); it changes nothing the sandbox relies on.
  timeout "$timeout_s" qemu-system-x86_64 -accel tcg -cpu max -m 512 -smp 2 \
    -nodefaults -no-reboot -display none -monitor none \
    -serial "file:$log.console" -serial "file:$log.results" \
    -kernel "$vmlinuz" -initrd "$work/initrd.gz" \
    -append "console=ttyS0 quiet panic=-1 mitigations=off mcpsum.mode=$mode $extra" \
    >"$log.qemu" 2>&1 || rc=$?
  awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f\n", b - a }' >"$log.wall"
  if [ "$rc" != 0 ]; then
    echo "qemu exited $rc (124: no power-off within ${timeout_s}s)" >>"$log.qemu"
  fi
}

images=()
for k in "${selected[@]}"; do
  IFS='|' read -r name abi path sum <<<"$k"
  kernel_image "$name" "$path" "$sum"
  images+=("$vmlinuz")
done

echo "vm-test: booting ${#selected[@]} kernel(s) twice each, $jobs at a time" >&2
suite_start=$EPOCHREALTIME
i=0
for k in "${selected[@]}"; do
  name=${k%%|*}
  for mode in main nolandlock; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    boot "$name" "${images[$i]}" "$mode" &
  done
  i=$((i + 1))
done
wait
suite_wall=$(awk -v a="$suite_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')

status=0
for k in "${selected[@]}"; do
  IFS='|' read -r name abi _ <<<"$k"
  for mode in main nolandlock; do
    log="$work/$name-$mode"
    [ "$verbose" = 1 ] && sed 's/^/  console| /' "$log.console"
    [ -s "$log.qemu" ] && sed 's/^/  qemu| /' "$log.qemu"
    python3 "$here/scripts/vm/check.py" --kernel "$name" --abi "$abi" --mode "$mode" \
      --wall "$(cat "$log.wall")" --console "$log.console" --summary "$work/summary" \
      --counts "$work/counts" "$log.results" || status=1
  done
done

echo
echo "vm-test summary ($("$binary" --version); qemu TCG, 2 vCPUs, 512 MiB each, $jobs at a time; ${suite_wall} s for all boots):"
cat "$work/summary"
if [ "$status" = 0 ]; then
  echo "vm-test: every check holds on ${#selected[@]} kernel(s)"
else
  echo "vm-test: FAILED (see above)"
fi
awk '{ p += $1; f += $2 } END { printf "vm-test: %d passed, %d failed\n", p, f }' "$work/counts"
exit "$status"
