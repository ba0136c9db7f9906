//! Shared helpers: a fresh temp dir per test, the real `mcpsum` binary run with an explicit
//! environment, scenario files for the fake server, and snapshot filters; the one JSON-RPC test
//! client and era type ([`client`]) and the one pseudo-terminal runner ([`terminal`]).
//!
//! Nothing here changes the test process's environment or writes into the repository.

pub mod client;
pub mod terminal;

pub use client::{Client, ERAS, Era, initialize, initialized, pipe, unique};
pub use terminal::{OnTerminal, TtyRun, run_on_terminal};

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// The repository root (where `Cargo.toml` of `mcpsum` lives).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The fake MCP server script.
pub fn fake_server() -> PathBuf {
    repo().join("tests/servers/mcp_fake.py")
}

/// A bundled scenario of the fake server.
pub fn bundled_scenario(name: &str) -> PathBuf {
    repo().join("tests/servers/scenarios").join(name)
}

/// The interpreter for the fake server: absolute, never a pyenv shim (mcpsum withholds `PATH`).
pub const PYTHON: &str = "/usr/bin/python3";

/// `PATH` for the child: the test's own, so `node` is found wherever CI installed it.
pub fn child_path() -> std::ffi::OsString {
    std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into())
}

/// The result of one `mcpsum` run.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The outcome of a command run otherwise than through [`World::run`] (in another
    /// directory, without `--lockfile`).
    pub fn from_output(out: Output) -> Self {
        Self {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Asserts the exit code, showing the whole run when it is wrong.
    #[track_caller]
    pub fn code(&self, expected: i32) -> &Self {
        assert_eq!(
            self.code, expected,
            "unexpected exit code\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// Asserts that stderr contains every needle.
    #[track_caller]
    pub fn stderr_has(&self, needles: &[&str]) -> &Self {
        for n in needles {
            assert!(
                self.stderr.contains(n),
                "stderr lacks {n:?}\n--- stderr\n{}\n--- stdout\n{}",
                self.stderr,
                self.stdout
            );
        }
        self
    }

    /// Asserts that stdout contains every needle.
    #[track_caller]
    pub fn stdout_has(&self, needles: &[&str]) -> &Self {
        for n in needles {
            assert!(
                self.stdout.contains(n),
                "stdout lacks {n:?}\n--- stdout\n{}\n--- stderr\n{}",
                self.stdout,
                self.stderr
            );
        }
        self
    }

    /// stdout parsed as JSON.
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e})\n--- stdout\n{}\n--- stderr\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

/// One test's world: a temp dir holding the lockfile, scenarios, state dir and home.
pub struct World {
    dir: tempfile::TempDir,
}

impl World {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("mcpsum-it-")
            .tempdir()
            .expect("temp dir");
        std::fs::create_dir(dir.path().join("home")).expect("home");
        Self { dir }
    }

    /// The temp dir.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The lockfile every command uses (`--lockfile`), so no ancestor `mcp.lock` is picked up.
    pub fn lockfile(&self) -> PathBuf {
        self.path().join("mcp.lock")
    }

    /// The lockfile's bytes (empty when it does not exist).
    pub fn lock_bytes(&self) -> Vec<u8> {
        std::fs::read(self.lockfile()).unwrap_or_default()
    }

    /// The lockfile parsed.
    pub fn lock_json(&self) -> Value {
        serde_json::from_slice(&self.lock_bytes()).expect("lockfile is JSON")
    }

    /// Replaces the lockfile's bytes (to tamper with it).
    pub fn write_lock(&self, bytes: impl AsRef<[u8]>) {
        std::fs::write(self.lockfile(), bytes).expect("write lockfile");
    }

    /// Writes a scenario file and returns its absolute path.
    pub fn scenario(&self, name: &str, scenario: &Value) -> PathBuf {
        let p = self.path().join(format!("{name}.json"));
        std::fs::write(&p, serde_json::to_vec_pretty(scenario).expect("json")).expect("write");
        p
    }

    /// A transcript path for a scenario's `transcript` key.
    pub fn transcript(&self, name: &str) -> PathBuf {
        self.path().join(format!("{name}.transcript.jsonl"))
    }

    /// The `mcpsum` command with a clean, explicit environment and `--lockfile`.
    pub fn cmd(&self) -> Command {
        let mut c = self.bare_cmd();
        c.arg("--lockfile").arg(self.lockfile());
        c
    }

    /// Like [`World::cmd`] but without `--lockfile`, to test how the lockfile is found.
    pub fn bare_cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_mcpsum"));
        c.env_clear()
            .env("PATH", child_path())
            .env("HOME", self.path().join("home"))
            .env("MCPSUM_STATE_DIR", self.path().join("state"))
            .env("NO_COLOR", "1")
            .current_dir(self.path())
            .stdin(Stdio::null());
        c
    }

    /// Runs `mcpsum --lockfile LOCKFILE ARGS` (a shell fragment, run by `/bin/sh` with stdin,
    /// stdout and stderr on a pseudo-terminal): the exit code and what the terminal showed
    /// (CRLF line ends).
    #[cfg(target_os = "linux")]
    pub fn on_terminal(&self, args: &str) -> (i32, String) {
        let script = format!(
            "{} --lockfile {} {args}",
            env!("CARGO_BIN_EXE_mcpsum"),
            self.lockfile().display()
        );
        let mut sh = Command::new("/bin/sh");
        sh.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("MCPSUM_STATE_DIR", self.path().join("state"))
            .env("NO_COLOR", "1")
            .current_dir(self.path())
            .args(["-c", &script]);
        let run = run_on_terminal(sh, OnTerminal::All);
        (run.code, run.terminal)
    }

    /// Runs `mcpsum ARGS...`.
    pub fn run<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Run {
        let out = self.cmd().args(args).output().expect("run mcpsum");
        Run::from_output(out)
    }

    /// `mcpsum lock --name NAME [extra...] -- python3 mcp_fake.py SCENARIO`.
    pub fn lock_fake(&self, name: &str, scenario: &Path, extra: &[&str]) -> Run {
        let mut args: Vec<String> = vec!["lock".into(), "--name".into(), name.into()];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args.push("--".into());
        args.extend(fake_argv(scenario));
        self.run(&args)
    }

    /// Replaces the temp dir and repository paths and the generator version for snapshots.
    pub fn redact(&self, text: &str) -> String {
        redact_paths(text, self.path())
    }
}

