//! `policy.sandbox` (I5) through the real binary, as root and as `nobody` (via `setpriv`): real
//! servers locked and proxied sandboxed, an escape battery (`tests/it/sandbox/escape_server.py`),
//! refused policies, `mcpsum sandbox test`, and the process tree dying with the proxy.
//!
//! A kernel without a layer skips with a printed reason, unless `MCPSUM_REQUIRE_SANDBOX=1`;
//! missing `target/test-deps` skips unless `MCPSUM_REQUIRE_REAL_SERVERS=1` (CI sets both).
//! Only loopback is ever contacted here; `tests/it/egress.rs` builds its own network namespaces.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{self, Client, Run, test_dep};

pub const NOBODY: u32 = 65534;
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Whether a sandbox layer missing on this kernel is a failure (CI) rather than a skip.
pub fn sandbox_required() -> bool {
    std::env::var_os("MCPSUM_REQUIRE_SANDBOX").is_some_and(|v| v == "1")
}

/// Prints why a test skips, or fails under `MCPSUM_REQUIRE_SANDBOX=1`.
pub fn skip(why: &str) {
    assert!(!sandbox_required(), "MCPSUM_REQUIRE_SANDBOX=1 but: {why}");
    eprintln!("skipping: {why}");
}

/// The reason a run says the sandbox cannot be built on this kernel, if it says so.
pub fn kernel_lacks(run: &Run) -> Option<String> {
    let e = &run.stderr;
    let lacks = e.contains("landlock: not available")
        || e.contains("landlock: kernel ABI")
        || e.contains("seccomp: kernel lacks")
        || e.contains("user namespace:");
    (run.code == 2 && lacks).then(|| format!("the sandbox cannot be built here: {e}"))
}

pub fn current_uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

/// root and `nobody` when running as root; otherwise the current user only (with a note).
pub fn users() -> Vec<u32> {
    if current_uid() == 0 && Path::new("/usr/bin/setpriv").exists() {
        vec![0, NOBODY]
    } else if current_uid() == 0 {
        eprintln!("`/usr/bin/setpriv` is missing: testing root only");
        vec![0]
    } else {
        eprintln!("not root: cannot switch to nobody; testing the current user only");
        vec![current_uid()]
    }
}

/// Whether `nobody` can run `argv` (the test deps under `/root/.pyenv` may be closed to it),
/// started the way mcpsum is started: through `env -i`.
pub fn nobody_can_run(argv: &[&str]) -> bool {
    Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/env",
            "-i",
        ])
        .arg(format!("PATH={PATH}"))
        .args(argv)
        .env_clear()
        .env("PATH", PATH)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Credential files every world's home holds (besides `.ssh/id_ed25519`), below the folders a
/// command installed in the home would sit in (`~/.cargo/bin`, `~/.local/bin`).
pub const CREDENTIALS: &[&str] = &[
    ".cargo/credentials.toml",
    ".local/share/keyrings/login.keyring",
    ".aws/credentials",
    ".npmrc",
    ".docker/config.json",
    ".claude/.credentials.json",
    ".npm-global/etc/npmrc",
    ".codex/auth.json",
];

/// The host's TLS private key that Debian's `ssl-cert` installs, when present.
pub const SNAKEOIL_KEY: &str = "/etc/ssl/private/ssl-cert-snakeoil.key";

/// A world for one user: `home` (with `.ssh/id_ed25519`), `proj/mcp.lock`, `state`, `data`
/// (readable by policy), `outside` (never in a policy) and `bin/mcpsum` and `bin/mcpsum-launch`
/// (links to, or copies of, the binaries under test), all reachable by that user.
pub struct Sbx {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub bin: PathBuf,
    pub uid: u32,
    /// Variables added to `mcpsum`'s environment (for `--env` passthrough).
    pub extra_env: Vec<(String, String)>,
}

impl Sbx {
    pub fn new(uid: u32) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("mcpsum-sbx-")
            .tempdir()
            .expect("temp dir");
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        for d in ["home/.ssh", "proj", "state", "data", "outside", "bin"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("home/.ssh/id_ed25519"), "SECRET-SSH-KEY").unwrap();
        for rel in CREDENTIALS {
            let p = root.join("home").join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "SECRET-CREDENTIAL").unwrap();
        }
        std::fs::write(root.join("outside/secret.txt"), "OUTSIDE-SECRET").unwrap();
        std::fs::write(root.join("data/readme.txt"), "readable data").unwrap();
        let bin = root.join("bin/mcpsum");
        // The launcher sits beside the binary, as `cargo install` puts it.
        for (from, to) in [
            (env!("CARGO_BIN_EXE_mcpsum"), bin.clone()),
            (
                env!("CARGO_BIN_EXE_mcpsum-launch"),
                root.join("bin/mcpsum-launch"),
            ),
        ] {
            // A hard link opens no write descriptor (a copy races with forks: ETXTBSY).
            if std::fs::hard_link(from, &to).is_err() {
                std::fs::copy(from, &to).unwrap();
                std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        let w = Self {
            _dir: dir,
            root,
            bin,
            uid,
            extra_env: Vec::new(),
        };
        w.chown();
        w
    }

    pub fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn s(&self, rel: &str) -> String {
        self.p(rel).display().to_string()
    }

    /// The credential paths of this world's home a server must not read.
    pub fn secrets(&self) -> Vec<String> {
        [".ssh", ".ssh/id_ed25519"]
            .iter()
            .chain(CREDENTIALS)
            .map(|rel| self.s(&format!("home/{rel}")))
            .collect()
    }

    pub fn lockfile(&self) -> PathBuf {
        self.p("proj/mcp.lock")
    }

    pub fn lock_json(&self) -> Value {
        serde_json::from_slice(&std::fs::read(self.lockfile()).expect("lockfile")).expect("json")
    }

    /// Gives everything but the binaries (links to the build's) to this world's user.
    pub fn chown(&self) {
        fn walk(p: &Path, bin: &Path, uid: u32) {
            if p == bin || p.parent() == bin.parent() && p.is_file() {
                return;
            }
            std::os::unix::fs::lchown(p, Some(uid), Some(uid)).unwrap();
            if p.is_dir() && !p.is_symlink() {
                for e in std::fs::read_dir(p).unwrap() {
                    walk(&e.unwrap().path(), bin, uid);
                }
            }
        }
        walk(&self.root, &self.bin, self.uid);
    }

    /// Writes a JSON file (readable by this world's user) and returns its path.
    pub fn json_file(&self, rel: &str, v: &Value) -> PathBuf {
        let p = self.p(rel);
        std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
        self.chown();
        p
    }

    /// The environment `mcpsum` runs with.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("PATH".into(), PATH.into()),
            ("HOME".into(), self.s("home")),
            ("MCPSUM_STATE_DIR".into(), self.s("state")),
            ("NO_COLOR".into(), "1".into()),
        ]
        .into_iter()
        .chain(self.extra_env.iter().cloned())
        .collect()
    }

    /// argv of `mcpsum --lockfile L ARGS...` as this world's user, with an explicit environment.
    pub fn argv<S: AsRef<str>>(&self, args: &[S]) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        if self.uid != current_uid() {
            v.extend([
                "/usr/bin/setpriv".to_owned(),
                format!("--reuid={}", self.uid),
                format!("--regid={}", self.uid),
                "--clear-groups".to_owned(),
            ]);
        }
        v.extend(["/usr/bin/env".to_owned(), "-i".to_owned()]);
        v.extend(self.env().into_iter().map(|(k, val)| format!("{k}={val}")));
        v.push(self.bin.display().to_string());
        v.push("--lockfile".into());
        v.push(self.lockfile().display().to_string());
        v.extend(args.iter().map(|a| a.as_ref().to_owned()));
        v
    }

    pub fn command<S: AsRef<str>>(&self, args: &[S]) -> Command {
        command_of(&self.argv(args), &self.root)
    }

    pub fn run<S: AsRef<str>>(&self, args: &[S]) -> Run {
        let mut cmd = self.command(args);
        run_output(&mut cmd)
    }

    /// `mcpsum lock --name NAME --sandbox POLICY -- ARGV...`.
    pub fn lock(&self, name: &str, policy: &Value, argv: &[String]) -> Run {
        self.run(&self.lock_args(name, policy, &[], argv))
    }

    /// Arguments of `lock --name NAME --sandbox POLICY [--env VAR]... -- ARGV...`.
    pub fn lock_args(
        &self,
        name: &str,
        policy: &Value,
        env: &[&str],
        argv: &[String],
    ) -> Vec<String> {
        let file = self.json_file(&format!("{name}.policy.json"), policy);
        let mut args = vec![
            "lock".to_owned(),
            "--name".into(),
            name.into(),
            "--sandbox".into(),
            file.display().to_string(),
        ];
        for e in env {
            args.extend(["--env".to_owned(), (*e).to_owned()]);
        }
        args.push("--".into());
        args.extend(argv.iter().cloned());
        args
    }
}

pub fn command_of(argv: &[String], dir: &Path) -> Command {
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..])
        .env_clear()
        .env("PATH", PATH)
        .current_dir(dir)
        .stdin(Stdio::null());
    c
}

pub fn run_output(cmd: &mut Command) -> Run {
    let out = cmd.output().expect("run mcpsum");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `tests/it/sandbox/<name>`.
pub fn helper(name: &str) -> PathBuf {
    support::repo().join("tests/it/sandbox").join(name)
}

/// argv of the escape server.
pub fn escape_argv() -> Vec<String> {
    vec![
        support::PYTHON.to_owned(),
        helper("escape_server.py").display().to_string(),
    ]
}

/// A policy: `read`, `write`, `allow`.
pub fn policy(read: &[String], write: &[String], allow: &[String]) -> Value {
    json!({"filesystem": {"read": read, "write": write}, "network": {"allow": allow}})
}

/// A raw JSON-RPC session with `mcpsum proxy` over its stdio: `cmd` spawned (stderr to
/// `stderr`), the legacy handshake done. Answers may take 90 s (a sandboxed start is slow);
/// dropped, it ends like a client does (EOF), so the proxy cleans up, and is killed only if it
/// lingers.
pub fn session(cmd: Command, stderr: PathBuf) -> Client {
    let mut s = Client::spawn(cmd, Some(stderr))
        .with_patience(Duration::from_secs(90))
        .ending_gracefully(Duration::from_secs(10));
    let init = s.hello();
    assert!(init.get("result").is_some(), "initialize failed: {init}");
    s
}

/// Calls a tool of the escape server and returns its JSON answer.
pub fn escape_call(s: &mut Client, tool: &str, args: Value) -> Value {
    let r = s.request_next("tools/call", json!({"name": tool, "arguments": args}));
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{tool}: no text result: {r}\n{}", s.stderr()));
    serde_json::from_str(text).expect("tool answers JSON")
}

/// Whether `pid` is a live (not zombie) process running `sleep <secs>`.
fn sleeping(pid: u64, secs: u64) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = stat
        .rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
    cmdline == format!("sleep\0{secs}\0").as_bytes() && !zombie
}

fn wait_gone(pid: u64, secs: u64, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if !sleeping(pid, secs) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    !sleeping(pid, secs)
}

