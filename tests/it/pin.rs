//! Artifact pinning (#17): a `uvx` server's whole closure is resolved at `lock` against the real
//! registry, installed hash-checked into `$XDG_CACHE_HOME/mcpsum`, and every later start runs
//! that install: offline, without uv's cache, sandboxed with no network. A changed hash in the
//! lock or a changed file in the install stops it, naming the package.
//!
//! Needs `target/test-deps` (uv, and Python 3 on this machine) and PyPI for the lock; skipped
//! with a printed reason when `target/test-deps` is missing, unless
//! `MCPSUM_REQUIRE_REAL_SERVERS=1`. Each test has its own home, mcpsum cache and uv cache.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::support::{self, Run, World, initialize, initialized, pipe, test_dep};

const SPEC: &str = "mcp-server-time==2026.10.19";

/// A world whose `mcpsum` finds `uv`/`uvx` on `PATH`, with its own caches.
struct Pin {
    w: World,
    bin: PathBuf,
}

impl Pin {
    fn new() -> Option<Self> {
        let uv = test_dep("venv/bin/uv")?;
        Some(Self {
            w: World::new(),
            bin: uv.parent().unwrap().to_path_buf(),
        })
    }

    fn path_var(&self) -> std::ffi::OsString {
        let mut dirs = vec![self.bin.clone()];
        dirs.extend(std::env::split_paths(&support::child_path()));
        std::env::join_paths(dirs).unwrap()
    }

    fn cache(&self) -> PathBuf {
        self.w.path().join("cache")
    }

    fn uv_cache(&self) -> PathBuf {
        self.w.path().join("uv-cache")
    }

    fn npm_cache(&self) -> PathBuf {
        self.w.path().join("npm-cache")
    }

    fn cmd(&self) -> Command {
        let mut c = self.w.cmd();
        c.env("PATH", self.path_var())
            .env("XDG_CACHE_HOME", self.cache())
            .env("UV_CACHE_DIR", self.uv_cache())
            .env("UV_PYTHON_DOWNLOADS", "never")
            .env("npm_config_cache", self.npm_cache())
            .env("npm_config_update_notifier", "false");
        // The machine's trust anchors for the registries (a TLS-inspecting proxy's, say).
        for var in ["SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS"] {
            if let Some(v) = std::env::var_os(var) {
                c.env(var, v);
            }
        }
        c
    }

    /// As [`Pin::cmd`], with every registry unreachable (a closed loopback port) and uv told
    /// to stay offline.
    fn offline_cmd(&self) -> Command {
        let mut c = self.cmd();
        c.env("UV_INDEX_URL", "http://127.0.0.1:9/simple")
            .env("UV_DEFAULT_INDEX", "http://127.0.0.1:9/simple")
            .env("UV_OFFLINE", "1")
            .env("npm_config_registry", "http://127.0.0.1:9/")
            .env("npm_config_offline", "true");
        c
    }

    fn run(&self, args: &[&str]) -> Run {
        Run::from_output(self.cmd().args(args).output().unwrap())
    }

    fn run_offline(&self, args: &[&str]) -> Run {
        Run::from_output(self.offline_cmd().args(args).output().unwrap())
    }

    fn lock(&self, extra: &[&str]) -> Run {
        let mut args = vec!["lock", "--name", "time", "--era", "legacy"];
        args.extend(extra);
        args.extend(["--", "uvx", SPEC]);
        self.run(&args)
    }

    /// The one install folder under the cache.
    fn install(&self) -> PathBuf {
        let installs = self.cache().join("mcpsum/installs");
        let dirs: Vec<PathBuf> = std::fs::read_dir(&installs)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        dirs[0].clone()
    }

    fn remove_npm_cache(&self) {
        let _ = std::fs::remove_dir_all(self.npm_cache());
    }

    fn remove_uv_cache(&self) {
        let _ = Command::new("chmod")
            .args(["-R", "u+w"])
            .arg(self.uv_cache())
            .status();
        let _ = std::fs::remove_dir_all(self.uv_cache());
    }
}

/// Asserts that what the run printed (stdout, where `verify` reports, and stderr) holds every
/// needle.
#[track_caller]
fn printed(r: &Run, needles: &[&str]) {
    let all = format!("{}\n{}", r.stdout, r.stderr);
    for n in needles {
        assert!(
            all.contains(n),
            "output lacks {n:?}\n--- stdout\n{}\n--- stderr\n{}",
            r.stdout,
            r.stderr
        );
    }
}

/// Runs each of `commands` with `cmd`'s environment and stdin closed, and checks that each
/// fails and prints every one of `needles`.
fn refused(cmd: impl Fn() -> Command, commands: &[&[&str]], needles: &[&str]) {
    for args in commands {
        let r = Run::from_output(
            cmd()
                .args(*args)
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap(),
        );
        assert_ne!(r.code, 0, "{args:?}: {r:#?}");
        printed(&r, needles);
    }
}

fn remove_tree(dir: &Path) {
    Command::new("chmod")
        .args(["-R", "u+w"])
        .arg(dir)
        .status()
        .unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

/// `uv pip compile --generate-hashes`, independently: name → (version, every hash).
fn independent_resolution(p: &Pin, python: &str) -> BTreeMap<String, (String, Vec<String>)> {
    let text = uv_compile(
        p,
        &["--generate-hashes", "--no-annotate", "--python", python],
        &format!("{SPEC}\n"),
    );
    let mut map = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let line = line.trim().trim_end_matches('\\').trim();
        if let Some(h) = line.strip_prefix("--hash=") {
            let name = current.clone().unwrap();
            let entry: &mut (String, Vec<String>) = map.get_mut(&name).unwrap();
            entry.1.push(h.to_owned());
        } else if let Some((name, version)) = line.split_once("==") {
            let version = version.split(';').next().unwrap().trim().to_owned();
            current = Some(name.to_owned());
            map.insert(name.to_owned(), (version, Vec::new()));
        }
    }
    map
}

