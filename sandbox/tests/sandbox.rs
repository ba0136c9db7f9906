//! End-to-end checks of the launcher through the crate's own harness binary, as root and as the
//! unprivileged user `nobody` (via `setpriv`). A test that cannot apply a layer on this machine
//! prints why and skips, unless `MCPSUM_REQUIRE_SANDBOX=1`, where a skip is a failure.
#![cfg(target_os = "linux")]
#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failure is a test failure"
)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

const NOBODY: u32 = 65534;

fn require() -> bool {
    std::env::var_os("MCPSUM_REQUIRE_SANDBOX").is_some_and(|v| v == "1")
}

fn skip(why: &str) {
    assert!(!require(), "MCPSUM_REQUIRE_SANDBOX=1 but: {why}");
    eprintln!("skipped: {why}");
}

fn landlock_missing() -> bool {
    // The kernel lists landlock in the active LSMs when it can be used.
    !std::fs::read_to_string("/sys/kernel/security/lsm")
        .map(|s| s.contains("landlock"))
        .unwrap_or(true)
}

/// A world: a home with a secret, a project with `mcp.lock`, a state dir, data dirs, and a copy
/// of the harness readable by everyone (the target dir may not be), all owned by `uid`.
struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    harness: PathBuf,
    uid: u32,
}

impl World {
    fn new(uid: u32) -> World {
        let dir = tempfile::Builder::new()
            .prefix("mcpsum-sbx-it-")
            .tempdir()
            .unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        for d in ["home/.ssh", "proj/data", "state", "notes", "bin"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("home/.ssh/id_ed25519"), "SECRET KEY").unwrap();
        std::fs::write(root.join("proj/mcp.lock"), "{}").unwrap();
        std::fs::write(root.join("notes/todo.txt"), "notes").unwrap();
        let harness = root.join("bin/sandbox-harness");
        std::fs::copy(env!("CARGO_BIN_EXE_sandbox-harness"), &harness).unwrap();
        std::fs::set_permissions(&harness, std::fs::Permissions::from_mode(0o755)).unwrap();
        for entry in walk(&root) {
            std::os::unix::fs::lchown(&entry, Some(uid), Some(uid)).unwrap();
        }
        World {
            _dir: dir,
            root,
            harness,
            uid,
        }
    }

    fn p(&self, rel: &str) -> String {
        self.root.join(rel).to_str().unwrap().to_string()
    }

    fn config(&self, allow: &[&str], env: &[(&str, &str)]) -> Value {
        json!({
            "read": [self.p("notes")],
            "write": [self.p("proj/data"), "${TMP}/work"],
            "allow": allow,
            "lockfile": self.p("proj/mcp.lock"),
            "state_dir": self.p("state/mcpsum"),
            "home": self.p("home"),
            "argv": ["/bin/sh"],
            "env": env,
        })
    }

    /// Runs the harness as this world's user with a clean environment.
    fn harness(&self, mode: &str, cfg: &Value) -> Output {
        let mut cmd = if self.uid == current_uid() {
            Command::new(&self.harness)
        } else {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={}", self.uid))
                .arg(format!("--regid={}", self.uid))
                .arg("--clear-groups")
                .arg(&self.harness);
            c
        };
        cmd.arg(mode)
            .arg(cfg.to_string())
            .env_clear()
            .env("HOME", self.p("home"))
            .env("PATH", "/usr/bin:/bin")
            .current_dir(&self.root);
        busy_retry(|| cmd.output())
    }
}

/// Another test thread may be forking while this one has just copied the harness: the child
/// holds the copy's write descriptor until its exec, and exec of the copy fails with ETXTBSY
/// meanwhile. Retry briefly.
fn busy_retry<T>(mut f: impl FnMut() -> std::io::Result<T>) -> T {
    for _ in 0..100 {
        match f() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other.unwrap(),
        }
    }
    f().unwrap()
}

fn walk(p: &Path) -> Vec<PathBuf> {
    let mut out = vec![p.to_path_buf()];
    if p.is_dir() && !p.is_symlink() {
        for e in std::fs::read_dir(p).unwrap() {
            out.extend(walk(&e.unwrap().path()));
        }
    }
    out
}

fn users() -> Vec<u32> {
    if nix_is_root() {
        vec![0, NOBODY]
    } else {
        eprintln!("not root: cannot switch to nobody; testing the current user only");
        vec![current_uid()]
    }
}