/// `[/usr/bin/python3, .../mcp_fake.py, SCENARIO]`.
pub fn fake_argv(scenario: &Path) -> Vec<String> {
    vec![
        PYTHON.to_owned(),
        fake_server().display().to_string(),
        scenario.display().to_string(),
    ]
}

/// Replaces `tmp` with `[TEMP]` and the repository root with `[REPO]`.
pub fn redact_paths(text: &str, tmp: &Path) -> String {
    // The canonical form too, in case the temp dir is reached through a symlink.
    let mut out = text.to_owned();
    if let Ok(canon) = tmp.canonicalize() {
        out = out.replace(&canon.display().to_string(), "[TEMP]");
    }
    out = out.replace(&tmp.display().to_string(), "[TEMP]");
    out.replace(&repo().display().to_string(), "[REPO]")
}

/// insta settings: the generator version is filtered (paths are redacted by [`World::redact`]).
pub fn snapshot_settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.add_filter(r"mcpsum \d+\.\d+\.\d+(-[0-9A-Za-z.]+)?", "mcpsum [VERSION]");
    s.set_prepend_module_to_snapshot(true);
    s
}

/// Whether real servers from `scripts/install-test-deps.sh` are required (CI).
pub fn real_servers_required() -> bool {
    std::env::var_os("MCPSUM_REQUIRE_REAL_SERVERS").is_some_and(|v| v == "1")
}

/// `target/test-deps/<rel>` if it exists; otherwise prints why the test skips and returns
/// `None`, or panics when `MCPSUM_REQUIRE_REAL_SERVERS=1`.
pub fn test_dep(rel: &str) -> Option<PathBuf> {
    let p = repo().join("target/test-deps").join(rel);
    if p.exists() {
        return Some(p);
    }
    let msg = format!(
        "`{}` is missing; run `scripts/install-test-deps.sh`",
        p.display()
    );
    assert!(
        !real_servers_required(),
        "{msg} (MCPSUM_REQUIRE_REAL_SERVERS=1)"
    );
    eprintln!("skipping: {msg}");
    None
}

/// Events of a fake server's transcript.
pub fn transcript_events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// How many server processes a transcript saw start.
pub fn starts(path: &Path) -> usize {
    transcript_events(path)
        .iter()
        .filter(|e| e["event"] == "start")
        .count()
}

/// The example scenario as a JSON value, for tests that derive drifted variants from it.
pub fn example_scenario() -> Value {
    serde_json::from_slice(&std::fs::read(bundled_scenario("example.json")).expect("read"))
        .expect("json")
}

/// Asserts the lockfile is unchanged, naming the step.
#[track_caller]
pub fn assert_unchanged(world: &World, before: &[u8], what: &str) {
    let after = world.lock_bytes();
    assert!(
        after == before,
        "{what}: the lockfile changed\n--- before\n{}\n--- after\n{}",
        String::from_utf8_lossy(before),
        String::from_utf8_lossy(&after)
    );
}

/// Names of `.mcp.lock.*.tmp` files left in `dir`.
pub fn temp_leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(".mcp.lock.") && n.ends_with(".tmp"))
                .collect()
        })
        .unwrap_or_default()
}