/// The lockfile with `f` applied to the entry's `artifacts`, and its digests recomputed as a
/// careful editor would (the file then passes its own checks).
pub fn rewrite_artifacts(lock: &mut Value, name: &str, f: impl FnOnce(&mut Value)) {
    let e = &mut lock["servers"][name];
    f(&mut e["artifacts"]);
    let digest = |v: &Value| {
        use sha2::Digest as _;
        let bytes = serde_json_canonicalizer::to_vec(v).unwrap();
        format!("sha256:{}", hex::encode(sha2::Sha256::digest(&bytes)))
    };
    e["digests"]["artifacts"] = json!(digest(&e["artifacts"]));
    let mut d = e["digests"].clone();
    d.as_object_mut().unwrap().remove("surface");
    e["digests"]["surface"] = json!(digest(&d));
}

#[test]
fn uvx_closure_is_resolved_pinned_and_relocked_byte_identical() {
    let Some(p) = Pin::new() else { return };
    p.lock(&[])
        .code(0)
        .stderr_has(&["locked `time`", "code pinned:", "installed hash-checked"]);
    let lock = p.w.lock_json();
    assert_eq!(lock["lockfileVersion"], 3);
    let e = &lock["servers"]["time"];
    // What the person wrote stays the command.
    assert_eq!(e["command"], json!(["uvx", SPEC]));
    let a = &e["artifacts"];
    assert_eq!(a["installer"], "uv");
    let python = a["python"].as_str().unwrap().to_owned();
    assert!(
        python.split('.').count() == 2 && python.starts_with("3."),
        "{python}"
    );
    assert!(
        e["digests"]["artifacts"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    let packages = a["packages"].as_array().unwrap();
    let names: Vec<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "packages sorted by name");
    assert!(
        packages
            .iter()
            .any(|p| p["name"] == "mcp-server-time" && p["version"] == "2026.10.19"),
        "{a}"
    );
    // The same closure as an independent resolution, each hash one of the release's files.
    let independent = independent_resolution(&p, &python);
    let recorded: Vec<&str> = names.clone();
    let expected: Vec<&str> = independent.keys().map(String::as_str).collect();
    assert_eq!(recorded, expected);
    for pkg in packages {
        let (version, hashes) = &independent[pkg["name"].as_str().unwrap()];
        assert_eq!(pkg["version"].as_str().unwrap(), version);
        let hash = pkg["hash"].as_str().unwrap();
        assert!(hash.starts_with("sha256:") && hash.len() == 71, "{hash}");
        assert!(hashes.iter().any(|h| h == hash), "{pkg} not in {hashes:?}");
    }

    // The install: content-addressed in the cache, read-only, with the package in it.
    let dir = p.install();
    assert!(
        dir.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("uv-")
    );
    let server_py = find_file(&dir, "mcp_server_time/server.py");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&server_py).unwrap().permissions().mode();
    assert_eq!(mode & 0o222, 0, "{mode:o}");
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o222, 0, "{mode:o}");

    // `show` shows both the command and what runs.
    p.run(&["show", "--name", "time"]).code(0).stdout_has(&[
        "command      uvx 'mcp-server-time==2026.10.19'",
        &format!(
            "code         pinned: {} packages (uv, Python {python})",
            packages.len()
        ),
        &format!("runs         {}/bin/mcp-server-time", dir.display()),
        "mcp-server-time 2026.10.19  sha256:",
    ]);
    let sj = p.run(&["show", "--json"]);
    sj.code(0);
    assert_eq!(sj.json()["servers"]["time"]["artifacts"], *a);

    // Nothing changed: the re-lock writes the same bytes.
    let before = p.w.lock_bytes();
    p.run(&["lock", "--name", "time"])
        .code(0)
        .stderr_has(&["unchanged since the previous lock"]);
    assert_eq!(
        String::from_utf8(p.w.lock_bytes()).unwrap(),
        String::from_utf8(before.clone()).unwrap()
    );

    // A re-lock that resolves otherwise than the lock says shows it as a lockfile diff reads.
    // The versions are what this resolution found: the registry's newest releases move on.
    let version_of = |name: &str| {
        packages
            .iter()
            .find(|p| p["name"] == name)
            .and_then(|p| p["version"].as_str())
            .unwrap_or_else(|| panic!("no {name} in {a}"))
            .to_owned()
    };
    let (anyio, attrs) = (version_of("anyio"), version_of("attrs"));
    let mut edited = p.w.lock_json();
    rewrite_artifacts(&mut edited, "time", |a| {
        let packages = a["packages"].as_array_mut().unwrap();
        packages.retain(|p| p["name"] != "attrs");
        for pkg in packages.iter_mut() {
            if pkg["name"] == "anyio" {
                pkg["version"] = json!("0.0.1");
            }
        }
        packages.push(json!({"name": "zz-old-dep", "version": "1.0.0",
            "hash": "sha256:1111111111111111111111111111111111111111111111111111111111111111"}));
    });
    p.w.write_lock(serde_json::to_vec_pretty(&edited).unwrap());
    p.run(&["lock", "--name", "time"]).code(0).stderr_has(&[
        "code changes against the previous lock:",
        &format!("~ anyio 0.0.1 → {anyio}"),
        &format!("+ attrs {attrs}"),
        "- zz-old-dep",
        "surface unchanged since the previous lock",
    ]);
    assert_eq!(
        p.w.lock_bytes(),
        before,
        "the resolution is written back as it was"
    );
}

fn find_file(dir: &Path, suffix: &str) -> PathBuf {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let path = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(path);
            } else if path.to_string_lossy().ends_with(suffix) {
                return path;
            }
        }
    }
    panic!("no {suffix} under {}", dir.display())
}