fn nix_is_root() -> bool {
    current_uid() == 0
}

fn current_uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|u| u.parse().ok())
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs `sandbox test` and returns the rows as (check, observed, pass).
fn report(w: &World, cfg: &Value) -> Option<(Value, Output)> {
    let out = w.harness("test", cfg);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(2) && stderr.contains("user namespace") {
        skip(&format!(
            "user namespaces unavailable for uid {}: {stderr}",
            w.uid
        ));
        return None;
    }
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("no report for uid {}:\n{}", w.uid, text(&out)));
    Some((v, out))
}

fn row<'a>(report: &'a Value, prefix: &str) -> &'a Value {
    report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["check"].as_str().unwrap().starts_with(prefix))
        .unwrap_or_else(|| panic!("no row {prefix}"))
}

fn assert_all_pass(w: &World, report: &Value, out: &Output) {
    let failed: Vec<&Value> = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["pass"] != Value::Bool(true))
        .collect();
    assert!(
        failed.is_empty() && out.status.success(),
        "uid {}: failed rows {failed:#?}\n{}",
        w.uid,
        text(out)
    );
}

#[test]
fn no_network_mode_denies_everything_listed() {
    if landlock_missing() {
        return skip("Landlock is not enabled in this kernel");
    }
    for uid in users() {
        let w = World::new(uid);
        let cfg = w.config(
            &[],
            &[("PATH", "/usr/bin:/bin"), ("API_TOKEN", "s3cr3t-value")],
        );
        let Some((r, out)) = report(&w, &cfg) else {
            continue;
        };
        assert_all_pass(&w, &r, &out);
        // The rows the issue names, by value.
        assert_eq!(row(&r, "read home")["observed"], "refused (EACCES)");
        assert_eq!(row(&r, "read lockfile")["observed"], "refused (EACCES)");
        assert_eq!(row(&r, "write ${TMP} (private tmp)")["observed"], "allowed");
        assert_eq!(row(&r, "write ${TMP}/work")["observed"], "allowed");
        assert_eq!(
            row(&r, &format!("write {}", w.p("proj/data")))["observed"],
            "allowed"
        );
        assert_eq!(
            row(&r, &format!("read {}", w.p("notes")))["observed"],
            "allowed"
        );
        // The read-only view answers before Landlock does.
        assert_eq!(
            row(&r, "write elsewhere /tmp")["observed"],
            "refused (EROFS)"
        );
        assert_eq!(row(&r, "socket(AF_INET)")["observed"], "refused (EPERM)");
        assert_eq!(row(&r, "socket(AF_UNIX)")["observed"], "refused (EPERM)");
        assert_eq!(row(&r, "socketpair(AF_UNIX)")["observed"], "allowed");
        // truncate(2) outside every rule: Landlock from ABI 3, the seccomp compensation below.
        let t = row(&r, "truncate (");
        let by_seccomp = t["check"]
            .as_str()
            .unwrap()
            .starts_with("truncate (seccomp)");
        assert_eq!(
            t["observed"],
            if by_seccomp {
                "refused (EPERM)"
            } else {
                "refused (EROFS)"
            }
        );
        for s in ["ptrace", "unshare", "mount", "bpf", "keyctl"] {
            assert_eq!(row(&r, s)["observed"], "refused (EPERM)", "{s}");
        }
        assert_eq!(row(&r, "clone3")["observed"], "refused (ENOSYS)");
        assert_eq!(row(&r, "NoNewPrivs")["observed"], "1");
        assert_eq!(row(&r, "CapEff")["observed"], "0000000000000000");
        assert_eq!(row(&r, "CapPrm")["observed"], "0000000000000000");
        assert_eq!(
            row(&r, "environment")["observed"],
            "API_TOKEN PATH TMP TMPDIR"
        );
        // Values never leave the sandbox in the report.
        assert!(!String::from_utf8_lossy(&out.stdout).contains("s3cr3t-value"));
    }
}