fn tool_names(entry: &Value) -> Vec<String> {
    entry["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {entry}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Runs `tests/it/clients/sdk_client.py` (as root, with the venv's `mcp` SDK) against `argv`.
pub fn sdk_client(w: &Sbx, proxy_argv: &[String], steps: Value) -> Value {
    let python = test_dep("venv/bin/python").expect("checked by the caller");
    let plan = json!({"mode": "auto", "command": proxy_argv, "env": {}, "steps": steps});
    let plan_path = w.root.join(format!("plan-{}.json", std::process::id()));
    std::fs::write(&plan_path, serde_json::to_vec(&plan).unwrap()).unwrap();
    let out = Command::new(python)
        .arg(support::repo().join("tests/it/clients/sdk_client.py"))
        .arg(&plan_path)
        .env_clear()
        .env("PATH", PATH)
        .current_dir(&w.root)
        .output()
        .expect("run the SDK client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "SDK client failed (uid {})\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        w.uid
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

pub fn first_text(step: &Value) -> String {
    step["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

// ---------------------------------------------------------------------------------------------
// 1. Real servers, locked and proxied inside the sandbox.
// ---------------------------------------------------------------------------------------------

#[test]
fn mcp_server_time_locks_and_answers_sandboxed() {
    let Some(server) = test_dep("venv/bin/mcp-server-time") else {
        return;
    };
    if test_dep("venv/bin/python").is_none() {
        return;
    }
    let server = server.display().to_string();
    for uid in users() {
        let w = Sbx::new(uid);
        let (name, argv) = if uid != 0 && !nobody_can_run(&[&server, "--help"]) {
            eprintln!(
                "uid {uid} cannot run `{server}` (its Python lives under /root/.pyenv): \
                 using the fake server with /usr/bin/python3 for this user"
            );
            (
                "fake",
                support::fake_argv(&support::bundled_scenario("example.json")),
            )
        } else {
            ("time", vec![server.clone()])
        };
        let read = if name == "fake" {
            vec![support::repo().join("tests/servers").display().to_string()]
        } else {
            vec![]
        };
        let r = w.lock(name, &policy(&read, &[], &[]), &argv);
        if let Some(why) = kernel_lacks(&r) {
            return skip(&why);
        }
        assert_eq!(r.code, 0, "uid {uid}: {r:#?}");
        let entry = w.lock_json()["servers"][name].clone();
        assert_eq!(
            entry["policy"]["sandbox"]["network"]["allow"],
            json!([]),
            "{entry}"
        );
        let call = if name == "time" {
            json!({"op": "call", "name": "get_current_time", "arguments": {"timezone": "Etc/UTC"}})
        } else {
            json!({"op": "call", "name": "echo", "arguments": {"text": "hi"}})
        };
        let r = sdk_client(
            &w,
            &w.argv(&["proxy", "--name", name]),
            json!([{"op": "list_all"}, call]),
        );
        let listed: Vec<String> = r["steps"][0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(listed, tool_names(&entry), "uid {uid}: {r:#}");
        let text = first_text(&r["steps"][1]);
        let want = if name == "time" { "Etc/UTC" } else { "hi" };
        assert!(text.contains(want), "uid {uid}: call answered {r:#}");
        w.run(&["verify"])
            .code(0)
            .stdout_has(&[&format!("ok {name}: clean")]);
    }
}

#[test]
fn filesystem_server_cannot_read_outside_even_when_asked() {
    let Some(index) =
        test_dep("node/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
    else {
        return;
    };
    if test_dep("venv/bin/python").is_none() {
        return;
    }
    let modules = support::repo().join("target/test-deps/node/node_modules");
    for uid in users() {
        let w = Sbx::new(uid);
        std::fs::create_dir(w.p("allowed")).unwrap();
        std::fs::write(w.p("allowed/hello.txt"), "hello inside").unwrap();
        // Overwriting a file, the server replaces it by a rename and restores its mode with
        // `chmod`: that must work in the write set, for root too.
        std::fs::write(w.p("allowed/run.sh"), "#!/bin/sh\n").unwrap();
        w.chown();
        std::fs::set_permissions(
            w.p("allowed/run.sh"),
            std::fs::Permissions::from_mode(0o750),
        )
        .unwrap();
        if uid != 0 && !nobody_can_run(&["/usr/bin/test", "-r", &index.display().to_string()]) {
            eprintln!("skipping uid {uid}: it cannot read `{}`", index.display());
            continue;
        }
        // The server is told both folders; the policy grants only `allowed`: the server's own
        // check passes for `outside`, so only the sandbox stands between it and the file.
        let argv = vec![
            "/usr/bin/node".to_owned(),
            index.display().to_string(),
            w.s("allowed"),
            w.s("outside"),
        ];
        let pol = policy(&[modules.display().to_string()], &[w.s("allowed")], &[]);
        let r = w.lock("fs", &pol, &argv);
        if let Some(why) = kernel_lacks(&r) {
            return skip(&why);
        }
        r.code(0).stderr_has(&["locked `fs`"]);
        let entry = w.lock_json()["servers"]["fs"].clone();
        let read = |path: String| json!({"op": "call", "name": "read_text_file", "arguments": {"path": path}});
        let r = sdk_client(
            &w,
            &w.argv(&["proxy", "--name", "fs"]),
            json!([
                {"op": "list_all"},
                read(w.s("allowed/hello.txt")),
                read(w.s("outside/secret.txt")),
                read(w.s("home/.ssh/id_ed25519")),
                {"op": "call", "name": "write_file",
                 "arguments": {"path": w.s("outside/pwned.txt"), "content": "x"}},
                {"op": "call", "name": "write_file",
                 "arguments": {"path": w.s("allowed/new.txt"), "content": "written"}},
                {"op": "call", "name": "write_file",
                 "arguments": {"path": w.s("allowed/run.sh"), "content": "#!/bin/sh\ntrue\n"}},
            ]),
        );
        let steps = &r["steps"];
        let listed: Vec<String> = steps[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(listed, tool_names(&entry), "uid {uid}");
        assert_eq!(first_text(&steps[1]), "hello inside", "uid {uid}: {r:#}");
        for (i, what) in [(2, "outside/secret.txt"), (3, "home/.ssh/id_ed25519")] {
            let text = first_text(&steps[i]);
            assert!(
                steps[i]["result"]["isError"] == json!(true) && !text.contains("SECRET"),
                "uid {uid}: reading {what} was not refused: {}",
                steps[i]
            );
        }
        assert!(
            first_text(&steps[2]).contains("EACCES")
                || first_text(&steps[2]).contains("permission denied"),
            "uid {uid}: the sandbox (EACCES) should refuse `outside`: {}",
            steps[2]
        );
        assert_eq!(steps[4]["result"]["isError"], json!(true), "uid {uid}");
        assert!(
            !w.p("outside/pwned.txt").exists(),
            "uid {uid}: wrote outside"
        );
        assert_eq!(
            std::fs::read_to_string(w.p("allowed/new.txt")).unwrap_or_default(),
            "written",
            "uid {uid}: {}",
            steps[5]
        );
        let run = std::fs::metadata(w.p("allowed/run.sh")).unwrap();
        assert_eq!(
            (run.len(), run.permissions().mode() & 0o7777),
            (15, 0o750),
            "uid {uid}: the rewritten file lost its mode (chmod refused?): {}",
            steps[6]
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 1b. The escape battery: a server of our own tries everything; the sandbox refuses it all.
// ---------------------------------------------------------------------------------------------

fn refused(r: &Value, key: &str, errnos: &[&str], ctx: &str) {
    let v = &r[key];
    assert_eq!(v["ok"], json!(false), "{ctx}: `{key}` was not refused: {v}");
    if !errnos.is_empty() {
        let got = v["errno"].as_str().unwrap_or_default();
        assert!(
            errnos.contains(&got),
            "{ctx}: `{key}` refused with {v}, expected one of {errnos:?}"
        );
    }
}

#[test]
fn escape_battery_finds_nothing() {
    escape_battery(false);
}

#[test]
fn escape_battery_finds_nothing_in_allow_mode() {
    escape_battery(true);
}

/// The battery with `network.allow: []`, or (`allow_mode`) with one listed loopback address
/// (another listener of this test; the server gets its own network namespace).
fn escape_battery(allow_mode: bool) {
    for uid in users() {
        let w = Sbx::new(uid);
        // Things outside to reach for: a TCP listener on loopback, an "ssh-agent" pathname
        // socket (connectable by anyone) and an abstract socket.
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tcp_port = tcp.local_addr().unwrap().port();
        let agent = w.p("outside/agent.sock");
        let _unix = std::os::unix::net::UnixListener::bind(&agent).unwrap();
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o777)).unwrap();
        let abstract_name = format!("mcpsum-it-agent-{}-{uid}-{allow_mode}", std::process::id());
        let _abs = {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes())
                .unwrap();
            std::os::unix::net::UnixListener::bind_addr(&addr).unwrap()
        };
        w.chown();
        let listed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let allow: Vec<String> = if allow_mode {
            vec![format!("127.0.0.1:{}", listed.local_addr().unwrap().port())]
        } else {
            vec![]
        };
        let mut pol = policy(
            &[helper("").display().to_string(), w.s("data")],
            &[],
            &allow,
        );
        pol["limits"] = json!({"tasks": BATTERY_TASKS});
        let r = w.lock("escape", &pol, &escape_argv());
        if let Some(why) = kernel_lacks(&r) {
            return skip(&why);
        }
        r.code(0);
        let mut s = session(
            w.command(&["proxy", "--name", "escape"]),
            w.p("proxy.stderr"),
        );
        metadata_and_tasks(
            &mut s,
            &w,
            View::MountNamespace,
            &format!("uid {uid}, allow {allow:?}"),
        );
        let res = escape_call(
            &mut s,
            "escape",
            json!({"home": w.s("home"), "outside": w.s("outside"), "lockfile": w.lockfile(),
                   "readable": w.s("data/readme.txt"), "tcp_port": tcp_port,
                   "unix_socket": agent, "abstract": abstract_name, "secrets": w.secrets()}),
        );
        let ctx = format!("uid {uid}, allow {allow:?}: {res:#}");
        // The server's parent is its guard, a child of the proxy outside the sandbox.
        let guard = res["ppid"].as_u64().unwrap();
        assert_eq!(
            parent_of(guard),
            Some(u64::from(s.child.id())),
            "{ctx}: the parent is the proxy's guard"
        );
        assert_eq!(res["uid"], json!(uid), "{ctx}");
        // Positive controls: the battery runs where it should succeed.
        assert_eq!(res["read_allowed"]["value"], "readable data", "{ctx}");
        assert_eq!(res["write_private_tmp"]["ok"], json!(true), "{ctx}");
        // EROFS: the read-only view answers writes outside before Landlock does.
        let acc = ["EACCES", "EPERM", "EROFS"];
        for key in [
            "read_ssh_key",
            "list_home",
            "read_lockfile",
            "write_outside",
            "write_tmp_root",
            "read_via_symlink",
            "write_dev_shm",
            "proxy_environ",
            "proxy_cwd",
            "proxy_mem",
        ] {
            refused(&res, key, &acc, &ctx);
        }
        refused_secrets(&res, &w, &ctx);
        if uid == 0 {
            refused(&res, "read_shadow", &acc, &ctx);
        }
        // Outside the write set the filesystem is read-only, for root and for a user's own
        // files alike.
        refused(&res, "chmod_outside_plain", &["EROFS"], &ctx);
        // Landlock refuses the link (EXDEV without the Refer right across, EACCES otherwise).
        refused(
            &res,
            "hardlink_outside",
            &["EXDEV", "EACCES", "EPERM"],
            &ctx,
        );
        if allow_mode {
            // TCP sockets exist, but the host's loopback is another namespace's.
            refused(&res, "tcp_loopback", &[], &ctx);
            refused(&res, "tcp6_loopback", &[], &ctx);
        } else {
            for key in ["tcp_loopback", "tcp6_loopback", "udp"] {
                refused(&res, key, &["EPERM", "EACCES"], &ctx);
            }
        }
        for key in [
            "unix_pathname",
            "unix_abstract",
            "netlink",
            "ptrace_attach_proxy",
            "kill_proxy_0",
            "kill_proxy_cont",
            "unshare_user",
            "mount_tmpfs",
            "chroot",
            "rlimit_guard",
            "setpriority_guard",
            "chmod_world_writable",
            "chmod_setuid",
            "chown",
            "setxattr",
            "socketpair_dgram",
            "sysv_shm",
            "posix_mq",
        ] {
            refused(&res, key, &["EPERM", "EACCES"], &ctx);
        }
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&w.lockfile()), 0o644, "{ctx}: the lockfile's mode");
        let proxy_vars = [
            "ALL_PROXY",
            "HTTPS_PROXY",
            "HTTP_PROXY",
            "NODE_USE_ENV_PROXY",
            "NO_PROXY",
            "all_proxy",
            "http_proxy",
            "https_proxy",
            "no_proxy",
        ];
        let names: Vec<&str> = res["env_names"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .filter(|n| !(allow_mode && proxy_vars.contains(n)))
            .collect();
        assert_eq!(names, ["TMP", "TMPDIR"], "{ctx}");
        assert_eq!(res["no_new_privs"], "1", "{ctx}");
        assert_eq!(res["cap_eff"], "0000000000000000", "{ctx}");
        assert!(!w.p("outside/pwned").exists(), "{ctx}");
        assert!(!Path::new("/tmp/mcpsum-escape-pwned").exists(), "{ctx}");
        // The task cgroup (root) or the own one (anyone): never left, never raised.
        refused(&res, "cgroup_leave", &["EROFS", "EACCES", "EPERM"], &ctx);
        refused(&res, "cgroup_raise", &["EROFS", "EACCES", "EPERM"], &ctx);
        let task_cgroup = (uid == 0 && pids_cgroup_usable()).then(|| {
            // A root server's tree is in a pids cgroup of its own, named for its guard.
            let dir = pids_cgroup_of(guard)
                .unwrap()
                .join(format!("mcpsum-{guard}"));
            assert_eq!(
                pids_cgroup_of(res["pid"].as_u64().unwrap()),
                Some(dir.clone()),
                "{ctx}"
            );
            let max = std::fs::read_to_string(dir.join("pids.max")).unwrap();
            assert_eq!(max.trim(), BATTERY_TASKS.to_string(), "{ctx}");
            dir
        });
        // The proxy is alive and well after all that.
        let ping = s.request_next("ping", json!({}));
        assert!(ping.get("result").is_some(), "uid {uid}: {ping}");
        if !allow_mode {
            // The proxy killed: its guard still ends the tree and removes the task cgroup.
            s.child.kill().unwrap();
        }
        drop(s);
        if let Some(dir) = task_cgroup {
            let deadline = Instant::now() + Duration::from_secs(5);
            while dir.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            assert!(!dir.exists(), "{ctx}: `{}` is left behind", dir.display());
        }
    }
}

/// Every credential path of the world and the host's TLS private keys were refused.
fn refused_secrets(res: &Value, w: &Sbx, ctx: &str) {
    let acc = ["EACCES", "EPERM"];
    for p in w.secrets() {
        refused(&res["secrets"], &p, &acc, ctx);
    }
    if Path::new(SNAKEOIL_KEY).exists() {
        refused(res, "read_tls_key", &acc, ctx);
        refused(res, "list_tls_private", &acc, ctx);
    }
}

#[test]
fn escape_battery_read_classes() {
    read_classes(false);
}

#[test]
fn escape_battery_read_classes_in_allow_mode() {
    read_classes(true);
}

/// The ways a server's own command could widen its read set, each a class of the battery:
/// a `#!` line with `..` (directly and through `env -S`), a command path with `..`, and a
/// command installed in the home next to credentials (`~/.cargo/bin`, `~/.local/bin`). The
/// policy lists only `data`: home, credentials and TLS keys must stay closed in every case.
fn read_classes(allow_mode: bool) {
    let server = std::fs::read_to_string(helper("escape_server.py")).unwrap();
    let py = support::PYTHON;
    for uid in users() {
        let w = Sbx::new(uid);
        let listed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let allow: Vec<String> = if allow_mode {
            vec![format!("127.0.0.1:{}", listed.local_addr().unwrap().port())]
        } else {
            vec![]
        };
        let script = |rel: &str, shebang: &str| {
            let p = w.p(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, format!("{shebang}\n{server}")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            p.display().to_string()
        };
        // `/etc/../bin` is `/bin`: the prefix of its interpreter would be `/etc/..`, the root.
        let dotdot = format!(
            "/etc/../bin/{}",
            Path::new(py).file_name().unwrap().display()
        );
        let classes = [
            ("#! with ..", script("srv/dotdot", &format!("#!{dotdot}"))),
            (
                "#! env -S with ..",
                script("srv/env-s", &format!("#!/usr/bin/env -S {dotdot}")),
            ),
            ("command path with ..", {
                script("bin/escape-srv", &format!("#!{py}"));
                w.s("data/../bin/escape-srv")
            }),
            (
                "command in ~/.cargo/bin",
                script("home/.cargo/bin/escape-srv", &format!("#!{py}")),
            ),
            (
                "command in ~/.local/bin",
                script("home/.local/bin/escape-srv", &format!("#!{py}")),
            ),
            // Folders of the home that are no install layout: the command's own folder only.
            (
                "command in ~/.claude/bin",
                script("home/.claude/bin/escape-srv", &format!("#!{py}")),
            ),
            (
                "command in ~/.npm-global/bin",
                script("home/.npm-global/bin/escape-srv", &format!("#!{py}")),
            ),
            (
                "command in ~/tools/bin",
                script("home/tools/bin/escape-srv", &format!("#!{py}")),
            ),
        ];
        w.chown();
        for (i, (class, cmd)) in classes.iter().enumerate() {
            let name = format!("class{i}");
            let r = w.lock(
                &name,
                &policy(&[w.s("data")], &[], &allow),
                std::slice::from_ref(cmd),
            );
            if let Some(why) = kernel_lacks(&r) {
                return skip(&why);
            }
            r.code(0);
            let mut s = session(
                w.command(&["proxy", "--name", &name]),
                w.p(&format!("{name}.stderr")),
            );
            let res = escape_call(
                &mut s,
                "escape",
                json!({"home": w.s("home"), "outside": w.s("outside"), "lockfile": w.lockfile(),
                       "readable": w.s("data/readme.txt"), "tcp_port": 9, "unix_socket": "/",
                       "abstract": "x", "secrets": w.secrets()}),
            );
            let ctx = format!("uid {uid}, allow {allow:?}, {class}: {res:#}");
            assert_eq!(res["read_allowed"]["value"], "readable data", "{ctx}");
            refused_secrets(&res, &w, &ctx);
            for key in ["read_ssh_key", "list_home", "read_lockfile"] {
                refused(&res, key, &["EACCES", "EPERM"], &ctx);
            }
            if uid == 0 {
                refused(&res, "read_shadow", &["EACCES", "EPERM"], &ctx);
            }
        }
    }
}

/// `argv` in a private mount namespace of its own, after the shell commands `setup` ran there
/// as root (bind mounts over `/etc/passwd`, of `/`, ...): the host's mounts stay untouched.
fn in_mount_ns(setup: &str, argv: Vec<String>) -> Vec<String> {
    let mut v: Vec<String> = [
        "/usr/bin/unshare",
        "-m",
        "--propagation",
        "private",
        "/bin/sh",
        "-c",
    ]
    .map(String::from)
    .to_vec();
    v.push(format!("{setup} && exec \"$@\""));
    v.push("sh".into());
    v.extend(argv);
    v
}

/// `w.argv(args)` with `HOME` set to `home`, or unset.
fn argv_with_home(w: &Sbx, args: &[String], home: Option<&str>) -> Vec<String> {
    w.argv(args)
        .into_iter()
        .filter_map(|a| match a.strip_prefix("HOME=") {
            Some(_) => home.map(|h| format!("HOME={h}")),
            None => Some(a),
        })
        .collect()
}

/// A copy of `/etc/passwd` in which `uid`'s home is `home` (when given), plus `extra` lines.
fn passwd_with(w: &Sbx, uid: u32, home: Option<&str>, extra: &str) -> PathBuf {
    let host = std::fs::read_to_string("/etc/passwd").unwrap();
    let mut out = String::new();
    for line in host.lines() {
        let mut f: Vec<String> = line.split(':').map(String::from).collect();
        if let Some(h) = home
            && f.len() == 7
            && f[2] == uid.to_string()
        {
            f[5] = h.to_owned();
            f[6] = "/bin/sh".to_owned();
        }
        out.push_str(&f.join(":"));
        out.push('\n');
    }
    out.push_str(extra);
    let p = w.p("passwd");
    std::fs::write(&p, out).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    p
}

#[test]
fn escape_battery_home_classes() {
    home_classes(false);
}

#[test]
fn escape_battery_home_classes_in_allow_mode() {
    home_classes(true);
}

/// The home is known without `$HOME`: a command installed in `~/bin` (prefix `~/bin`, never
/// `~`) while `HOME` is unset (a client that clears the environment), while it names another
/// folder, and while the home is another user's in `/etc/passwd`. Each runs in a mount
/// namespace where `/etc/passwd` says where the home is.
fn home_classes(allow_mode: bool) {
    if current_uid() != 0 {
        return skip("bind mounts over /etc/passwd need root");
    }
    let server = std::fs::read_to_string(helper("escape_server.py")).unwrap();
    for uid in users() {
        let w = Sbx::new(uid);
        let listed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let allow: Vec<String> = if allow_mode {
            vec![format!("127.0.0.1:{}", listed.local_addr().unwrap().port())]
        } else {
            vec![]
        };
        let cmd = w.p("home/bin/escape-srv");
        std::fs::create_dir_all(cmd.parent().unwrap()).unwrap();
        std::fs::write(&cmd, format!("#!{}\n{server}", support::PYTHON)).unwrap();
        std::fs::set_permissions(&cmd, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir_all(w.p("elsewhere")).unwrap();
        let home = w.s("home");
        let elsewhere = w.s("elsewhere");
        let alice = format!("mcpsum-it-alice:x:4242:4242::{home}:/bin/sh\n");
        let classes = [
            (
                "HOME unset, home from passwd",
                None,
                passwd_with(&w, uid, Some(&home), ""),
            ),
            (
                "HOME elsewhere, home from passwd",
                Some(elsewhere.as_str()),
                passwd_with(&w, uid, Some(&home), ""),
            ),
            (
                "HOME elsewhere, another user's home",
                Some(elsewhere.as_str()),
                passwd_with(&w, uid, None, &alice),
            ),
        ];
        w.chown();
        for (i, (class, home_var, passwd)) in classes.iter().enumerate() {
            let setup = format!("mount --bind {} /etc/passwd", passwd.display());
            let name = format!("home{i}");
            let args = w.lock_args(
                &name,
                &policy(&[w.s("data")], &[], &allow),
                &[],
                &[cmd.display().to_string()],
            );
            let argv = in_mount_ns(&setup, argv_with_home(&w, &args, *home_var));
            let r = run_output(&mut command_of(&argv, &w.root));
            if let Some(why) = kernel_lacks(&r) {
                return skip(&why);
            }
            r.code(0);
            let proxy = ["proxy", "--name", &name].map(String::from);
            let argv = in_mount_ns(&setup, argv_with_home(&w, &proxy, *home_var));
            let mut s = session(command_of(&argv, &w.root), w.p(&format!("{name}.stderr")));
            let res = escape_call(
                &mut s,
                "escape",
                json!({"home": home, "outside": w.s("outside"), "lockfile": w.lockfile(),
                       "readable": w.s("data/readme.txt"), "tcp_port": 9, "unix_socket": "/",
                       "abstract": "x", "secrets": w.secrets()}),
            );
            let ctx = format!("uid {uid}, allow {allow:?}, {class}: {res:#}");
            assert_eq!(res["read_allowed"]["value"], "readable data", "{ctx}");
            refused_secrets(&res, &w, &ctx);
            for key in ["read_ssh_key", "list_home"] {
                refused(&res, key, &["EACCES", "EPERM"], &ctx);
            }
        }
    }
}

/// A `filesystem.read` entry that is `/` or the home under another path (a bind mount) passes
/// every comparison of paths: `lock` refuses it by identity, naming the entry and what it is,
/// as root and as `nobody`, in both network modes.
#[test]
fn escape_battery_bind_mount_classes() {
    if current_uid() != 0 {
        return skip("bind mounts need root");
    }
    for allow_mode in [false, true] {
        for uid in users() {
            let w = Sbx::new(uid);
            for d in ["rootb", "homeb"] {
                std::fs::create_dir_all(w.p(d)).unwrap();
            }
            w.chown();
            let allow: Vec<String> = if allow_mode {
                vec!["127.0.0.1:9".into()]
            } else {
                vec![]
            };
            let setup = format!(
                "mount --bind / {} && mount --bind {} {}",
                w.s("rootb"),
                w.s("home"),
                w.s("homeb")
            );
            for (i, (rule, what)) in [
                ("rootb", "the whole filesystem (`/`)".to_owned()),
                ("homeb", format!("the home directory (`{}`)", w.s("home"))),
            ]
            .iter()
            .enumerate()
            {
                let name = format!("bind{i}");
                let args = w.lock_args(
                    &name,
                    &policy(&[w.s("data"), w.s(rule)], &[], &allow),
                    &[],
                    &escape_argv(),
                );
                let argv = in_mount_ns(&setup, w.argv(&args));
                let r = run_output(&mut command_of(&argv, &w.root));
                let ctx = format!("uid {uid}, allow {allow:?}, bind of {rule}: {r:?}");
                assert_ne!(r.code, 0, "{ctx}");
                assert!(
                    r.stderr.contains(&format!(
                        "`{}` (`filesystem.read[1]`) is {what} mounted elsewhere",
                        w.s(rule)
                    )),
                    "{ctx}"
                );
                assert!(
                    !w.lockfile().exists() || !w.lock_json().to_string().contains(&name),
                    "{ctx}"
                );
            }
        }
    }
}

/// The task limit of the battery's policy.
const BATTERY_TASKS: u64 = 48;

/// Whether a pids cgroup can hold a root server's task limit here (v1 `pids` hierarchy, or
/// cgroup v2 with `pids` enabled below the root), as the launcher finds it.
fn pids_cgroup_usable() -> bool {
    Path::new("/sys/fs/cgroup/pids/cgroup.procs").exists()
        || std::fs::read_to_string("/sys/fs/cgroup/cgroup.subtree_control")
            .is_ok_and(|c| c.split_whitespace().any(|c| c == "pids"))
}

/// The folder of the pids cgroup `pid` is in, as seen from here.
fn pids_cgroup_of(pid: u64) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.splitn(3, ':').collect()).collect();
    if let Some(l) = lines
        .iter()
        .find(|l| l.len() == 3 && l[1].split(',').any(|c| c == "pids"))
    {
        return Some(PathBuf::from(format!("/sys/fs/cgroup/pids{}", l[2])));
    }
    let l = lines.iter().find(|l| l.len() == 3 && l[0] == "0")?;
    Some(PathBuf::from(format!("/sys/fs/cgroup{}", l[2])))
}

/// How the battery's sandbox keeps metadata outside the write set unchanged.
#[derive(Clone, Copy, PartialEq)]
enum View {
    /// Own user + mount namespace: `EROFS` outside, changes in `${TMP}` work.
    MountNamespace,
    /// No user namespace: seccomp refuses every change, the write set's too.
    Compensated,
}

/// The metadata class (modes, times, owners, xattrs of home, `~/.ssh/id_*`, a read-granted
/// file, the lockfile, a file outside: refused, and unchanged afterwards) and a fork bomb that
/// stops at the task limit.
fn metadata_and_tasks(s: &mut Client, w: &Sbx, view: View, ctx: &str) {
    let targets = [
        ("home", w.p("home")),
        ("ssh_key", w.p("home/.ssh/id_ed25519")),
        ("read_granted", w.p("data/readme.txt")),
        ("lockfile", w.lockfile()),
        ("outside", w.p("outside/secret.txt")),
    ];
    let stat = |p: &Path| {
        let m = std::fs::metadata(p).unwrap();
        (m.mode(), m.uid(), m.gid(), m.mtime(), m.atime())
    };
    let before: Vec<_> = targets.iter().map(|(_, p)| stat(p)).collect();
    let args: serde_json::Map<String, Value> = targets
        .iter()
        .map(|(k, p)| ((*k).to_owned(), json!(p)))
        .collect();
    let res = escape_call(s, "metadata", json!({ "targets": args }));
    let ctx = format!("{ctx}: {res:#}");
    let calls = [
        "chmod",
        "fchmod",
        "fchmodat",
        "utimensat",
        "futimens",
        "chown",
        "lchown",
        "setxattr",
        "removexattr",
        "fsetxattr",
    ];
    for (label, _) in &targets {
        for call in calls {
            // EACCES: Landlock refused opening it (the `f*` calls need a descriptor).
            refused(
                &res,
                &format!("{label}.{call}"),
                &["EROFS", "EPERM", "EACCES"],
                &ctx,
            );
        }
    }
    for ((label, p), was) in targets.iter().zip(&before) {
        assert_eq!(&stat(p), was, "{ctx}: {label} changed");
    }
    // In the private tmp: modes and times change where the view is in place; owners and
    // xattrs never.
    for call in ["chmod", "fchmod", "fchmodat", "utimensat", "futimens"] {
        let key = format!("tmp.{call}");
        match view {
            View::MountNamespace => assert_eq!(res[&key]["ok"], json!(true), "{ctx}: {key}"),
            View::Compensated => refused(&res, &key, &["EPERM"], &ctx),
        }
    }
    for call in ["chown", "setxattr", "fsetxattr"] {
        refused(&res, &format!("tmp.{call}"), &["EPERM"], &ctx);
    }

    if w.uid == 0 && !pids_cgroup_usable() {
        // The kernel exempts the host's uid 0 from RLIMIT_NPROC in every user namespace and no
        // pids cgroup can hold it: the limit does not bind a root server (`sandbox test` says so).
        return;
    }
    let bomb = escape_call(s, "forkbomb", json!({"max": 2000}));
    assert_eq!(
        bomb["errno"], "EAGAIN",
        "{ctx}: the fork bomb did not stop: {bomb}"
    );
    let forked = bomb["forked"].as_u64().unwrap();
    match view {
        // The server itself is one of the tree's tasks.
        View::MountNamespace => assert_eq!(forked, BATTERY_TASKS - 1, "{ctx}: {bomb}"),
        // The limit counts the user's tasks at launch too.
        View::Compensated => assert!(forked < 2000, "{ctx}: {bomb}"),
    }
    let ping = s.request_next("ping", json!({}));
    assert!(ping.get("result").is_some(), "{ctx}: {ping}");
}

/// Where no user namespace can be made (`user.max_user_namespaces` = 0 in a user namespace of
/// the test's own), `network.allow: []` still runs, with the compensation: seccomp refuses
/// every mode, owner, time and xattr change, and the task limit holds.
#[test]
fn escape_battery_without_user_namespaces() {
    for uid in users() {
        let mut w = Sbx::new(uid);
        // Mapped to root in the test's namespace, `nobody` must not pick root's `/tmp/mcpsum-0`.
        std::fs::create_dir(w.p("tmp")).unwrap();
        w.chown();
        w.extra_env.push(("TMPDIR".into(), w.s("tmp")));
        let mut pol = policy(&[helper("").display().to_string(), w.s("data")], &[], &[]);
        pol["limits"] = json!({"tasks": BATTERY_TASKS});
        let r = w.lock("escape", &pol, &escape_argv());
        if let Some(why) = kernel_lacks(&r) {
            return skip(&why);
        }
        r.code(0);
        let limited = |args: &[&str]| {
            let mut argv = w.argv(args);
            let at = argv.iter().position(|a| a == "/usr/bin/env").unwrap();
            let wrap = [
                "unshare",
                "--user",
                "--map-root-user",
                "/bin/sh",
                "-c",
                "echo 0 >/proc/sys/user/max_user_namespaces && exec \"$@\"",
                "sh",
            ];
            argv.splice(at..at, wrap.map(str::to_owned));
            command_of(&argv, &w.root)
        };
        let probe = run_output(&mut limited(&["--version"]));
        if probe.code != 0 {
            return skip(&format!(
                "cannot lower the limit in a user namespace: {probe:?}"
            ));
        }
        let report = run_output(&mut limited(&["sandbox", "test", "--name", "escape"]));
        assert_eq!(report.code, 0, "uid {uid}: {report:#?}");
        for needle in [
            "namespaces       none (user.max_user_namespaces is 0",
            "read-only view   missing (user.max_user_namespaces is 0): seccomp refuses every mode",
            "chmod 0600 a file in ${TMP}",
        ] {
            assert!(
                report.stdout.contains(needle),
                "uid {uid}: {needle}: {report:#?}"
            );
        }
        let mut s = session(limited(&["proxy", "--name", "escape"]), w.p("proxy.stderr"));
        metadata_and_tasks(
            &mut s,
            &w,
            View::Compensated,
            &format!("uid {uid}, no userns"),
        );
    }
}

/// Where the kernel refuses `unshare` although nothing said so beforehand (a container's seccomp
/// profile), `network.allow: []` still runs: the launcher applies the same compensation itself
/// (a mode change in `${TMP}`, which the view would allow, is refused: the compensation is on).
#[test]
fn escape_battery_when_unshare_is_refused_at_launch() {
    if !cfg!(target_arch = "x86_64") {
        return skip("the filter of no_unshare.py uses x86_64 numbers");
    }
    for uid in users() {
        let w = Sbx::new(uid);
        let mut pol = policy(&[helper("").display().to_string(), w.s("data")], &[], &[]);
        pol["limits"] = json!({"tasks": BATTERY_TASKS});
        let r = w.lock("escape", &pol, &escape_argv());
        if let Some(why) = kernel_lacks(&r) {
            return skip(&why);
        }
        r.code(0);
        let mut argv = w.argv(&["proxy", "--name", "escape"]);
        let at = argv.iter().position(|a| a == "/usr/bin/env").unwrap();
        argv.splice(
            at..at,
            [
                support::PYTHON.to_owned(),
                helper("no_unshare.py").display().to_string(),
            ],
        );
        let mut s = session(command_of(&argv, &w.root), w.p("proxy.stderr"));
        metadata_and_tasks(
            &mut s,
            &w,
            View::Compensated,
            &format!("uid {uid}, unshare refused"),
        );
    }
}

/// `lock`, `verify` and `proxy` all start the server inside its sandbox: it tries to create a
/// marker file outside its write set at start, which works only unsandboxed (the control).
#[test]
fn lock_verify_and_proxy_run_the_server_sandboxed() {
    for uid in users() {
        let w = Sbx::new(uid);
        let marker = |n: &str| w.p(&format!("outside/marker-{n}"));
        let argv = |n: &str| {
            let mut a = escape_argv();
            a.extend(["--marker".to_owned(), marker(n).display().to_string()]);
            a
        };
        // Control: unsandboxed, the marker appears.
        let mut args = vec![
            "lock".to_owned(),
            "--name".into(),
            "plain".into(),
            "--".into(),
        ];
        args.extend(argv("plain"));
        w.run(&args).code(0);
        assert!(
            marker("plain").exists(),
            "uid {uid}: the control made no marker"
        );

        let pol = policy(&[helper("").display().to_string()], &[], &[]);
        let r = w.lock("boxed", &pol, &argv("boxed"));
        if let Some(why) = kernel_lacks(&r) {
            return skip(&why);
        }
        r.code(0);
        assert!(
            !marker("boxed").exists(),
            "uid {uid}: `lock` ran it unsandboxed"
        );
        w.run(&["verify", "--name", "boxed"]).code(0);
        assert!(
            !marker("boxed").exists(),
            "uid {uid}: `verify` ran it unsandboxed"
        );
        let mut s = session(
            w.command(&["proxy", "--name", "boxed"]),
            w.p("proxy.stderr"),
        );
        let list = s.request_next("tools/list", json!({}));
        assert_eq!(
            list["result"]["tools"].as_array().map(Vec::len),
            Some(6),
            "{list}"
        );
        drop(s);
        assert!(
            !marker("boxed").exists(),
            "uid {uid}: `proxy` ran it unsandboxed"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Refused policies: exit 2 naming server and path, and the server never started.
// ---------------------------------------------------------------------------------------------

#[test]
fn refused_policies_never_start_the_server() {
    for uid in users() {
        let w = Sbx::new(uid);
        let transcript = w.p("data/transcript.jsonl");
        let scenario = w.json_file(
            "scenario.json",
            &json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}],
                    "transcript": transcript}),
        );
        let servers = support::repo().join("tests/servers").display().to_string();
        let argv = support::fake_argv(&scenario);
        let good_read = vec![servers.clone(), w.s("scenario.json")];
        // Control: a correct policy starts it (and the transcript proves it ran).
        let r = w.lock("ok", &policy(&good_read, &[w.s("data")], &[]), &argv);
        if let Some(why) = kernel_lacks(&r) {
            return skip(&why);
        }
        r.code(0);
        assert!(
            support::starts(&transcript) >= 1,
            "uid {uid}: the control never ran"
        );
        std::fs::remove_file(&transcript).unwrap();

        let fs = |read: &[&str], write: &[&str]| {
            let mut read: Vec<String> = read.iter().map(|s| (*s).to_owned()).collect();
            read.extend(good_read.iter().cloned());
            let write: Vec<String> = write.iter().map(|s| (*s).to_owned()).collect();
            policy(&read, &write, &[])
        };
        let nonexistent = w.s("data/missing");
        let dotdot = format!("{}/../data", w.s("data"));
        let lockfile = w.lockfile().display().to_string();
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            ("relative", fs(&["data"], &[]), vec!["data"]),
            ("dotdot", fs(&[&dotdot], &[]), vec![&dotdot, ".."]),
            ("missing", fs(&[], &[&nonexistent]), vec![&nonexistent]),
            (
                "lockfile",
                fs(&[], &[&lockfile]),
                vec![&lockfile, "mcp.lock"],
            ),
            (
                "lockdir",
                fs(&[], &[&w.s("proj")]),
                vec!["proj", "mcp.lock"],
            ),
            ("statedir", fs(&[], &[&w.s("state")]), vec!["state"]),
            ("home", fs(&[], &[&w.s("home")]), vec!["home"]),
            ("tilde", fs(&[], &["~"]), vec!["~"]),
            ("covers", fs(&[], &[&w.s("")]), vec!["mcp.lock"]),
            ("readroot", fs(&["/"], &[]), vec!["whole filesystem"]),
            (
                "readhomeparent",
                fs(&[&w.s("")], &[]),
                vec!["read set", "the home directory"],
            ),
            (
                "unknown",
                json!({"filesystem": {"read": [], "exec": []}, "network": {"allow": []}}),
                vec!["exec"],
            ),
            (
                "unknowntop",
                json!({"filesystem": {}, "network": {"allow": []}, "processes": 1}),
                vec!["processes"],
            ),
        ];
        let mut bad_allow = Vec::new();
        for entry in [
            "example.com",
            "*.com:443",
            "0.0.0.0:443",
            "https://a.test:443",
            "a.test:0",
        ] {
            bad_allow.push((
                entry,
                policy(&good_read, &[w.s("data")], &[entry.to_owned()]),
            ));
        }
        let all = cases
            .iter()
            .map(|(n, p, needles)| ((*n).to_owned(), p.clone(), needles.clone()))
            .chain(
                bad_allow
                    .iter()
                    .map(|(e, p)| (format!("allow {e}"), p.clone(), vec![*e])),
            );
        for (case, pol, needles) in all {
            let name = format!("srv-{}", case.replace(|c: char| !c.is_alphanumeric(), "-"));
            let r = w.lock(&name, &pol, &argv);
            let ctx = format!("uid {uid}, case {case}");
            assert_eq!(r.code, 2, "{ctx}: {r:#?}");
            // The server is named unless the policy file is rejected as a whole, where the
            // file is named.
            assert!(
                r.stderr.contains(&name) || r.stderr.contains(".policy.json"),
                "{ctx}: names neither server nor file: {}",
                r.stderr
            );
            for n in needles {
                assert!(
                    r.stderr.contains(n),
                    "{ctx}: stderr lacks {n:?}: {}",
                    r.stderr
                );
            }
            assert!(!transcript.exists(), "{ctx}: the server started");
            assert!(
                w.lock_json()["servers"].get(&name).is_none(),
                "{ctx}: entry written"
            );
        }

        // A policy edited into the lockfile is checked at every start: `verify` and `proxy`
        // refuse (exit 2) a write rule over home before spawning anything.
        let mut lock = w.lock_json();
        lock["servers"]["ok"]["policy"]["sandbox"]["filesystem"]["write"] = json!([w.s("home")]);
        std::fs::write(w.lockfile(), serde_json::to_vec_pretty(&lock).unwrap()).unwrap();
        w.chown();
        for args in [
            vec!["verify", "--name", "ok"],
            vec!["proxy", "--name", "ok"],
        ] {
            let r = w.run(&args);
            assert_eq!(r.code, 2, "uid {uid}: {args:?}: {r:#?}");
            // `verify` reports on stdout, `proxy` on stderr.
            let out = format!("{}{}", r.stdout, r.stderr);
            assert!(
                out.contains("`ok`") && out.contains(&w.s("home")),
                "uid {uid}: {args:?}: {out}"
            );
            assert!(
                !transcript.exists(),
                "uid {uid}: {args:?} started the server"
            );
        }
    }
}

/// Issue 5, point 2: problems "reported with server and path, all in one pass".
#[test]
fn lock_sandbox_problems_name_the_server_all_in_one_pass() {
    let w = Sbx::new(current_uid());
    let missing = w.s("data/missing");
    let pol = policy(
        &["relative/dir".to_owned(), missing.clone()],
        &[w.s("proj")],
        &["example.com".to_owned()],
    );
    let r = w.lock("onepass", &pol, &escape_argv());
    assert_eq!(r.code, 2, "{r:#?}");
    for needle in [
        "`onepass`",
        "relative/dir",
        &missing,
        &w.s("proj"),
        "example.com",
    ] {
        assert!(
            r.stderr.contains(needle),
            "stderr lacks {needle:?}: {}",
            r.stderr
        );
    }
}

/// A refused policy is not a command problem: the hint should point at `policy.sandbox`.
#[test]
fn refused_policy_hint_points_at_the_policy() {
    let w = Sbx::new(current_uid());
    let r = w.lock(
        "hint",
        &policy(&[helper("").display().to_string()], &[], &[]),
        &escape_argv(),
    );
    if let Some(why) = kernel_lacks(&r) {
        return skip(&why);
    }
    r.code(0);
    let mut lock = w.lock_json();
    lock["servers"]["hint"]["policy"]["sandbox"]["filesystem"]["write"] = json!([w.s("home")]);
    std::fs::write(w.lockfile(), serde_json::to_vec_pretty(&lock).unwrap()).unwrap();
    w.chown();
    let r = w.run(&["proxy", "--name", "hint"]);
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(
        !r.stderr.contains("check the command") && r.stderr.contains("policy.sandbox"),
        "{}",
        r.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// 3. `mcpsum sandbox test`.
// ---------------------------------------------------------------------------------------------

fn assert_report_passes(r: &Run, ctx: &str) -> Value {
    r.code(0);
    let doc = r.json();
    assert_eq!(doc["passed"], json!(true), "{ctx}: {doc:#}");
    let rows = doc["report"]["rows"].as_array().expect("rows");
    assert!(rows.len() >= 20, "{ctx}: only {} rows", rows.len());
    let failed: Vec<&Value> = rows.iter().filter(|r| r["pass"] != json!(true)).collect();
    assert!(failed.is_empty(), "{ctx}: failed rows {failed:#?}");
    doc
}

fn has_row(doc: &Value, prefix: &str) -> bool {
    doc["report"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["check"].as_str().unwrap_or_default().starts_with(prefix))
}

/// A root server where no pids controller can be used (the pids hierarchy unmounted in a mount
/// namespace of the test's own): the launch goes on, and the layer list, `sandbox test` and the
/// server's stderr say the task limit does not bind root, and why.
#[test]
fn a_root_server_without_a_pids_cgroup_starts_and_says_so() {
    if current_uid() != 0 || !Path::new("/sys/fs/cgroup/pids/cgroup.procs").exists() {
        return skip("needs root and a cgroup v1 pids hierarchy to hide");
    }
    let w = Sbx::new(0);
    let pol = policy(&[helper("").display().to_string(), w.s("data")], &[], &[]);
    let r = w.lock("escape", &pol, &escape_argv());
    if let Some(why) = kernel_lacks(&r) {
        return skip(&why);
    }
    r.code(0);
    let hidden = |args: &[&str]| {
        let mut argv = w.argv(args);
        let at = argv.iter().position(|a| a == "/usr/bin/env").unwrap();
        let wrap = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "/bin/sh",
            "-c",
            "umount /sys/fs/cgroup/pids && exec \"$@\"",
            "sh",
        ];
        argv.splice(at..at, wrap.map(str::to_owned));
        command_of(&argv, &w.root)
    };
    let report = run_output(&mut hidden(&["sandbox", "test", "--name", "escape"]));
    assert_eq!(report.code, 0, "{report:#?}");
    let needle = "missing: root (uid 0) is exempt from RLIMIT_NPROC and no pids cgroup can be used (the pids cgroup of this process is not mounted here)";
    assert!(report.stdout.contains(needle), "{needle}: {report:#?}");
    assert!(
        report
            .stdout
            .lines()
            .any(|l| l.starts_with("task limit for root (pids cgroup)")
                && l.contains("missing: no pids cgroup")),
        "{report:#?}"
    );
    let mut s = session(hidden(&["proxy", "--name", "escape"]), w.p("proxy.stderr"));
    // The server runs (a tool call), without the cgroup.
    let small = escape_call(&mut s, "forkbomb", json!({"max": 3}));
    assert_eq!(small["forked"], json!(3), "{small}");
    drop(s);
    let stderr = std::fs::read_to_string(w.p("proxy.stderr")).unwrap();
    assert!(
        stderr.contains(
            "mcpsum sandbox: no pids cgroup (the pids cgroup of this process is not mounted here)"
        ),
        "{stderr}"
    );
}

#[test]
fn sandbox_test_passes_for_a_correct_policy_in_both_modes() {
    for uid in users() {
        let w = Sbx::new(uid);
        let read = vec![helper("").display().to_string(), w.s("data")];
        // Locked in `[]` mode, then the same entry with a listed loopback address (a listener
        // of this test: nothing leaves the machine).
        let r = w.lock(
            "probe",
            &policy(&read, &[w.s("outside")], &[]),
            &escape_argv(),
        );
        if let Some(why) = kernel_lacks(&r) {
            return skip(&why);
        }
        r.code(0);
        let ctx = format!("uid {uid}, []");
        let doc = assert_report_passes(
            &w.run(&["sandbox", "test", "--name", "probe", "--json"]),
            &ctx,
        );
        for row in [
            "read home",
            "read lockfile",
            "socket(AF_INET)",
            "ptrace",
            "NoNewPrivs",
        ] {
            assert!(has_row(&doc, row), "{ctx}: no `{row}` row: {doc:#}");
        }
        // Root's task limit is held by a pids cgroup of the probe's own, and the layer list says so.
        if uid == 0 && pids_cgroup_usable() {
            let row = doc["report"]["rows"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["check"] == "task limit for root (pids cgroup)")
                .unwrap_or_else(|| panic!("{ctx}: no pids cgroup row: {doc:#}"));
            assert!(
                row["observed"].as_str().unwrap().contains("/mcpsum-"),
                "{ctx}: {row:#}"
            );
            let text = w.run(&["sandbox", "test", "--name", "probe"]).stdout;
            assert!(
                text.contains("tasks in the server's tree by a pids cgroup of its own"),
                "{ctx}: {text}"
            );
        }
        // The credential exclusions and the TLS key folder, one row each.
        for rel in [
            ".ssh",
            ".cargo/credentials.toml",
            ".local/share/keyrings",
            ".aws",
            ".npmrc",
            ".docker/config.json",
        ] {
            let row = format!("read credential {}", w.s(&format!("home/{rel}")));
            assert!(has_row(&doc, &row), "{ctx}: no `{row}` row: {doc:#}");
        }
        if Path::new("/etc/ssl/private").exists() {
            assert!(
                has_row(&doc, "read TLS private keys /etc/ssl/private"),
                "{ctx}: {doc:#}"
            );
        }
        let text = w.run(&["sandbox", "test", "--name", "probe"]);
        text.code(0)
            .stdout_has(&["check", "expected", "observed", "every expectation holds"]);

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut lock = w.lock_json();
        lock["servers"]["probe"]["policy"]["sandbox"]["network"]["allow"] =
            json!([format!("127.0.0.1:{port}")]);
        std::fs::write(w.lockfile(), serde_json::to_vec_pretty(&lock).unwrap()).unwrap();
        w.chown();
        let r = w.run(&["sandbox", "test", "--name", "probe", "--json"]);
        if let Some(why) = kernel_lacks(&r) {
            skip(&why);
            continue;
        }
        let ctx = format!("uid {uid}, allow");
        let doc = assert_report_passes(&r, &ctx);
        for row in [
            &format!("egress CONNECT 127.0.0.1:{port}") as &str,
            "egress CONNECT unlisted",
            "direct connect",
        ] {
            assert!(has_row(&doc, row), "{ctx}: no `{row}` row: {doc:#}");
        }
        drop(listener);
    }
}

/// `sandbox test`'s report as a person reads it, snapshotted (as `nobody`, whose home is none of
/// the machine's: root's rows name the credential files this machine happens to have). What the
/// machine decides is filtered: temp paths, the probe's folder, socket, port and pid, the
/// Landlock ABI, rows that exist only where the host has the file; runs of spaces are squeezed,
/// since column widths follow the lengths of paths.
#[test]
fn sandbox_test_report_as_people_read_it() {
    if !users().contains(&NOBODY) {
        eprintln!("skipping: the report is snapshotted as `nobody`, which needs root");
        return;
    }
    let w = Sbx::new(NOBODY);
    let read = vec![helper("").display().to_string(), w.s("data")];
    let r = w.lock(
        "probe",
        &policy(&read, &[w.s("outside")], &[]),
        &escape_argv(),
    );
    if let Some(why) = kernel_lacks(&r) {
        return skip(&why);
    }
    r.code(0);
    let r = w.run(&["sandbox", "test", "--name", "probe"]);
    r.code(0);
    let text = report_text(&r.stdout, &w);
    report_settings().bind(|| insta::assert_snapshot!("sandbox_test_report", text));
}

/// Rows that exist only where the host has the file or the kernel the feature.
const HOST_ONLY_ROWS: [&str; 2] = ["TLS private keys", "landlock resolve-unix"];

/// Whether a report's row (or layer) `line` exists only on some hosts: [`HOST_ONLY_ROWS`], and
/// the credential files of the machine's own homes (root's `/root/.npmrc`, say) that happen to
/// exist; those of the world's home are always there.
fn host_only(line: &str, w: &Sbx) -> bool {
    HOST_ONLY_ROWS.iter().any(|h| line.contains(h))
        || line.starts_with("read credential ") && !line.contains(&w.s(""))
}

/// A human `sandbox test` report with the world's paths redacted, [`host_only`] rows left out
/// and runs of spaces squeezed (column widths follow the lengths of paths).
fn report_text(stdout: &str, w: &Sbx) -> String {
    stdout
        .lines()
        .filter(|l| !host_only(l, w))
        .map(|l| support::redact_paths(l, &w.root))
        .map(|l| {
            let cells: Vec<&str> = l
                .split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect();
            let indent = if l.starts_with("  ") { "  " } else { "" };
            format!("{indent}{}\n", cells.join("  "))
        })
        .collect()
}

/// Snapshot settings for `sandbox test` reports: what the machine decides is filtered (the
/// probe's folder, socket, port, the Landlock ABI, counts).
fn report_settings() -> insta::Settings {
    let mut settings = support::snapshot_settings();
    for (pattern, replacement) in REPORT_FILTERS {
        settings.add_filter(pattern, replacement);
    }
    settings
}

/// Whether the snapshots taken as root can be: they show root's task limit in a pids cgroup of
/// its own (without one the rows differ, as
/// `a_root_server_without_a_pids_cgroup_starts_and_says_so` checks).
fn root_snapshot_possible() -> bool {
    if current_uid() != 0 {
        eprintln!("skipping: the report is snapshotted as root");
        return false;
    }
    if !pids_cgroup_usable() {
        eprintln!("skipping: the report as root is snapshotted with a usable pids cgroup");
        return false;
    }
    true
}

/// `sandbox test --json` as a program reads it, snapshotted as root (the user CI runs as), with
/// what the machine decides filtered as in [`sandbox_test_report_as_people_read_it`]; the read
/// set's runtime base (the system files this host has), [`host_only`] rows and layers, and the
/// Landlock ABI row's numbers are left out.
#[test]
fn sandbox_test_json_as_programs_read_it() {
    if !root_snapshot_possible() {
        return;
    }
    let w = Sbx::new(0);
    let read = vec![helper("").display().to_string(), w.s("data")];
    let r = w.lock(
        "probe",
        &policy(&read, &[w.s("outside")], &[]),
        &escape_argv(),
    );
    if let Some(why) = kernel_lacks(&r) {
        return skip(&why);
    }
    r.code(0);
    let r = w.run(&["sandbox", "test", "--name", "probe", "--json"]);
    let mut doc = assert_report_passes(&r, "root");
    let report = &mut doc["report"];
    let text_of = |v: &Value, key: &str| v[key].as_str().unwrap_or_default().to_owned();
    let layers = report["layers"].as_array_mut().unwrap();
    layers.retain(|l| !host_only(&text_of(l, "layer"), &w));
    let read_set = report["read_set"].as_array_mut().unwrap();
    read_set.retain(|entry| entry[1] != "runtime base");
    let rows = report["rows"].as_array_mut().unwrap();
    rows.retain(|row| !host_only(&text_of(row, "check"), &w));
    for row in rows.iter_mut().filter(|row| row["check"] == "Landlock ABI") {
        row["expected"] = json!("[N]");
        row["observed"] = json!("[N]");
    }
    let text = support::redact_paths(&serde_json::to_string_pretty(&doc).unwrap(), &w.root);
    report_settings().bind(|| insta::assert_snapshot!("sandbox_test_json", text));
}

/// A world (as `uid`) with server `probe` locked, then run by the test build of mcpsum that
/// drops `ptrace` and `keyctl` from the seccomp filter; `None` (after saying why) when the
/// sandbox cannot be built on this kernel.
fn weakened_probe(uid: u32) -> Option<Sbx> {
    let mut w = Sbx::new(uid);
    let read = vec![helper("").display().to_string(), w.s("data")];
    let r = w.lock("probe", &policy(&read, &[], &[]), &escape_argv());
    if let Some(why) = kernel_lacks(&r) {
        skip(&why);
        return None;
    }
    r.code(0);
    let bin = w.p("bin/mcpsum-weakened");
    std::fs::copy(weakened_binary(), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    w.bin = bin;
    w.extra_env
        .push(("MCPSUM_TEST_WEAKEN_SECCOMP".into(), "ptrace,keyctl".into()));
    Some(w)
}

/// A `sandbox test` that fails (exit 1: the test build drops two seccomp rules) as a person
/// reads it, as root: the failed rows stand out and the last line says how many.
#[test]
fn a_failing_sandbox_test_report_as_people_read_it() {
    if !root_snapshot_possible() {
        return;
    }
    let Some(w) = weakened_probe(0) else { return };
    let r = w.run(&["sandbox", "test", "--name", "probe"]);
    r.code(1);
    let text = report_text(&r.stdout, &w);
    report_settings().bind(|| insta::assert_snapshot!("sandbox_test_report_failing", text));
}

/// The filters of [`report_settings`], for the text report and the `--json` one alike.
const REPORT_FILTERS: [(&str, &str); 11] = [
    (r"/tmp/mcpsum-probe-[A-Za-z0-9]+", "[PROBE-DIR]"),
    (r"@mcpsum-probe-[0-9-]+…?", "@[PROBE-SOCKET]"),
    (r"127\.0\.0\.1:\d+", "127.0.0.1:[PORT]"),
    (r"\bABI \d+", "ABI [N]"),
    (r"Landlock ABI  \d+  \d+", "Landlock ABI  [N]  [N]"),
    (r"\(\d+ checks\)", "([N] checks)"),
    // passwd's home of `nobody` is missing, unless something made it (then only root
    // may enter it): refused outside the sandbox either way, with the machine's errno.
    (
        r"(read home /nonexistent  refused  refused \(EACCES); [a-z ]+ too\)",
        "$1; [REFUSED OUTSIDE TOO])",
    ),
    (r"\d+ rules -> ", "[N] rules -> "),
    // Root's task limit: the pids hierarchy's place, and the cgroup named after the pid.
    (r"below `/sys/fs/cgroup/[^`]*`", "below `[PIDS-HIERARCHY]`"),
    (r"/mcpsum-\d+\b", "/mcpsum-[PID]"),
    // How many rows there are depends on the host's files.
    (r" of \d+ expectations", " of [N] expectations"),
];

/// Issue 21: a refused file access says whether the sandbox is what refused it. As `nobody`, a
/// home that only root may enter is refused by plain permissions too (so its row shows nothing
/// about the sandbox, and is marked), passwd's `/nonexistent` is missing outside too, while
/// writing `/tmp` is the sandbox's refusal. As root (who passes every permission check) each
/// refusal is the sandbox's.
#[test]
fn a_refusal_permissions_make_too_is_marked() {
    for uid in users() {
        let w = Sbx::new(uid);
        let read = vec![helper("").display().to_string(), w.s("data")];
        let r = w.lock("perm", &policy(&read, &[], &[]), &escape_argv());
        if let Some(why) = kernel_lacks(&r) {
            return skip(&why);
        }
        r.code(0);
        // Only root may enter the home now: for `nobody` that refusal is not the sandbox's.
        let home = w.p("home");
        std::os::unix::fs::chown(&home, Some(0), Some(0)).unwrap();
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        let ctx = format!("uid {uid}");
        let doc = assert_report_passes(
            &w.run(&["sandbox", "test", "--name", "perm", "--json"]),
            &ctx,
        );
        let rows = doc["report"]["rows"].as_array().unwrap();
        let row = |check: &str| -> &Value {
            rows.iter()
                .find(|r| r["check"] == json!(check))
                .unwrap_or_else(|| panic!("{ctx}: no row `{check}` in {rows:#?}"))
        };
        let home_row = row(&format!("read home {}", home.display()));
        let tmp_row = row("write elsewhere /tmp");
        assert_eq!(tmp_row["refused_by"], json!("sandbox"), "{ctx}: {tmp_row}");
        assert_eq!(tmp_row["outside"], json!("allowed"), "{ctx}: {tmp_row}");
        let lock_row = row(&format!("read lockfile {}", w.lockfile().display()));
        assert_eq!(
            lock_row["refused_by"],
            json!("sandbox"),
            "{ctx}: {lock_row}"
        );
        // Rows that are not file accesses, or that were allowed, carry no verdict.
        for check in [
            "ptrace",
            "socketpair(AF_UNIX)",
            "write ${TMP} (private tmp)",
        ] {
            assert!(
                row(check).get("refused_by").is_none(),
                "{ctx}: {}",
                row(check)
            );
        }
        let text = w.run(&["sandbox", "test", "--name", "perm"]);
        text.code(0);
        if uid == 0 {
            assert_eq!(
                home_row["refused_by"],
                json!("sandbox"),
                "{ctx}: {home_row}"
            );
            assert!(
                rows.iter().all(|r| r["refused_by"] != json!("outside_too")),
                "{ctx}: root passes every permission check: {rows:#?}"
            );
            assert!(
                !text.stdout.contains("outside the sandbox too"),
                "{}",
                text.stdout
            );
            continue;
        }
        assert_eq!(
            home_row["refused_by"],
            json!("outside_too"),
            "{ctx}: {home_row}"
        );
        assert_eq!(
            home_row["outside"],
            json!("refused (EACCES)"),
            "{ctx}: {home_row}"
        );
        // Missing (ENOENT), or a folder only root may enter where something made it (EACCES).
        let passwd_home = row("read home /nonexistent");
        assert_eq!(passwd_home["refused_by"], json!("outside_too"), "{ctx}");
        assert!(
            ["refused (ENOENT)", "refused (EACCES)"]
                .contains(&passwd_home["outside"].as_str().unwrap()),
            "{ctx}: {passwd_home}"
        );
        let line = |check: &str| -> &str {
            text.stdout
                .lines()
                .find(|l| l.starts_with(&format!("{check}  ")))
                .unwrap_or_else(|| panic!("{ctx}: no line `{check}`: {}", text.stdout))
        };
        assert!(
            line(&format!("read home {}", home.display()))
                .contains("refused (EACCES; permissions refuse it too)"),
            "{}",
            text.stdout
        );
        let l = line("read home /nonexistent");
        assert!(
            l.contains("refused (EACCES; missing outside too)")
                || l.contains("refused (EACCES; permissions refuse it too)"),
            "{}",
            text.stdout
        );
        assert!(
            line("write elsewhere /tmp").contains("refused by the sandbox (EROFS)"),
            "{}",
            text.stdout
        );
        text.stdout_has(&["refusals marked above happen outside the sandbox too, for this user"]);
    }
}

/// A policy may open a credential path on purpose, but never silently: `lock` warns on stderr,
/// `sandbox test` warns the same and shows a warning row (which passes); every other credential
/// path stays closed.
#[test]
fn a_policy_listing_credentials_is_warned_about() {
    for uid in users() {
        let w = Sbx::new(uid);
        let read = vec![helper("").display().to_string(), w.s("home/.aws")];
        let r = w.lock(
            "creds",
            &policy(&read, &[w.s("home/.npmrc")], &[]),
            &escape_argv(),
        );
        if let Some(why) = kernel_lacks(&r) {
            return skip(&why);
        }
        r.code(0);
        let tested = w.run(&["sandbox", "test", "--name", "creds", "--json"]);
        for (key, p) in [
            ("filesystem.read[1]", w.s("home/.aws")),
            ("filesystem.write[0]", w.s("home/.npmrc")),
        ] {
            let want = format!(
                "warning: server `creds`: `{key}` opens the credentials at `{p}` to the server; narrow the entry unless the server needs them"
            );
            assert!(r.stderr.contains(&want), "uid {uid}: {}", r.stderr);
            // `sandbox test` says the same, for an entry nobody locked with `--sandbox` here.
            assert!(
                tested.stderr.contains(&want),
                "uid {uid}: {}",
                tested.stderr
            );
        }
        let ctx = format!("uid {uid}");
        let doc = assert_report_passes(&tested, &ctx);
        for (key, p) in [
            ("filesystem.read[1]", w.s("home/.aws")),
            ("filesystem.write[0]", w.s("home/.npmrc")),
        ] {
            let row = format!("read credential {p} (warning: opened by `{key}`)");
            assert!(has_row(&doc, &row), "{ctx}: no `{row}`: {doc:#}");
        }
        let row = format!("read credential {}", w.s("home/.ssh"));
        let rows = doc["report"]["rows"].as_array().unwrap();
        let ssh = rows.iter().find(|r| r["check"] == row.as_str());
        assert_eq!(
            ssh.map(|r| r["expected"].clone()),
            Some(json!("refused")),
            "{ctx}: {doc:#}"
        );
    }
}

/// The `weakened-sandbox` example (mcpsum whose `sandbox test` drops the seccomp rules named in
/// `MCPSUM_TEST_WEAKEN_SECCOMP`), built once, fresh.
fn weakened_binary() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let out = Command::new(env!("CARGO"))
            .args([
                "build",
                "--example",
                "weakened-sandbox",
                "--message-format=json",
            ])
            .current_dir(support::repo())
            .stderr(std::process::Stdio::inherit())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "cargo build --example weakened-sandbox failed"
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find_map(|m| m["executable"].as_str().map(PathBuf::from))
            .expect("the example's executable")
    })
    .clone()
}

#[test]
fn sandbox_test_fails_when_a_layer_is_weakened_in_a_test_build() {
    for uid in users() {
        // The same world, the same lock, the test build: it must see what it dropped.
        let Some(mut w) = weakened_probe(uid) else {
            return;
        };
        let r = w.run(&["sandbox", "test", "--name", "probe", "--json"]);
        let ctx = format!("uid {uid}: {}", r.stderr);
        assert_eq!(r.code, 1, "{ctx}: {}", r.stdout);
        let doc: Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(doc["passed"], false, "{ctx}");
        let failed: Vec<&str> = doc["report"]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["pass"] == false)
            .map(|r| r["check"].as_str().unwrap())
            .collect();
        assert!(
            failed.iter().any(|c| c.starts_with("ptrace")),
            "{ctx}: {failed:?}"
        );
        assert!(
            failed.iter().any(|c| c.starts_with("keyctl")),
            "{ctx}: {failed:?}"
        );
        assert_eq!(
            failed.len(),
            2,
            "{ctx}: only the dropped rules fail: {failed:?}"
        );
        // Nothing weakened: the test build passes like mcpsum.
        w.extra_env.clear();
        assert_report_passes(
            &w.run(&["sandbox", "test", "--name", "probe", "--json"]),
            &ctx,
        );
    }
}

/// A read or write rule's path swapped for a link after the plan was made (the test build does
/// it between plan and launch): the launcher compares each opened descriptor's real path with
/// the planned one and refuses to start, naming the path and where it now leads.
#[test]
fn a_rule_swapped_for_a_link_after_planning_is_refused() {
    for uid in users() {
        let mut w = Sbx::new(uid);
        std::fs::create_dir(w.p("outside/work")).unwrap();
        w.chown();
        let read = vec![helper("").display().to_string(), w.s("data")];
        let r = w.lock(
            "probe",
            &policy(&read, &[w.s("outside/work")], &[]),
            &escape_argv(),
        );
        if let Some(why) = kernel_lacks(&r) {
            return skip(&why);
        }
        r.code(0);
        let bin = w.p("bin/mcpsum-weakened");
        std::fs::copy(weakened_binary(), &bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        w.bin = bin;
        for (from, to) in [("data", "home"), ("outside/work", "data")] {
            w.extra_env = vec![(
                "MCPSUM_TEST_SWAP_PATH".into(),
                format!("{}=>{}", w.s(from), w.s(to)),
            )];
            let r = w.run(&["sandbox", "test", "--name", "probe"]);
            let ctx = format!("uid {uid}, {from} -> {to}: {r:#?}");
            assert_eq!(r.code, 2, "{ctx}");
            let want = format!(
                "policy: `{f}` changed after validation: validated as `{f}`, now opens `{t}`",
                f = w.s(from),
                t = w.s(to)
            );
            assert!(r.stderr.contains(&want), "{ctx}");
            // Put it back for the next swap.
            std::fs::remove_file(w.p(from)).unwrap();
            std::fs::rename(w.p(&format!("{from}.swapped")), w.p(from)).unwrap();
        }
        // Nothing swapped: the same build passes.
        w.extra_env.clear();
        assert_report_passes(
            &w.run(&["sandbox", "test", "--name", "probe", "--json"]),
            &format!("uid {uid}"),
        );
    }
}

#[test]
fn sandbox_test_exits_2_when_the_sandbox_cannot_be_built() {
    for uid in users() {
        let w = Sbx::new(uid);
        std::fs::create_dir(w.p("data/gone")).unwrap();
        w.chown();
        let read = vec![helper("").display().to_string(), w.s("data/gone")];
        let r = w.lock("probe", &policy(&read, &[], &[]), &escape_argv());
        if let Some(why) = kernel_lacks(&r) {
            return skip(&why);
        }
        r.code(0);
        // A read path that no longer exists: the sandbox cannot be built.
        std::fs::remove_dir(w.p("data/gone")).unwrap();
        let r = w.run(&["sandbox", "test", "--name", "probe", "--json"]);
        assert_eq!(r.code, 2, "uid {uid}: {r:#?}");
        assert!(
            r.stderr.contains("probe") && r.stderr.contains(&w.s("data/gone")),
            "uid {uid}: reason lacks server or path: {}",
            r.stderr
        );
        // `--json` promises one document: the reason is in it.
        let doc = r.json();
        assert_eq!(doc["exitCode"], 2, "uid {uid}: {doc:#}");
        assert!(
            doc["error"].as_str().unwrap().contains("probe"),
            "uid {uid}: {doc:#}"
        );

        // A command that is not there any more.
        let mut lock = w.lock_json();
        lock["servers"]["probe"]["policy"]["sandbox"]["filesystem"]["read"] =
            json!([helper("").display().to_string()]);
        lock["servers"]["probe"]["command"] = json!([w.s("bin/no-such-server")]);
        std::fs::write(w.lockfile(), serde_json::to_vec_pretty(&lock).unwrap()).unwrap();
        w.chown();
        let r = w.run(&["sandbox", "test", "--name", "probe"]);
        assert_eq!(r.code, 2, "uid {uid}: {r:#?}");
        assert!(
            r.stderr.contains("no-such-server"),
            "uid {uid}: reason lacks the command: {}",
            r.stderr
        );
    }
}

/// With hosts listed and no user namespace to be had (`user.max_user_namespaces` = 0, set in a
/// user namespace of the test's own so the machine is untouched), the server does not start and
/// every command names the layer, not only the bridge the launcher never reported on.
#[test]
fn without_user_namespaces_the_error_names_the_layer() {
    let w = Sbx::new(current_uid());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let allow = vec![format!(
        "127.0.0.1:{}",
        listener.local_addr().unwrap().port()
    )];
    let read = vec![helper("").display().to_string()];
    let r = w.lock("userns", &policy(&read, &[], &allow), &escape_argv());
    if let Some(why) = kernel_lacks(&r) {
        return skip(&why);
    }
    r.code(0);
    let limited = |args: &[&str]| {
        let mut argv: Vec<String> = [
            "unshare",
            "--user",
            "--map-root-user",
            "/bin/sh",
            "-c",
            "echo 0 >/proc/sys/user/max_user_namespaces && exec \"$@\"",
            "sh",
        ]
        .map(str::to_owned)
        .to_vec();
        argv.extend(w.argv(args));
        run_output(&mut command_of(&argv, &w.root))
    };
    let probe = limited(&["--version"]);
    if probe.code != 0 {
        return skip(&format!(
            "cannot lower the limit in a user namespace: {probe:?}"
        ));
    }
    for args in [
        &["verify", "--name", "userns"][..],
        &["lock", "--name", "userns"],
        &["sandbox", "test", "--name", "userns"],
    ] {
        let r = limited(args);
        assert_eq!(r.code, 2, "{args:?}: {r:#?}");
        // `verify` reports per server on stdout; the others on stderr.
        let text = format!("{}{}", r.stdout, r.stderr);
        assert!(
            text.contains("user namespace: unshare: ENOSPC") && !text.contains("egress bridge"),
            "{args:?}: the layer is not named: {r:#?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 4. The server's whole process tree dies with the proxy.
// ---------------------------------------------------------------------------------------------

/// Ends the proxy (`how`: client EOF or SIGKILL) of a server that spawned a child and a `setsid`
/// double-forked daemon, and checks that the server dies, and its child (`child_too`) and the
/// daemon (`daemon_too`) with it.
fn parent_of(pid: u64) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

fn tree_dies(how: &str, allow: bool, child_too: bool, daemon_too: bool) {
    tree_dies_in(how, Some(allow), child_too, daemon_too);
}

/// `allow`: the sandbox's `network.allow` is `[]` or a listed host; `None`: no sandbox policy.
fn tree_dies_in(how: &str, allow: Option<bool>, child_too: bool, daemon_too: bool) {
    for uid in users() {
        let w = Sbx::new(uid);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let sandboxed = allow.is_some();
        let allow: Vec<String> = if allow == Some(true) {
            vec![format!(
                "127.0.0.1:{}",
                listener.local_addr().unwrap().port()
            )]
        } else {
            vec![]
        };
        let read = vec![helper("").display().to_string()];
        let r = if sandboxed {
            w.lock("tree", &policy(&read, &[], &allow), &escape_argv())
        } else {
            let mut args = vec![
                "lock".to_owned(),
                "--name".into(),
                "tree".into(),
                "--".into(),
            ];
            args.extend(escape_argv());
            w.run(&args)
        };
        if let Some(why) = kernel_lacks(&r) {
            return skip(&why);
        }
        r.code(0);
        let secs = 700_000 + u64::from(std::process::id() % 10_000) * 10 + u64::from(uid % 7);
        let mut s = session(w.command(&["proxy", "--name", "tree"]), w.p("proxy.stderr"));
        let pids = escape_call(&mut s, "spawn", json!({"seconds": secs}));
        let ctx = format!("uid {uid}, {how}, allow {allow:?}: {pids}");
        let (server, child, daemon) = (
            pids["server"].as_u64().unwrap(),
            pids["child"].as_u64().unwrap(),
            pids["daemon"].as_u64().unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(sleeping(child, secs) && sleeping(daemon, secs)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if !(sleeping(child, secs) && sleeping(daemon, secs)) {
            reap(&[child, daemon], secs);
            panic!("{ctx}: not started");
        }
        match how {
            "eof" => {
                s.close_stdin();
                assert!(
                    s.wait_for(Duration::from_secs(20)).is_some(),
                    "{ctx}: proxy kept running"
                );
            }
            _ => {
                nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(i32::try_from(s.child.id()).unwrap()),
                    nix::sys::signal::Signal::SIGKILL,
                )
                .unwrap();
                assert!(s.wait_for(Duration::from_secs(5)).is_some(), "{ctx}");
            }
        }
        let server_gone = wait_gone_any(server, Duration::from_secs(10));
        let child_gone = wait_gone(child, secs, Duration::from_secs(10));
        let daemon_gone = wait_gone(daemon, secs, Duration::from_secs(2));
        // Do not leave a stray sleeper behind whatever happened.
        reap(&[child, daemon], secs);
        // The private ${TMP} goes with the server when the proxy can clean up (a SIGKILLed proxy
        // cannot: remove it here so the tests leave nothing behind).
        let tmpdir = PathBuf::from(pids["tmpdir"].as_str().unwrap_or("/nonexistent"));
        let tmp_left = sandboxed && tmpdir.exists();
        if sandboxed && how != "eof" {
            let _ = std::fs::remove_dir_all(&tmpdir);
        }
        assert!(server_gone, "{ctx}: the server outlived the proxy");
        assert!(
            !(how == "eof" && tmp_left),
            "{ctx}: the private tmp {} is still there",
            tmpdir.display()
        );
        assert!(
            child_gone || !child_too,
            "{ctx}: the server's child outlived the proxy"
        );
        assert!(
            daemon_gone || !daemon_too,
            "{ctx}: a setsid daemon of the server outlived the proxy"
        );
    }
}

/// Kills those of `pids` still sleeping `secs`.
fn reap(pids: &[u64], secs: u64) {
    for &pid in pids {
        if sleeping(pid, secs) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Whether `pid` is gone (or a zombie) within `timeout`.
fn wait_gone_any(pid: u64, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let gone = stat.is_empty()
            || stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        if gone {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn process_tree_dies_on_client_eof() {
    tree_dies("eof", false, true, false);
    tree_dies("eof", true, true, false);
}

#[test]
fn server_dies_when_the_proxy_is_killed() {
    tree_dies("sigkill", false, false, false);
    tree_dies("sigkill", true, false, false);
}

#[test]
fn server_children_die_when_the_proxy_is_killed() {
    tree_dies("sigkill", false, true, true);
    tree_dies("sigkill", true, true, true);
}

#[test]
fn unsandboxed_server_tree_dies_when_the_proxy_is_killed() {
    tree_dies_in("sigkill", None, true, true);
    tree_dies_in("eof", None, true, true);
}

#[test]
fn setsid_daemon_dies_on_client_eof() {
    tree_dies("eof", false, true, true);
}

/// `mcpsum-launch` of the build under test.
fn launcher() -> &'static str {
    env!("CARGO_BIN_EXE_mcpsum-launch")
}

/// The Landlock ABI this kernel offers, as the plan sees it (`None`: no Landlock here).
fn landlock_abi() -> Option<u32> {
    let state = tempfile::tempdir().unwrap();
    let req = mcpsum_sandbox::LaunchRequest {
        server: "floor".into(),
        policy: mcpsum_sandbox::ValidatedPolicy {
            read: vec![],
            write: vec![],
            network: mcpsum_sandbox::NetworkMode::None,
            protected: vec![],
            limits: mcpsum_sandbox::Limits::default(),
        },
        argv: vec!["/usr/bin/true".into()],
        env: vec![],
        state_dir: state.path().into(),
    };
    mcpsum_sandbox::plan(&req).ok().map(|p| p.landlock.abi)
}

/// `mcpsum-launch __sandbox-exec SPEC` as `uid`, for a spec written by hand: the system's code
/// readable, nothing writable, and no `seccomp` table at all.
fn launch_bare_spec(uid: u32, abi: u32, argv: &[&str]) -> Run {
    let spec = json!({
        "program": argv[0],
        "argv": argv,
        // Real paths only: the launcher refuses a rule that opens elsewhere (`/lib` -> `/usr/lib`).
        "read": [["/usr", true], ["/etc", false]],
        "write": [],
        "devices": [],
        "egress": false,
        "landlock_abi": abi,
        "view": "MountNamespace",
        "limits": {"tasks": 64},
        "protected": [],
        "env_names": [],
        "parent_pid": std::process::id(),
        "bridge_fd": null,
    });
    let mut argv_l = as_user(uid);
    argv_l.extend([
        launcher().to_owned(),
        mcpsum_sandbox::EXEC_SUBCOMMAND.to_owned(),
        spec.to_string(),
    ]);
    run_output(command_of(&argv_l, Path::new("/")).env_clear())
}

/// `setpriv` to `uid`, unless that is who runs the tests.
fn as_user(uid: u32) -> Vec<String> {
    if uid == current_uid() {
        return vec![];
    }
    vec![
        "/usr/bin/setpriv".to_owned(),
        format!("--reuid={uid}"),
        format!("--regid={uid}"),
        "--clear-groups".to_owned(),
    ]
}

/// The launcher carries the AppArmor `userns` grant, so its floor must hold whatever it is
/// handed: a spec without a seccomp table still cannot give what it executes a user namespace.
/// A server without a sandbox policy is guarded by `mcpsum` itself, which holds no grant: it
/// keeps what it would have outside mcpsum (a namespace of its own, as Chromium's sandbox makes).
#[test]
fn the_launcher_floor_refuses_namespaces_whatever_the_spec() {
    let Some(abi) = landlock_abi() else {
        return skip("no Landlock on this kernel");
    };
    for uid in users() {
        let ctx = format!("uid {uid}");
        // The control: the same bare spec runs a command (so a refusal below is the floor's).
        let r = launch_bare_spec(uid, abi, &["/usr/bin/true"]);
        if r.code == 126 && r.stderr.contains("landlock: ") {
            return skip(&format!(
                "the launcher cannot apply Landlock here: {}",
                r.stderr
            ));
        }
        assert_eq!(r.code, 0, "{ctx}: {}", r.stderr);
        let r = launch_bare_spec(uid, abi, &["/usr/bin/unshare", "--user", "/usr/bin/true"]);
        assert_ne!(
            r.code, 0,
            "{ctx}: unshare --user ran under an empty seccomp table"
        );
        assert!(
            r.stderr.contains("Operation not permitted"),
            "{ctx}: {}",
            r.stderr
        );
        let r = launch_bare_spec(uid, abi, &["/usr/bin/unshare", "--mount", "/usr/bin/true"]);
        assert_ne!(r.code, 0, "{ctx}: unshare --mount ran");

        // The guard of a server without a sandbox policy is `mcpsum`'s, without the floor.
        let mut argv = as_user(uid);
        argv.extend([
            env!("CARGO_BIN_EXE_mcpsum").to_owned(),
            mcpsum_sandbox::GUARD_SUBCOMMAND.to_owned(),
            std::process::id().to_string(),
            "/usr/bin/unshare".to_owned(),
            "unshare".to_owned(),
            "--user".to_owned(),
            "/usr/bin/true".to_owned(),
        ]);
        let r = run_output(&mut command_of(&argv, Path::new("/")));
        assert_eq!(
            r.code, 0,
            "{ctx}: an unsandboxed server keeps its namespaces: {}",
            r.stderr
        );
    }
}

/// Anything but its one entry point executes nothing: not `__guard`, which is `mcpsum`'s.
#[test]
fn the_launcher_run_by_hand_executes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    let pid = std::process::id().to_string();
    for args in [
        vec![],
        vec!["/bin/sh", "-c", script.as_str()],
        vec!["__sandbox-probe", "[]"],
        vec!["--", "/bin/sh", "-c", script.as_str()],
        vec![
            mcpsum_sandbox::GUARD_SUBCOMMAND,
            pid.as_str(),
            "/bin/sh",
            "sh",
            "-c",
            script.as_str(),
        ],
    ] {
        let r = run_output(Command::new(launcher()).args(&args));
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("not meant to be run by hand"),
            "{}",
            r.stderr
        );
        assert!(r.stderr.contains("hint: "), "{}", r.stderr);
    }
    assert!(!marker.exists());
}

/// `mcpsum` itself no longer has the launcher's entry point: only `mcpsum-launch` has it, and
/// only it gets the AppArmor profile.
#[test]
fn mcpsum_refuses_the_launcher_entry_point() {
    let r = run_output(
        Command::new(env!("CARGO_BIN_EXE_mcpsum")).args([mcpsum_sandbox::EXEC_SUBCOMMAND, "{}"]),
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("unrecognized subcommand"), "{}", r.stderr);
    assert!(!r.stderr.contains("sandbox setup failed"), "{}", r.stderr);
}

/// Without `mcpsum-launch` beside it, mcpsum starts no sandboxed server and says where it looked
/// and what to do; a server without a sandbox policy does not need it.
#[test]
fn a_missing_launcher_refuses_every_sandboxed_launch_and_says_where_it_looked() {
    let uid = current_uid();
    let w = Sbx::new(uid);
    let gone = w.p("bin/mcpsum-launch");
    std::fs::remove_file(&gone).unwrap();
    let mut plain = vec![
        "lock".to_owned(),
        "--name".into(),
        "plain".into(),
        "--".into(),
    ];
    plain.extend(escape_argv());
    w.run(&plain).code(0);
    let r = w.lock(
        "boxed",
        &policy(&[helper("").display().to_string()], &[], &[]),
        &escape_argv(),
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("`{}` does not exist", gone.display())),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("beside the `mcpsum` binary"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("next to `mcpsum`"), "{}", r.stderr);
    let lock = w.lock_json();
    assert!(lock["servers"].get("boxed").is_none(), "{lock}");
}