#[test]
fn pinned_uvx_server_runs_offline_without_uv_cache_and_without_network() {
    let Some(p) = Pin::new() else { return };
    p.lock(&[]).code(0);
    // No warm uv cache and no reachable index: the install is all it needs.
    p.remove_uv_cache();
    p.run_offline(&["verify"])
        .code(0)
        .stdout_has(&["ok time: clean"]);
    let mut cmd = p.offline_cmd();
    cmd.args(["proxy", "--name", "time"]);
    let mut s = crate::sandbox::session(cmd, p.w.path().join("proxy.stderr"));
    let r = s.request_next(
        "tools/call",
        json!({"name": "get_current_time", "arguments": {"timezone": "Etc/UTC"}}),
    );
    assert!(r.to_string().contains("Etc/UTC"), "{r}\n{}", s.stderr());
    drop(s);
    // No network at all: its own network namespace holds only a loopback that is down.
    if Command::new("unshare")
        .args(["-rn", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        let offline = p.offline_cmd();
        let mut un = Command::new("unshare");
        un.arg("-rn")
            .arg(offline.get_program())
            .args(offline.get_args())
            .arg("verify")
            .env_clear()
            .current_dir(p.w.path())
            .stdin(std::process::Stdio::null());
        for (k, v) in offline.get_envs() {
            if let Some(v) = v {
                un.env(k, v);
            }
        }
        Run::from_output(un.output().unwrap())
            .code(0)
            .stdout_has(&["ok time: clean"]);
    } else {
        eprintln!("skipping the `unshare -rn` part: no user namespaces here");
    }

    // A missing install is made again from the hashes; when that cannot be done (no cache,
    // no index) the server does not start, and the error says why and what to run.
    remove_tree(&p.install());
    let r = p.run_offline(&["verify"]);
    r.code(2);
    printed(
        &r,
        &[
            "cannot make the pinned install of server `time` from its recorded hashes",
            "mcpsum verify --name time",
        ],
    );
    let r = Run::from_output(
        p.offline_cmd()
            .args(["proxy", "--name", "time"])
            .output()
            .unwrap(),
    );
    assert_ne!(r.code, 0, "{r:#?}");
    r.stderr_has(&["cannot make the pinned install of server `time`"]);
    // Online again, the next start makes it.
    p.run(&["verify"]).code(0).stdout_has(&["ok time: clean"]);
    p.install();
}

#[test]
fn pinned_uvx_server_serves_sandboxed_with_no_network_and_no_uv_cache() {
    let Some(p) = Pin::new() else { return };
    let policy = p.w.path().join("sandbox.json");
    std::fs::write(
        &policy,
        r#"{"filesystem": {"read": [], "write": []}, "network": {"allow": []}}"#,
    )
    .unwrap();
    let r = p.lock(&["--sandbox", policy.to_str().unwrap()]);
    if let Some(why) = crate::sandbox::kernel_lacks(&r) {
        return crate::sandbox::skip(&why);
    }
    r.code(0);
    // The install is read-only inside the sandbox, and nothing else of the cache is there.
    p.remove_uv_cache();
    let mut cmd = p.offline_cmd();
    cmd.args(["proxy", "--name", "time"]);
    let mut s = crate::sandbox::session(cmd, p.w.path().join("proxy.stderr"));
    let r = s.request_next(
        "tools/call",
        json!({"name": "get_current_time", "arguments": {"timezone": "Etc/UTC"}}),
    );
    assert!(r.to_string().contains("Etc/UTC"), "{r}\n{}", s.stderr());
    drop(s);
    p.run_offline(&["verify"]).code(0);
}

#[test]
fn changed_file_in_the_install_is_refused_naming_the_package() {
    let Some(p) = Pin::new() else { return };
    p.lock(&[]).code(0);
    let dir = p.install();
    let server_py = find_file(&dir, "mcp_server_time/server.py");
    Command::new("chmod")
        .arg("u+w")
        .arg(&server_py)
        .status()
        .unwrap();
    let mut text = std::fs::read_to_string(&server_py).unwrap();
    text.push_str("\nimport os  # changed after the install\n");
    std::fs::write(&server_py, text).unwrap();

    refused(
        || p.cmd(),
        &[
            &["verify"][..],
            &["lock", "--name", "time"][..],
            &["proxy", "--name", "time"][..],
        ],
        &[
            "the pinned install of server `time` was changed",
            "`mcp-server-time 2026.10.19`",
            "changed: `lib/python",
            "mcp_server_time/server.py",
        ],
    );
    // Once removed, the next start makes it again from the hashes.
    remove_tree(&dir);
    p.run(&["verify"]).code(0).stdout_has(&["ok time: clean"]);
}

/// Appends `code` to `file` in a read-only install, as a writer of the cache could.
fn append_to(file: &Path, code: &str) {
    Command::new("chmod").arg("u+w").arg(file).status().unwrap();
    let mut text = std::fs::read_to_string(file).unwrap();
    text.push_str(code);
    std::fs::write(file, text).unwrap();
}

/// `mcpsum proxy --name time` sent a handshake and a `tools/list` at once (then EOF): the
/// answers by id, and the run.
fn handshake_and_list(p: &Pin) -> (BTreeMap<i64, Value>, Run) {
    let lines = [
        initialize(1, "2025-06-18"),
        initialized(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ];
    let (r, msgs) = pipe(p.cmd().args(["proxy", "--name", "time"]), &lines);
    let answers = msgs
        .into_iter()
        .filter_map(|v| Some((v["id"].as_i64()?, v)))
        .collect();
    (answers, r)
}

#[test]
fn proxy_answers_the_handshake_from_the_lock_and_never_runs_a_changed_install() {
    let Some(p) = Pin::new() else { return };
    p.lock(&[]).code(0);
    let (answers, r) = handshake_and_list(&p);
    r.code(0);
    assert!(answers[&2]["result"]["tools"].is_array(), "{r:#?}");

    // Code that would leave a mark the moment the server's module is imported.
    let mark = p.w.path().join("the-changed-code-ran");
    let server_py = find_file(&p.install(), "mcp_server_time/server.py");
    append_to(
        &server_py,
        &format!(
            "\nopen({:?}, 'w').write('ran')\n",
            mark.display().to_string()
        ),
    );
    let (answers, r) = handshake_and_list(&p);
    assert_ne!(r.code, 0, "{r:#?}");
    // The handshake is answered from the lock while the install is checked ...
    assert!(answers[&1]["result"]["serverInfo"].is_object(), "{r:#?}");
    // ... and nothing else is: the request gets the refusal naming the package, and the
    // changed code never ran.
    let refusal = answers[&2]["error"]["message"].as_str().unwrap_or_default();
    assert!(
        refusal.contains("the pinned install of server `time` was changed")
            && refusal.contains("`mcp-server-time 2026.10.19`"),
        "{r:#?}"
    );
    printed(&r, &["mcp_server_time/server.py"]);
    assert!(!mark.exists(), "the changed server code ran");
}

#[test]
fn a_manifest_rewritten_to_match_changed_files_is_refused() {
    let Some(p) = Pin::new() else { return };
    p.lock(&[]).code(0);
    let dir = p.install();
    let server_py = find_file(&dir, "mcp_server_time/server.py");
    append_to(&server_py, "\nimport os  # changed after the install\n");
    // The writer of the cache also rewrites the install's own record of its files.
    let manifest_path = dir.join(".mcpsum-install.json");
    let mut manifest: Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    let rel = server_py
        .strip_prefix(&dir)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let out = Command::new("sha256sum").arg(&server_py).output().unwrap();
    let hex = String::from_utf8(out.stdout).unwrap();
    let hex = hex.split_whitespace().next().unwrap();
    assert!(
        manifest["files"][&rel].is_string(),
        "{rel} not in the manifest"
    );
    manifest["files"][&rel] = json!(format!("sha256:{hex}"));
    Command::new("chmod")
        .arg("u+w")
        .arg(&manifest_path)
        .status()
        .unwrap();
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();

    refused(
        || p.cmd(),
        &[&["verify"][..], &["proxy", "--name", "time"][..]],
        &[
            "the pinned install of server `time` was changed: its manifest",
            "is not the one written when it was made",
        ],
    );
    remove_tree(&dir);
    p.run(&["verify"]).code(0).stdout_has(&["ok time: clean"]);
}

/// The state directory's record of an install is written through the one atomic writer: a
/// link left at a fixed temporary name beside it is not followed.
#[test]
fn the_install_record_is_not_written_through_a_link_beside_it() {
    let Some(p) = Pin::new() else { return };
    p.lock(&[]).code(0);
    let leaf = p.install().file_name().unwrap().to_owned();
    let record = p.w.path().join("state/installs").join(&leaf);
    assert!(record.is_file(), "{}", record.display());
    let victim = p.w.path().join("victim");
    std::fs::write(&victim, "untouched\n").unwrap();
    std::fs::remove_file(&record).unwrap();
    std::os::unix::fs::symlink(&victim, record.with_extension("tmp")).unwrap();
    p.run(&["verify"]).code(0).stdout_has(&["ok time: clean"]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched\n");
    let meta = std::fs::symlink_metadata(&record).unwrap();
    assert!(meta.file_type().is_file(), "{meta:?}");
    assert!(
        std::fs::read_to_string(&record)
            .unwrap()
            .starts_with("sha256:")
    );
}

#[test]
fn changed_hash_in_the_lock_is_refused_naming_the_package() {
    let Some(p) = Pin::new() else { return };
    p.lock(&[]).code(0);
    let mut lock = p.w.lock_json();
    // Another file's hash for the server's own package, the digests made to match.
    let other = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
    rewrite_artifacts(&mut lock, "time", |a| {
        for pkg in a["packages"].as_array_mut().unwrap() {
            if pkg["name"] == "mcp-server-time" {
                pkg["hash"] = json!(other);
            }
        }
    });
    p.w.write_lock(serde_json::to_vec_pretty(&lock).unwrap());
    refused(
        || p.cmd(),
        &[&["verify"], &["proxy", "--name", "time"]],
        &[
            "cannot make the pinned install of server `time` from its recorded hashes",
            "mcp-server-time==2026.10.19",
            other,
        ],
    );
}

/// The golden fixture with a pinned closure on its legacy entry (digests recomputed).
fn golden_pinned() -> Value {
    let mut lock: Value =
        serde_json::from_str(include_str!("../fixtures/golden.mcp.lock")).unwrap();
    lock["lockfileVersion"] = json!(3);
    let e = lock["servers"]["golden-legacy"].as_object_mut().unwrap();
    // `artifacts` after `envPassthrough`, as mcpsum writes it.
    let mut entry = serde_json::Map::new();
    for (k, v) in std::mem::take(e) {
        let after = k == "envPassthrough";
        entry.insert(k, v);
        if after {
            entry.insert(
                "artifacts".into(),
                json!({"installer": "uv", "python": "3.11", "packages": [
                    {"name": "anyio", "version": "4.16.0",
                     "hash": "sha256:c66ae634e0b8228396b801741beb3294326d4b6102f7bba4041c0dfb58c29026"},
                    {"name": "mcp-server-time", "version": "2026.10.19",
                     "hash": "sha256:1111111111111111111111111111111111111111111111111111111111111111"}
                ]}),
            );
        }
    }
    *e = entry;
    rewrite_artifacts(&mut lock, "golden-legacy", |_| {});
    lock
}

#[test]
fn artifacts_need_lockfile_version_3_and_a_matching_digest() {
    let w = World::new();
    let good = golden_pinned();
    w.write_lock(serde_json::to_vec_pretty(&good).unwrap());
    w.run(&["show", "--name", "golden-legacy"])
        .code(0)
        .stdout_has(&[
            "code         pinned: 2 packages (uv, Python 3.11), sha256:",
            "anyio 4.16.0  sha256:c66ae634",
        ]);
    // Not a `uvx` command: the entry cannot run its closure, so it does not start at all.
    let r = w.run(&["verify"]);
    r.code(2);
    printed(
        &r,
        &["server `golden-legacy` pins `uv` artifacts, but its command is not a `uvx` command"],
    );

    let refused = |lock: &Value, needles: &[&str]| {
        w.write_lock(serde_json::to_vec_pretty(lock).unwrap());
        let r = w.run(&["show"]);
        assert_ne!(r.code, 0, "{r:#?}");
        r.stderr_has(needles);
    };
    // The version gate: an mcpsum that reads only versions 1 and 2 refuses the file as a whole
    // (this one says so for any version it does not read), and a closure needs version 3.
    let mut v = good.clone();
    v["lockfileVersion"] = json!(4);
    refused(
        &v,
        &["has lockfileVersion 4, which this mcpsum does not read"],
    );
    for version in [1, 2] {
        let mut v = good.clone();
        v["lockfileVersion"] = json!(version);
        refused(
            &v,
            &[&format!(
                "lockfileVersion {version} cannot hold `artifacts` (server `golden-legacy`); such entries need version 3"
            )],
        );
    }
    // Covered by the digests: an edit that does not recompute them is refused.
    let mut v = good.clone();
    v["servers"]["golden-legacy"]["artifacts"]["packages"][0]["version"] = json!("4.16.1");
    refused(&v, &["server `golden-legacy`, artifacts: digest mismatch"]);
    let mut v = good.clone();
    v["servers"]["golden-legacy"]["digests"]
        .as_object_mut()
        .unwrap()
        .remove("artifacts");
    refused(&v, &["artifacts: digest mismatch (recorded null"]);
    // What an installer would read as an option, out of order, or a malformed hash.
    for (edit, needle) in [
        (
            json!({"name": "--index-url=http://x", "version": "1", "hash": "sha256:1111111111111111111111111111111111111111111111111111111111111111"}),
            "is not a package name",
        ),
        (
            json!({"name": "zz", "version": "1 --pre", "hash": "sha256:1111111111111111111111111111111111111111111111111111111111111111"}),
            "is not a version",
        ),
        (
            json!({"name": "zz", "version": "1", "hash": "sha256:XYZ"}),
            "is not a digest",
        ),
        (
            json!({"name": "aaa", "version": "1", "hash": "sha256:1111111111111111111111111111111111111111111111111111111111111111"}),
            "packages must be sorted by name",
        ),
    ] {
        let mut v = good.clone();
        rewrite_artifacts(&mut v, "golden-legacy", |a| {
            a["packages"].as_array_mut().unwrap().push(edit);
        });
        refused(&v, &[needle]);
    }
}

const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";

/// `npm install --package-lock-only`, independently: (path, name, version, integrity).
fn independent_npm_resolution(p: &Pin) -> Vec<(String, String, String)> {
    let dir = p.w.path().join("independent");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("package.json"),
        json!({"name": "x", "version": "0.0.0", "private": true,
               "dependencies": {"@modelcontextprotocol/server-everything": "2026.8.31"}})
        .to_string(),
    )
    .unwrap();
    let out = Command::new("npm")
        .args([
            "install",
            "--package-lock-only",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
        ])
        .env("npm_config_cache", p.npm_cache())
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lock: Value =
        serde_json::from_slice(&std::fs::read(dir.join("package-lock.json")).unwrap()).unwrap();
    let mut out: Vec<(String, String, String)> = lock["packages"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, v)| {
            (
                k.rsplit("node_modules/").next().unwrap().to_owned(),
                v["version"].as_str().unwrap().to_owned(),
                v["integrity"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn npx_closure_is_pinned_by_integrity_and_runs_offline_and_refuses_changes() {
    let Some(p) = Pin::new() else { return };
    if which_node().is_none() {
        assert!(!support::real_servers_required(), "no `node` on PATH");
        return eprintln!("skipping: no `node` on PATH");
    }
    let lock_args = [
        "lock",
        "--name",
        "everything",
        "--era",
        "legacy",
        "--",
        "npx",
        "-y",
        EVERYTHING,
        "stdio",
    ];
    p.run(&lock_args).code(0).stderr_has(&[
        "locked `everything`",
        "code pinned:",
        "(npm, Node.js ",
    ]);
    let lock = p.w.lock_json();
    assert_eq!(lock["lockfileVersion"], 3);
    let a = &lock["servers"]["everything"]["artifacts"];
    assert_eq!(a["installer"], "npm");
    assert!(
        a["node"]
            .as_str()
            .unwrap()
            .bytes()
            .all(|b| b.is_ascii_digit()),
        "{a}"
    );
    let mut recorded: Vec<(String, String, String)> = a["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert!(p["hash"].as_str().unwrap().starts_with("sha512-"), "{p}");
            (
                p["name"].as_str().unwrap().to_owned(),
                p["version"].as_str().unwrap().to_owned(),
                p["hash"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let names: Vec<&String> = recorded.iter().map(|r| &r.0).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "packages sorted by name");
    recorded.sort();
    assert_eq!(recorded, independent_npm_resolution(&p));

    let before = p.w.lock_bytes();
    p.run(&["lock", "--name", "everything"])
        .code(0)
        .stderr_has(&["unchanged since the previous lock"]);
    assert_eq!(p.w.lock_bytes(), before, "re-lock is byte-identical");

    // No npm cache and no registry: the install is all it needs.
    p.remove_npm_cache();
    p.run_offline(&["verify"])
        .code(0)
        .stdout_has(&["ok everything: clean"]);
    let mut cmd = p.offline_cmd();
    cmd.args(["proxy", "--name", "everything"]);
    let mut s = crate::sandbox::session(cmd, p.w.path().join("proxy.stderr"));
    let r = s.request_next(
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "pinned"}}),
    );
    assert!(r.to_string().contains("pinned"), "{r}\n{}", s.stderr());
    drop(s);

    // A changed file in the install is refused, naming the package.
    let dir = p.install();
    let index = find_file(
        &dir,
        "node_modules/@modelcontextprotocol/server-everything/package.json",
    );
    Command::new("chmod")
        .arg("u+w")
        .arg(&index)
        .status()
        .unwrap();
    let mut text = std::fs::read_to_string(&index).unwrap();
    text.push(' ');
    std::fs::write(&index, text).unwrap();
    refused(
        || p.offline_cmd(),
        &[&["verify"][..], &["proxy", "--name", "everything"][..]],
        &[
            "the pinned install of server `everything` was changed",
            "`@modelcontextprotocol/server-everything 2026.8.31`",
        ],
    );
    remove_tree(&dir);

    // A changed integrity in the lock: `npm ci` refuses the tarball.
    let mut lock = p.w.lock_json();
    rewrite_artifacts(&mut lock, "everything", |a| {
        for pkg in a["packages"].as_array_mut().unwrap() {
            if pkg["name"] == "@modelcontextprotocol/server-everything" {
                pkg["hash"] = json!(format!("sha512-{}==", "A".repeat(86)));
            }
        }
    });
    p.w.write_lock(serde_json::to_vec_pretty(&lock).unwrap());
    let r = p.run(&["verify"]);
    assert_ne!(r.code, 0, "{r:#?}");
    printed(
        &r,
        &[
            "cannot make the pinned install of server `everything`",
            "EINTEGRITY",
        ],
    );
}

fn which_node() -> Option<PathBuf> {
    std::env::split_paths(&support::child_path())
        .map(|d| d.join("node"))
        .find(|p| p.is_file())
}

/// The package with an install script that the local registry serves: its server offers the
/// tool `built` once its install script ran, `unbuilt` before.
const SCRIPTED: &str = "mcpsum-script-fixture";

const SCRIPTED_SERVER: &str = r#"#!/usr/bin/env node
const fs = require("fs");
const path = require("path");
const built = fs.existsSync(path.join(__dirname, "built.txt"));
const tool = built ? "built" : "unbuilt";
let buf = "";
process.stdin.on("data", (d) => {
  buf += d;
  let i;
  while ((i = buf.indexOf("\n")) >= 0) {
    const line = buf.slice(0, i);
    buf = buf.slice(i + 1);
    if (!line.trim()) continue;
    const m = JSON.parse(line);
    if (m.id === undefined) continue;
    let result;
    if (m.method === "initialize") {
      result = { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} },
                 serverInfo: { name: "script-fixture", version: "1.0.0" } };
    } else if (m.method === "tools/list") {
      result = { tools: [{ name: tool, description: "whether the install script ran",
                           inputSchema: { type: "object" } }] };
    } else if (m.method === "ping") {
      result = {};
    }
    const out = result === undefined
      ? { jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "no such method" } }
      : { jsonrpc: "2.0", id: m.id, result };
    process.stdout.write(JSON.stringify(out) + "\n");
  }
});
process.stdin.on("end", () => process.exit(0));
"#;

fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A package a loopback registry serves: its `package.json` (name and version in it) and files.
struct Served {
    manifest: Value,
    files: Vec<(&'static str, &'static str)>,
}

/// A registry on loopback serving `packages` (packuments and tarballs; each name's `latest` its
/// last version given), for as long as the test runs: its URL and each tarball's integrity by
/// `name@version`.
fn local_registry(dir: &Path, packages: &[Served]) -> (String, BTreeMap<String, String>) {
    use sha2::Digest as _;
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let mut packuments: BTreeMap<String, Value> = BTreeMap::new();
    let mut tarballs: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut integrities = BTreeMap::new();
    for (i, served) in packages.iter().enumerate() {
        let name = served.manifest["name"].as_str().unwrap().to_owned();
        let version = served.manifest["version"].as_str().unwrap().to_owned();
        let root = dir.join(i.to_string());
        let pkg = root.join("package");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("package.json"), served.manifest.to_string()).unwrap();
        for (file, text) in &served.files {
            std::fs::write(pkg.join(file), text).unwrap();
        }
        let tgz = root.join("pkg.tgz");
        assert!(
            Command::new("tar")
                .arg("czf")
                .arg(&tgz)
                .arg("-C")
                .arg(&root)
                .arg("package")
                .status()
                .unwrap()
                .success()
        );
        let tarball = std::fs::read(&tgz).unwrap();
        let integrity = format!("sha512-{}", base64(&sha2::Sha512::digest(&tarball)));
        let file = format!("{name}-{version}.tgz");
        let mut v = served.manifest.clone();
        if v["scripts"]["install"].is_string() {
            v["hasInstallScript"] = json!(true);
        }
        v["dist"] = json!({"tarball": format!("{url}{name}/-/{file}"), "integrity": integrity});
        let doc = packuments
            .entry(name.clone())
            .or_insert_with(|| json!({"name": name, "versions": {}}));
        doc["versions"][&version] = v;
        doc["dist-tags"] = json!({"latest": version});
        integrities.insert(format!("{name}@{version}"), integrity);
        tarballs.insert(file, tarball);
    }
    let packuments: BTreeMap<String, String> = packuments
        .into_iter()
        .map(|(k, v)| (format!("/{k}"), v.to_string()))
        .collect();
    let served = std::sync::Arc::new((packuments, tarballs));
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let served = served.clone();
            std::thread::spawn(move || {
                let mut conn = conn;
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&req)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_owned();
                let target = line.split(' ').nth(1).unwrap_or("");
                let tarball = target.rsplit('/').next().and_then(|f| served.1.get(f));
                let (status, kind, body) = if let Some(doc) = served.0.get(target) {
                    ("200 OK", "application/json", doc.clone().into_bytes())
                } else if let Some(t) = tarball.filter(|_| target.ends_with(".tgz")) {
                    ("200 OK", "application/octet-stream", t.clone())
                } else {
                    ("404 Not Found", "application/json", b"{}".to_vec())
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(head.as_bytes());
                let _ = conn.write_all(&body);
            });
        }
    });
    (url, integrities)
}