#[test]
fn egress_mode_hands_back_the_listener_and_only_the_bridge_is_reachable() {
    if landlock_missing() {
        return skip("Landlock is not enabled in this kernel");
    }
    for uid in users() {
        let w = World::new(uid);
        let mut cfg = w.config(&["allowed.test:443"], &[]);
        cfg["egress_allowed"] = json!(["allowed.test:443"]);
        cfg["egress_checks"] = json!([["allowed.test:443", 200], ["denied.test:443", 403]]);
        let Some((r, out)) = report(&w, &cfg) else {
            continue;
        };
        assert_all_pass(&w, &r, &out);
        assert_eq!(row(&r, "socket(AF_INET)")["observed"], "allowed");
        assert_eq!(row(&r, "socket(AF_UNIX)")["observed"], "refused (EPERM)");
        assert_eq!(
            row(&r, "connect to the egress bridge port")["observed"],
            "allowed"
        );
        assert_eq!(
            row(&r, "egress CONNECT allowed.test:443")["observed"],
            "HTTP 200"
        );
        assert_eq!(
            row(&r, "egress CONNECT denied.test:443")["observed"],
            "HTTP 403"
        );
        let direct = row(&r, "direct connect to host loopback")["observed"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(direct.starts_with("refused"), "{direct}");
        assert_eq!(
            row(&r, "environment")["observed"],
            "ALL_PROXY HTTPS_PROXY HTTP_PROXY NODE_USE_ENV_PROXY NO_PROXY TMP TMPDIR all_proxy http_proxy https_proxy no_proxy"
        );
    }
}

#[test]
fn a_real_shell_cannot_read_home_or_write_outside() {
    if landlock_missing() {
        return skip("Landlock is not enabled in this kernel");
    }
    for uid in users() {
        let w = World::new(uid);
        let script = format!(
            "cat {key} && echo READ-KEY; echo x > {lockdir}/new && echo WROTE-LOCKDIR; \
             echo ok > $TMPDIR/f && cat $TMPDIR/f; echo data > {data}/f && echo WROTE-DATA; \
             cat {notes}",
            key = w.p("home/.ssh/id_ed25519"),
            lockdir = w.p("proj"),
            data = w.p("proj/data"),
            notes = w.p("notes/todo.txt"),
        );
        let mut cfg = w.config(&[], &[]);
        cfg["argv"] = json!(["/bin/sh", "-c", script]);
        let out = w.harness("run", &cfg);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains("READ-KEY"), "uid {uid}: {}", text(&out));
        assert!(!stdout.contains("SECRET KEY"), "uid {uid}: {}", text(&out));
        assert!(
            !stdout.contains("WROTE-LOCKDIR"),
            "uid {uid}: {}",
            text(&out)
        );
        assert!(
            stdout.contains("ok\nWROTE-DATA\nnotes"),
            "uid {uid}: {}",
            text(&out)
        );
        assert!(!w.root.join("proj/new").exists());
    }
}

#[test]
fn private_tmp_is_removed_after_the_run() {
    if landlock_missing() {
        return skip("Landlock is not enabled in this kernel");
    }
    let w = World::new(current_uid());
    let mut cfg = w.config(&[], &[]);
    cfg["argv"] = json!(["/bin/sh", "-c", "echo $TMPDIR; ls -ld $TMPDIR"]);
    let out = w.harness("run", &cfg);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let tmp = stdout.lines().next().unwrap_or("").to_string();
    assert!(tmp.contains("mcpsum"), "{}", text(&out));
    assert!(stdout.contains("drwx------"), "{}", text(&out));
    assert!(!Path::new(&tmp).exists(), "{tmp} left behind");
}

#[test]
fn setup_failure_is_one_line_and_exit_126() {
    let w = World::new(current_uid());
    let out = busy_retry(|| {
        Command::new(&w.harness)
            .args(["__sandbox-exec", "{not json"])
            .env_clear()
            .output()
    });
    assert_eq!(out.status.code(), Some(126), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("sandbox setup failed, server not started: launcher: bad spec"),
        "{stderr}"
    );
}

