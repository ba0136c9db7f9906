#!/etc/../bin/sh
# The escape battery of scripts/vm-test.sh: a server that, each time it starts, tries what the
# sandbox must refuse and records each outcome in OUT/escape.<pid>, then serves as
# mcp-server.sh does. Its own `#!` line names its interpreter through `/etc/..`: planned from
# the raw path, that prefix would be `/`, and every read below would succeed.
# For the VMs only: unsandboxed, it would change what it tries to change.
# Usage: escape-server.sh OUT HOME LIMIT
#   OUT    the write set (results go there), HOME the user's home (holds `.ssh/id_ed25519`),
#   LIMIT  the policy's task limit (the fork bomb must stop below it).
# Lines: `refused NAME` (held), `ESCAPED NAME` (the sandbox let it through), `ok NAME` (a
# control that must work), `FAILED NAME` (a control that did not), `bomb N`, then `done`.
out=$1 home=$2 limit=$3
r="$out/escape.$$"
: >"$r" || exit 3
must_fail() { # NAME COMMAND...: the command must not succeed
  name=$1
  shift
  if "$@" >/dev/null 2>&1; then echo "ESCAPED $name" >>"$r"; else echo "refused $name" >>"$r"; fi
}
must_work() { # NAME COMMAND...: a control
  name=$1
  shift
  if "$@" >/dev/null 2>&1; then echo "ok $name" >>"$r"; else echo "FAILED $name" >>"$r"; fi
}
key="$home/.ssh/id_ed25519"
must_fail read-ssh-key /bin/cat "$key"
must_fail list-home /bin/ls "$home"
must_fail read-tls-private-key /bin/cat /etc/ssl/private/vm-test.key
must_fail chmod-ssh-key /bin/chmod 0644 "$key"
must_fail chmod-home /bin/chmod 0777 "$home"
must_fail touch-ssh-key /bin/touch -c -d "2001-01-01 00:00:00" "$key"
must_fail chown-ssh-key /bin/chown 1:1 "$key"
must_fail write-outside /bin/sh -c "echo x >'$home/escaped'"
must_fail mkdir-outside /bin/mkdir "$home/escaped.d"
must_fail chmod-system-file /bin/chmod 0666 /etc/vm-test.conf
must_fail touch-system-file /bin/touch -c -d "2001-01-01 00:00:00" /etc/vm-test.conf
# Its own task cgroup (a root server's): lifting the limit from inside must not work.
must_fail write-cgroup /bin/sh -c 'for f in /sys/fs/cgroup/mcpsum-*/pids.max; do echo max >"$f" || exit 1; done; [ -e "$f" ]'
# Controls: the write set stays writable, modes and times included.
must_work write-in-write-set /bin/sh -c "echo x >'$out/ctl.$$'"
must_work chmod-in-write-set /bin/chmod 0600 "$out/ctl.$$"
must_work touch-in-write-set /bin/touch -d "2001-01-01 00:00:00" "$out/ctl.$$"
/bin/rm -f "$out/ctl.$$"
# The fork bomb, in a subshell: the shell gives up at the first fork the kernel refuses. The
# children sleep until they are killed, so none has ended when the limit is reached (forks are
# slow under emulation). Until they are gone this shell forks nothing (a refused fork would end
# it too): builtins only.
(
  i=0
  while [ "$i" -lt $((limit * 4)) ]; do
    /bin/sleep 600 &
    echo "$!" >>"$out/pids.$$"
    i=$((i + 1))
    echo "$i" >"$out/bomb.$$"
  done
) 2>/dev/null
n=0
read -r n <"$out/bomb.$$"
echo "bomb $n" >>"$r"
while read -r p; do kill "$p" 2>/dev/null; done <"$out/pids.$$"
while read -r p; do while [ -e "/proc/$p" ]; do :; done; done <"$out/pids.$$"
/bin/rm -f "$out/bomb.$$" "$out/pids.$$"
echo "done" >>"$r"
exec "${0%/*}/mcp-server.sh"