/// A registry on loopback serving [`SCRIPTED`] 1.0.0, for as long as the test runs: its URL.
fn scripted_registry(dir: &Path) -> String {
    let manifest = json!({
        "name": SCRIPTED, "version": "1.0.0",
        "bin": {SCRIPTED: "server.js"},
        "scripts": {"install": "node install.js"},
    });
    let install = "require('fs').writeFileSync(require('path').join(__dirname, 'built.txt'), 'built by the install script\\n');\n";
    let served = Served {
        manifest,
        files: vec![("server.js", SCRIPTED_SERVER), ("install.js", install)],
    };
    local_registry(dir, &[served]).0
}

#[test]
fn an_npm_install_script_runs_only_when_allowed_and_the_lock_records_it() {
    let Some(p) = Pin::new() else { return };
    if which_node().is_none() {
        assert!(!support::real_servers_required(), "no `node` on PATH");
        return eprintln!("skipping: no `node` on PATH");
    }
    let registry = scripted_registry(&p.w.path().join("registry"));
    let run = |extra: &[&str], command: bool| {
        let mut args = vec!["lock", "--name", "scripted", "--era", "legacy"];
        args.extend(extra);
        let spec = format!("{SCRIPTED}@1.0.0");
        if command {
            args.extend(["--", "npx", "-y", &spec]);
        }
        Run::from_output(
            p.cmd()
                .args(&args)
                .env("npm_config_registry", &registry)
                .output()
                .unwrap(),
        )
    };
    // Refused without the opt-in, saying how to give it.
    let r = run(&[], true);
    assert_ne!(r.code, 0, "{r:#?}");
    printed(
        &r,
        &[
            &format!("`{SCRIPTED} 1.0.0` has an install script"),
            &format!("--allow-install-scripts {SCRIPTED}"),
        ],
    );
    assert!(
        !p.w.path().join("mcp.lock").exists() || p.w.lock_json()["servers"]["scripted"].is_null()
    );

    // Allowed: recorded in the entry, the script ran when the install was made. A name that
    // allows nothing is said to.
    run(
        &[
            "--allow-install-scripts",
            SCRIPTED,
            "--allow-install-scripts",
            "no-such-package",
        ],
        true,
    )
    .code(0)
    .stderr_has(&["`--allow-install-scripts no-such-package` allows nothing"]);
    let lock = p.w.lock_json();
    let e = &lock["servers"]["scripted"];
    let pkg = &e["artifacts"]["packages"][0];
    assert_eq!(pkg["name"], SCRIPTED);
    assert_eq!(pkg["installScript"], true, "{e}");
    assert!(
        e["tools"]["built"].is_object() || e.to_string().contains("\"built\""),
        "{e}"
    );
    assert!(!e.to_string().contains("unbuilt"), "{e}");
    let installs = p.cache().join("mcpsum/installs");
    let dir = std::fs::read_dir(&installs)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .unwrap();
    assert!(
        dir.join("node_modules")
            .join(SCRIPTED)
            .join("built.txt")
            .is_file()
    );
    p.run(&["show", "--name", "scripted"])
        .code(0)
        .stdout_has(&[&format!("{SCRIPTED} 1.0.0"), "(install script allowed)"]);

    // A re-lock keeps the opt-in: the same bytes.
    let before = p.w.lock_bytes();
    run(&[], false).code(0);
    assert_eq!(p.w.lock_bytes(), before);
    Run::from_output(
        p.cmd()
            .args(["verify"])
            .env("npm_config_registry", &registry)
            .output()
            .unwrap(),
    )
    .code(0);
}