#[test]
fn a_missing_command_fails_before_spawning() {
    let w = World::new(current_uid());
    let mut cfg = w.config(&[], &[]);
    cfg["argv"] = json!(["no-such-server-binary"]);
    let out = w.harness("run", &cfg);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("exec: `no-such-server-binary` not found"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_weakened_layer_fails_the_report() {
    if landlock_missing() {
        return skip("Landlock is not enabled in this kernel");
    }
    let w = World::new(current_uid());
    let mut cfg = w.config(&[], &[]);
    cfg["weaken_seccomp"] = json!(["ptrace", "socket"]);
    let Some((r, out)) = report(&w, &cfg) else {
        return;
    };
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(row(&r, "ptrace")["pass"], false);
    assert_eq!(row(&r, "socket(AF_INET)")["pass"], false);
    assert_eq!(row(&r, "mount")["pass"], true);
}

#[test]
fn the_server_dies_with_the_thread_that_spawned_it() {
    if landlock_missing() {
        return skip("Landlock is not enabled in this kernel");
    }
    let w = World::new(current_uid());
    let mut cfg = w.config(&[], &[]);
    cfg["argv"] = json!(["/bin/sleep", "300"]);
    let mut harness = busy_retry(|| {
        Command::new(&w.harness)
            .arg("run")
            .arg(cfg.to_string())
            .env_clear()
            .spawn()
    });
    let children = format!("/proc/{0}/task/{0}/children", harness.id());
    let mut server = String::new();
    for _ in 0..100 {
        server = std::fs::read_to_string(&children).unwrap_or_default();
        let comm =
            std::fs::read_to_string(format!("/proc/{}/comm", server.trim())).unwrap_or_default();
        if comm.trim() == "sleep" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let server = server.trim().to_string();
    assert!(!server.is_empty(), "server did not start");
    harness.kill().unwrap();
    harness.wait().unwrap();
    let mut gone = false;
    for _ in 0..100 {
        let state = std::fs::read_to_string(format!("/proc/{server}/stat")).unwrap_or_default();
        // Gone, or a zombie waiting for init to reap it.
        if state.is_empty() || state.contains(") Z") {
            gone = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(gone, "server {server} outlived mcpsum");
}

#[test]
fn a_launcher_failure_in_egress_mode_is_reported_and_nothing_runs() {
    let w = World::new(current_uid());
    let mut cfg = w.config(&["a.test:443"], &[]);
    cfg["argv"] = json!(["/bin/sh", "-c", "echo SERVER-RAN"]);
    // A variable slipped in after `prepare`: the launcher refuses before any namespace.
    cfg["extra_env"] = json!([["LEAKED", "x"]]);
    let out = w.harness("run", &cfg);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("SERVER-RAN"));
    assert!(
        stderr.contains(
            "sandbox setup failed, server not started: environment: unexpected variables [\"LEAKED\"]"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("egress bridge: the launcher exited before reporting its listener"),
        "{stderr}"
    );
}

/// The runtime base is enough for the interpreters MCP servers use: threads, child processes,
/// async I/O (libuv falls back when io_uring is refused), the private tmp.
#[test]
fn python_and_node_run_sandboxed() {
    if landlock_missing() {
        return skip("Landlock is not enabled in this kernel");
    }
    let cases: [(&str, &[&str], &str); 2] = [
        (
            "/usr/bin/python3",
            &[
                "-c",
                "import asyncio,subprocess,threading,tempfile,ssl,json\n\
                 print(subprocess.run(['echo','child'],capture_output=True,text=True).stdout.strip())\n\
                 print(asyncio.run(asyncio.sleep(0,'asyncio')))\n\
                 t=threading.Thread(target=print,args=('thread',)); t.start(); t.join()\n\
                 print('tmp' if tempfile.mkstemp()[1].startswith(tempfile.gettempdir()) else 'no')",
            ],
            "child\nasyncio\nthread\ntmp\n",
        ),
        (
            "/usr/bin/node",
            &[
                "-e",
                "const cp=require('child_process');\
                 console.log(cp.execFileSync('echo',['child']).toString().trim());\
                 require('fs').promises.readFile('/etc/os-release','utf8')\
                 .then(()=>console.log('async'));",
            ],
            "child\nasync\n",
        ),
    ];
    for uid in users() {
        for (bin, args, expected) in cases {
            if !Path::new(bin).exists() {
                eprintln!("{bin} not installed: case skipped");
                continue;
            }
            let w = World::new(uid);
            let mut cfg = w.config(&[], &[("PATH", "/usr/bin:/bin")]);
            let mut argv = vec![bin.to_string()];
            argv.extend(args.iter().map(|a| (*a).to_string()));
            cfg["argv"] = json!(argv);
            let out = w.harness("run", &cfg);
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                expected,
                "uid {uid} {bin}: {}",
                text(&out)
            );
        }
    }
}