#[test]
fn a_relock_whose_resolution_differs_from_the_installed_closure_starts_the_new_one() {
    let Some(p) = Pin::new() else { return };
    p.lock(&[]).code(0);
    let before = p.w.lock_bytes();
    // A previous closure without `pydantic`, installed: a server started from it dies at import.
    let mut edited = p.w.lock_json();
    rewrite_artifacts(&mut edited, "time", |a| {
        a["packages"]
            .as_array_mut()
            .unwrap()
            .retain(|p| p["name"] != "pydantic");
    });
    p.w.write_lock(serde_json::to_vec_pretty(&edited).unwrap());
    let r = p.run(&["verify"]);
    assert_ne!(r.code, 0, "{r:#?}");
    let installs = p.cache().join("mcpsum/installs");
    let made = std::fs::read_dir(&installs)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .count();
    assert_eq!(made, 2, "the edited closure was installed");
    // The re-lock starts that install while it resolves, then the resolved one: it locks.
    p.run(&["lock", "--name", "time"])
        .code(0)
        .stderr_has(&["+ pydantic ", "surface unchanged since the previous lock"]);
    assert_eq!(p.w.lock_bytes(), before);
}

/// What `uv pip compile - --no-header --quiet ARGS` prints for the requirements `input`, run
/// independently of mcpsum with the test's uv cache.
fn uv_compile(p: &Pin, args: &[&str], input: &str) -> String {
    let out = Command::new(p.bin.join("uv"))
        .args(["pip", "compile", "-", "--no-header", "--quiet"])
        .args(args)
        .env("UV_CACHE_DIR", p.uv_cache())
        .envs(
            ["SSL_CERT_FILE", "SSL_CERT_DIR"]
                .into_iter()
                .filter_map(|v| Some((v, std::env::var_os(v)?))),
        )
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(input.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success(), "uv pip compile {args:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The release of `package` just before `newer` that `SPEC`'s closure can take, and the sha256
/// of its one wheel: `uv pip compile` with `package<newer`, independently.
fn older_release(p: &Pin, python: &str, package: &str, newer: &str) -> (String, String) {
    let text = uv_compile(
        p,
        &["--format", "pylock.toml", "--python", python],
        &format!("{SPEC}\n{package}<{newer}\n"),
    );
    let block = text
        .split("[[packages]]")
        .find(|b| b.contains(&format!("name = \"{package}\"\n")))
        .unwrap_or_else(|| panic!("no {package} in\n{text}"));
    let version = block
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .unwrap()
        .trim_end_matches('"')
        .to_owned();
    let wheels = block.split("wheels = [").nth(1).unwrap();
    let hashes: Vec<&str> = wheels
        .split("sha256 = \"")
        .skip(1)
        .map(|h| &h[..64])
        .collect();
    assert_eq!(
        hashes.len(),
        1,
        "{package} {version} has one wheel: {block}"
    );
    (version, format!("sha256:{}", hashes[0]))
}

#[test]
fn a_uvx_relock_keeps_the_pinned_versions_and_upgrade_takes_new_releases() {
    let Some(p) = Pin::new() else { return };
    p.lock(&[]).code(0);
    let newest = p.w.lock_bytes();
    let lock = p.w.lock_json();
    let a = &lock["servers"]["time"]["artifacts"];
    let python = a["python"].as_str().unwrap().to_owned();
    let pkg = "idna";
    let current = a["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == pkg)
        .and_then(|p| p["version"].as_str())
        .unwrap_or_else(|| panic!("no {pkg} in {a}"))
        .to_owned();
    // A real older release of a dependency, pinned with its real hash: still what the
    // requirements allow.
    let (older, hash) = older_release(&p, &python, pkg, &current);
    let mut edited = lock.clone();
    rewrite_artifacts(&mut edited, "time", |a| {
        for p in a["packages"].as_array_mut().unwrap() {
            if p["name"] == pkg {
                p["version"] = json!(older);
                p["hash"] = json!(hash);
            }
        }
    });
    let mut pinned = serde_json::to_vec_pretty(&edited).unwrap();
    pinned.push(b'\n');
    p.w.write_lock(pinned.clone());

    // A re-lock keeps it, as a lockfile tool keeps its lock.
    p.run(&["lock", "--name", "time"])
        .code(0)
        .stderr_has(&["  unchanged since the previous lock"]);
    assert_eq!(
        String::from_utf8(p.w.lock_bytes()).unwrap(),
        String::from_utf8(pinned).unwrap(),
        "the older pin is kept"
    );

    // `--upgrade` takes the newest release, shown as a lockfile diff reads.
    p.run(&["lock", "--name", "time", "--upgrade"])
        .code(0)
        .stderr_has(&[
            "code changes against the previous lock:",
            &format!("~ {pkg} {older} → {current}"),
            "surface unchanged since the previous lock",
        ]);
    assert_eq!(
        String::from_utf8(p.w.lock_bytes()).unwrap(),
        String::from_utf8(newest).unwrap()
    );
}

/// The server the relock registry serves, and the dependency it needs (`^1.0.0`), served at
/// 1.0.0 and 1.1.0.
const RELOCK_TOP: &str = "mcpsum-relock-fixture";
const RELOCK_DEP: &str = "mcpsum-relock-dep";

#[test]
fn an_npx_relock_keeps_the_pinned_versions_and_upgrade_takes_new_releases() {
    let Some(p) = Pin::new() else { return };
    if which_node().is_none() {
        assert!(!support::real_servers_required(), "no `node` on PATH");
        return eprintln!("skipping: no `node` on PATH");
    }
    let dep = |version: &str| Served {
        manifest: json!({"name": RELOCK_DEP, "version": version, "main": "index.js"}),
        files: vec![("index.js", "module.exports = {};\n")],
    };
    let top = Served {
        manifest: json!({
            "name": RELOCK_TOP, "version": "1.0.0",
            "bin": {RELOCK_TOP: "server.js"},
            "dependencies": {RELOCK_DEP: "^1.0.0"},
        }),
        files: vec![("server.js", SCRIPTED_SERVER)],
    };
    let (registry, integrity) = local_registry(
        &p.w.path().join("registry"),
        &[dep("1.0.0"), dep("1.1.0"), top],
    );
    let run = |extra: &[&str]| {
        let mut args = vec!["lock", "--name", "fixture"];
        args.extend(extra);
        Run::from_output(
            p.cmd()
                .args(&args)
                .env("npm_config_registry", &registry)
                .output()
                .unwrap(),
        )
    };
    let spec = format!("{RELOCK_TOP}@1.0.0");
    run(&["--era", "legacy", "--", "npx", "-y", &spec])
        .code(0)
        .stderr_has(&["code pinned: 2 packages"]);
    let newest = p.w.lock_bytes();
    let version_of = |lock: &Value| {
        lock["servers"]["fixture"]["artifacts"]["packages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == RELOCK_DEP)
            .map(|p| p["version"].clone())
    };
    assert_eq!(version_of(&p.w.lock_json()), Some(json!("1.1.0")));

    // The older release, pinned with its integrity: the range allows it.
    let mut edited = p.w.lock_json();
    rewrite_artifacts(&mut edited, "fixture", |a| {
        for p in a["packages"].as_array_mut().unwrap() {
            if p["name"] == RELOCK_DEP {
                p["version"] = json!("1.0.0");
                p["hash"] = json!(integrity[&format!("{RELOCK_DEP}@1.0.0")]);
            }
        }
    });
    let mut pinned = serde_json::to_vec_pretty(&edited).unwrap();
    pinned.push(b'\n');
    p.w.write_lock(pinned.clone());

    // A re-lock keeps it, as `npm install` keeps a `package-lock.json`.
    run(&[])
        .code(0)
        .stderr_has(&["  unchanged since the previous lock"]);
    assert_eq!(version_of(&p.w.lock_json()), Some(json!("1.0.0")));
    assert_eq!(
        String::from_utf8(p.w.lock_bytes()).unwrap(),
        String::from_utf8(pinned.clone()).unwrap(),
        "the older pin is kept"
    );

    // Unsigned under an allowed-signers file, the entry's closure keeps nothing: the command
    // given is resolved as a new server's.
    let key = p.w.path().join("key");
    assert!(
        Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&key)
            .status()
            .unwrap()
            .success()
    );
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let anchor = p.w.path().join("allowed_signers");
    std::fs::write(&anchor, format!("alice {public}")).unwrap();
    let anchor = anchor.display().to_string();
    let r = Run::from_output(
        p.cmd()
            .args(["--allowed-signers", &anchor, "lock", "--name", "fixture"])
            .args(["--", "npx", "-y", &spec])
            .env("npm_config_registry", &registry)
            .output()
            .unwrap(),
    );
    r.code(0)
        .stderr_has(&[&format!("~ {RELOCK_DEP} 1.0.0 → 1.1.0")]);
    assert_eq!(version_of(&p.w.lock_json()), Some(json!("1.1.0")));
    p.w.write_lock(&pinned);

    // `--upgrade` resolves afresh: the newest release the range allows.
    run(&["--upgrade"]).code(0).stderr_has(&[
        "code changes against the previous lock:",
        &format!("~ {RELOCK_DEP} 1.0.0 → 1.1.0"),
        "surface unchanged since the previous lock",
    ]);
    assert_eq!(
        String::from_utf8(p.w.lock_bytes()).unwrap(),
        String::from_utf8(newest).unwrap()
    );
}
