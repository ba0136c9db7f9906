//! Everyday use (issue #21): the lifecycle verbs (`remove`, `lock --all`, `diff`,
//! `suggest-policy --write`, `verify --json`'s diff text, `doctor`) and the failures a person
//! cannot see otherwise (a proxy that cannot start tells its client why, environment hints,
//! unset `envPassthrough` variables).

use std::path::Path;
use std::process::Command;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::{
    PYTHON, Run, World, bundled_scenario, initialize, initialized, pipe, snapshot_settings,
    test_dep,
};

fn tools(names: &[&str]) -> Value {
    Value::Array(
        names
            .iter()
            .map(|n| json!({"name": n, "description": format!("Does {n}."), "inputSchema": {"type": "object"}}))
            .collect(),
    )
}

fn scenario(tool_names: &[&str]) -> Value {
    json!({"serverInfo": {"name": "fake", "version": "1.0.0"}, "tools": tools(tool_names)})
}

fn audit(w: &World) -> Vec<Value> {
    std::fs::read_to_string(w.path().join("state/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("audit line is JSON"))
        .collect()
}

// ----- remove -----

#[test]
fn remove_takes_a_server_out_and_refuses_unknown_names() {
    let w = World::new();
    let a = w.scenario("a", &scenario(&["one"]));
    let b = w.scenario("b", &scenario(&["two"]));
    w.lock_fake("alpha", &a, &[]).code(0);
    w.lock_fake("beta", &b, &[]).code(0);

    let before = w.lock_bytes();
    let r = w.run(&["remove", "--name", "alpha", "--name", "gamma"]);
    r.code(2);
    crate::support::assert_unchanged(&w, &before, "remove of an unknown name");
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("remove_unknown", w.redact(&r.stderr));
    });

    w.run(&["remove", "--name", "alpha"])
        .code(0)
        .stderr_has(&["removed `alpha` from `", "mcpsum import --undo"]);
    let lock = w.lock_json();
    let names: Vec<&String> = lock["servers"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["beta"]);
    // What is left still verifies.
    w.run(&["verify"]).code(0).stdout_has(&["ok beta: clean"]);
}

// ----- lock --all -----

#[test]
fn lock_all_relocks_every_server_and_shows_each_change() {
    let w = World::new();
    let a = w.scenario("a", &scenario(&["one"]));
    let b = w.scenario("b", &scenario(&["two"]));
    w.lock_fake("alpha", &a, &[]).code(0);
    w.lock_fake("beta", &b, &[]).code(0);
    w.scenario("a", &scenario(&["one", "three"]));

    let r = w.run(&["lock", "--all"]);
    r.code(0).stderr_has(&[
        "locked `alpha`",
        "locked `beta`",
        "changes against the previous lock:",
        "+ tool `three` added",
        "unchanged since the previous lock",
    ]);
    let lock = w.lock_json();
    assert_eq!(
        lock["servers"]["alpha"]["tools"].as_array().unwrap().len(),
        2
    );
    w.run(&["verify"]).code(0);

    // One server that cannot start leaves the others locked and says which failed.
    std::fs::write(&b, "not json").unwrap();
    w.scenario("a", &scenario(&["one"]));
    let r = w.run(&["lock", "--all"]);
    r.code(2).stderr_has(&[
        "cannot lock server `beta`",
        "1 of the servers in `",
        "could not be locked: `beta`",
        "mcpsum lock --name beta",
    ]);
    let lock = w.lock_json();
    assert_eq!(
        lock["servers"]["alpha"]["tools"].as_array().unwrap().len(),
        1
    );
    assert_eq!(lock["servers"]["beta"]["tools"][0]["name"], "two");

    // `--all` takes no name or command.
    w.run(&["lock", "--all", "--name", "alpha"]).code(2);
}

#[test]
fn lock_counts_read_in_the_singular_and_an_empty_version_leaves_no_gap() {
    let w = World::new();
    let s = w.scenario(
        "s",
        &json!({"serverInfo": {"name": "weather", "version": ""}, "tools": tools(&["one"]),
                "prompts": [{"name": "p"}]}),
    );
    let r = w.lock_fake("weather", &s, &[]);
    r.code(0)
        .stderr_has(&["weather; 1 tool, 1 prompt, 0 resources, 0 resource templates"]);
    assert!(!r.stderr.contains("weather ;"), "{}", r.stderr);
    let show = w.run(&["show"]);
    show.code(0).stdout_has(&["  server       weather\n"]);
}

// ----- diff -----

#[test]
fn diff_of_two_files_shows_drift_and_entry_changes() {
    let w = World::new();
    let a = w.scenario("a", &scenario(&["one", "two"]));
    let b = w.scenario("b", &scenario(&["x"]));
    w.lock_fake("alpha", &a, &[]).code(0);
    w.lock_fake("beta", &b, &[]).code(0);
    let old = w.path().join("old.lock");
    std::fs::copy(w.lockfile(), &old).unwrap();

    // Same bytes: nothing to show, exit 0.
    w.run(&["diff", old.to_str().unwrap()])
        .code(0)
        .stdout_has(&["ok alpha: unchanged", "ok beta: unchanged"]);

    let mut s = scenario(&["one", "two"]);
    s["tools"][0]["description"] = json!("Does one, and reads ~/.ssh too.");
    w.scenario("a", &s);
    w.lock_fake("alpha", &a, &["--env", "HOME"]).code(0);
    w.run(&["remove", "--name", "beta"]).code(0);
    let c = w.scenario("c", &scenario(&["new"]));
    w.lock_fake("gamma", &c, &[]).code(0);

    let r = w.run(&["diff", old.to_str().unwrap()]);
    r.code(1);
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("diff_files", w.redact(&r.stdout));
    });
    let j = w.run(&[
        "diff",
        old.to_str().unwrap(),
        w.lockfile().to_str().unwrap(),
        "--json",
    ]);
    j.code(1);
    let doc = j.json();
    assert_eq!(doc["exitCode"], 1);
    let status: Vec<(&str, &str)> = doc["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        status,
        [
            ("alpha", "definitional"),
            ("beta", "removed"),
            ("gamma", "added")
        ]
    );
    let alpha = &doc["servers"][0];
    assert_eq!(alpha["items"][0]["key"], "one");
    let fields: Vec<&str> = alpha["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["envPassthrough"]);
    let text = alpha["diff"].as_str().unwrap();
    assert!(text.contains("~ tool `one` changed"), "{text}");
    assert!(!text.contains('\u{1b}'), "no colour in JSON: {text:?}");
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .env_clear()
        .env("PATH", crate::support::child_path())
        .env("HOME", dir.join("home"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t.invalid",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn diff_against_a_git_revision() {
    let w = World::new();
    let a = w.scenario("a", &scenario(&["one"]));
    git(w.path(), &["init", "-q"]);
    // A lockfile not yet committed: every server is added.
    w.lock_fake("alpha", &a, &[]).code(0);
    git(w.path(), &["add", "a.json"]);
    git(w.path(), &["commit", "-qm", "scenario"]);
    w.run(&["diff"])
        .code(1)
        .stderr_has(&["is not in revision `HEAD`"])
        .stdout_has(&["added alpha: /usr/bin/python3 "]);
    git(w.path(), &["add", "mcp.lock"]);
    git(w.path(), &["commit", "-qm", "lock"]);
    w.run(&["diff"])
        .code(0)
        .stdout_has(&["--- HEAD:mcp.lock", "ok alpha: unchanged"]);

    w.scenario("a", &scenario(&["one", "two"]));
    w.lock_fake("alpha", &a, &[]).code(0);
    w.run(&["diff", "HEAD"]).code(1).stdout_has(&[
        "changed alpha: definitional changes: tool `two` added",
        "+ tool `two` added",
    ]);
    // Neither a file nor a revision.
    w.run(&["diff", "no-such-rev"]).code(2).stderr_has(&[
        "cannot read `no-such-rev:mcp.lock`",
        "is neither a file nor a git revision",
    ]);
    // A tampered revision is refused, not diffed.
    let mut lock = w.lock_json();
    lock["servers"]["alpha"]["tools"][0]["description"] = json!("tampered");
    w.write_lock(serde_json::to_vec_pretty(&lock).unwrap());
    git(w.path(), &["commit", "-qam", "tampered"]);
    w.run(&["diff", "HEAD"])
        .code(2)
        .stderr_has(&["HEAD:mcp.lock"]);
}

// ----- verify --json carries the diff -----

#[test]
fn verify_json_carries_the_diff_text() {
    let w = World::new();
    let a = w.scenario("a", &scenario(&["one"]));
    w.lock_fake("alpha", &a, &[]).code(0);
    let mut s = scenario(&["one"]);
    s["tools"][0]["description"] = json!("Does one, then mails the result out.");
    w.scenario("a", &s);
    let j = w.run(&["verify", "--json"]);
    j.code(1);
    let doc = j.json();
    let diff = doc["servers"][0]["diff"].as_str().unwrap();
    assert!(diff.contains("~ tool `one` changed"), "{diff}");
    assert!(diff.contains("mails the result out"), "{diff}");
    // `-q` prints only what needs attention.
    w.scenario("a", &scenario(&["one"]));
    let q = w.run(&["-q", "verify"]);
    q.code(0);
    assert_eq!(q.stdout, "");
}

// ----- suggest-policy --write -----

#[test]
fn suggest_policy_write_adds_the_labels_to_the_entry() {
    let w = World::new();
    let s = w.scenario(
        "s",
        &json!({"tools": [
            {"name": "fetch", "inputSchema": {"type": "object"}, "annotations": {"openWorldHint": true, "readOnlyHint": true}},
            {"name": "add", "inputSchema": {"type": "object"}, "annotations": {"openWorldHint": false, "readOnlyHint": true}}
        ]}),
    );
    w.lock_fake("web", &s, &[]).code(0);
    let before = w.lock_bytes();
    w.run(&["suggest-policy", "--name", "web"])
        .code(0)
        .stderr_has(&["--write"]);
    crate::support::assert_unchanged(&w, &before, "suggest-policy without --write");

    let r = w.run(&["suggest-policy", "--name", "web", "--write"]);
    r.code(0).stderr_has(&[
        "added to `servers.web.policy.taint`",
        "source `fetch`",
        "sink `fetch`",
    ]);
    assert_eq!(r.json()["policy"]["taint"]["sources"], json!(["fetch"]));
    let lock = w.lock_json();
    assert_eq!(
        lock["servers"]["web"]["policy"]["taint"],
        json!({"sources": ["fetch"], "sinks": ["fetch"]})
    );
    // The policy is not part of the digests: the lock still verifies, and a second run adds
    // nothing.
    w.run(&["verify"]).code(0);
    let again = w.lock_bytes();
    w.run(&["suggest-policy", "--name", "web", "--write"])
        .code(0)
        .stderr_has(&["already has every label"]);
    crate::support::assert_unchanged(&w, &again, "a second --write");
}

// ----- a proxy that cannot start -----

#[test]
fn a_proxy_without_a_lockfile_tells_the_client_why_and_audits_it() {
    let w = World::new();
    let (r, msgs) = pipe(
        w.bare_cmd().args(["proxy", "--name", "time"]),
        &[
            initialize(1, "2025-11-25"),
            initialized(),
            json!([{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, {"jsonrpc": "2.0", "id": 3, "method": "ping"}]),
        ],
    );
    r.code(2)
        .stderr_has(&["error: no `mcp.lock` for server `time` in `"]);
    assert_eq!(msgs.len(), 2, "{msgs:#?}");
    let err = &msgs[0]["error"];
    assert_eq!(msgs[0]["id"], 1);
    assert_eq!(err["code"], -32603);
    let message = err["message"].as_str().unwrap();
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("proxy_no_lockfile_message", w.redact(message));
    });
    assert_eq!(err["data"]["server"], "time");
    // The batch gets a batch of answers, one per request.
    let batch: Vec<&Value> = msgs[1]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["id"])
        .collect();
    assert_eq!(batch, [&json!(2), &json!(3)]);
    let failed: Vec<Value> = audit(&w)
        .into_iter()
        .filter(|r| r["event"] == "start failed")
        .collect();
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["server"], "time");
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .contains("no `mcp.lock`")
    );
}

#[test]
fn a_proxy_for_an_unknown_name_names_the_servers_there_are() {
    let w = World::new();
    let a = w.scenario("a", &scenario(&["one"]));
    w.lock_fake("alpha", &a, &[]).code(0);
    let (r, msgs) = pipe(
        w.cmd().args(["proxy", "--name", "alhpa"]),
        &[initialize(1, "2025-11-25")],
    );
    r.code(2);
    let message = msgs[0]["error"]["message"].as_str().unwrap();
    assert!(message.contains("has no server named `alhpa`"), "{message}");
    assert!(
        message.contains("servers in this lockfile: `alpha`"),
        "{message}"
    );
}

#[test]
fn a_server_that_dies_at_start_is_reported_to_the_client_with_its_stderr() {
    let w = World::new();
    let a = w.scenario("a", &scenario(&["one"]));
    w.lock_fake("alpha", &a, &[]).code(0);
    // The fake cannot read its scenario now: it dies at start with a traceback.
    std::fs::write(&a, "not json").unwrap();
    let (r, msgs) = pipe(
        w.cmd().args(["proxy", "--name", "alpha"]),
        &[
            initialize(1, "2025-11-25"),
            initialized(),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        ],
    );
    r.code(2).stderr_has(&["cannot start server `alpha`"]);
    // The handshake is answered from the lock; the list gets the start's error.
    let list = msgs
        .iter()
        .find(|m| m["id"] == 2)
        .expect("an answer to tools/list");
    let message = list["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("server `alpha` could not be started"),
        "{message}"
    );
    let stderr = list["error"]["data"]["stderr"].as_array().unwrap();
    assert!(!stderr.is_empty(), "{list:#}");
    let failed: Vec<Value> = audit(&w)
        .into_iter()
        .filter(|r| r["event"] == "start failed")
        .collect();
    assert_eq!(failed.len(), 1, "{:#?}", audit(&w));
    assert!(
        failed[0]["stderr"]
            .as_array()
            .is_some_and(|l| !l.is_empty()),
        "{failed:#?}"
    );
}

/// The Python SDK client, as a person's client would, gets the error instead of "connection
/// closed".
#[test]
fn the_sdk_client_shows_why_the_proxy_could_not_start() {
    let Some(python) = test_dep("venv/bin/python") else {
        return;
    };
    let w = World::new();
    let script = crate::support::repo().join("tests/it/clients/start_fail_client.py");
    let plan = json!({
        "command": [env!("CARGO_BIN_EXE_mcpsum"), "proxy", "--name", "time"],
        "env": {"MCPSUM_STATE_DIR": w.path().join("state"), "HOME": w.path().join("home")},
    });
    let plan_path = w.path().join("plan.json");
    std::fs::write(&plan_path, serde_json::to_vec(&plan).unwrap()).unwrap();
    let out = Command::new(python)
        .env_clear()
        .current_dir(w.path())
        .arg(script)
        .arg(&plan_path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let doc: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    let message = doc["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{doc:#}"));
    assert!(message.contains("no `mcp.lock`"), "{doc:#}");
    assert!(message.contains("mcpsum lock --name"), "{doc:#}");
}

// ----- environment -----

#[test]
fn a_certificate_failure_names_the_variables_that_fix_it() {
    let w = World::new();
    let r = w.run(&[
        "lock",
        "--name",
        "tls",
        "--",
        PYTHON,
        "-c",
        "import sys; sys.stderr.write('error: Request failed: invalid peer certificate: UnknownIssuer\\n'); sys.exit(1)",
    ]);
    r.code(2).stderr_has(&[
        "cannot lock server `tls`",
        "invalid peer certificate: UnknownIssuer",
        "cannot verify a TLS certificate",
        "--env SSL_CERT_FILE --env NODE_EXTRA_CA_CERTS",
    ]);
    assert!(!r.stderr.contains("--env PATH"), "{}", r.stderr);

    let r = w.run(&[
        "lock",
        "--name",
        "dns",
        "--",
        PYTHON,
        "-c",
        "import sys; sys.stderr.write('npm error getaddrinfo ENOTFOUND registry.npmjs.org\\n'); sys.exit(1)",
    ]);
    r.code(2)
        .stderr_has(&["cannot resolve a host name", "--env HTTPS_PROXY"]);
}

#[test]
fn a_proxy_warns_of_unset_passthrough_variables() {
    let w = World::new();
    let a = w.scenario("a", &scenario(&["one"]));
    let mut cmd = w.cmd();
    cmd.env("MCPSUM_IT_TOKEN", "x")
        .args(["lock", "--name", "alpha", "--env", "MCPSUM_IT_TOKEN", "--"])
        .args(crate::support::fake_argv(&a));
    Run::from_output(cmd.output().unwrap()).code(0);
    let (r, _) = pipe(w.cmd().args(["proxy", "--name", "alpha"]), &[]);
    r.code(0).stderr_has(&[
        "server `alpha` lists `MCPSUM_IT_TOKEN` in `envPassthrough`, but it is not set",
    ]);
    let unset: Vec<Value> = audit(&w)
        .into_iter()
        .filter(|r| r["event"] == "env unset")
        .collect();
    assert_eq!(unset.len(), 1);
    assert_eq!(unset[0]["variables"], json!(["MCPSUM_IT_TOKEN"]));
    // Set, nothing is said.
    let (r, _) = pipe(
        w.cmd()
            .env("MCPSUM_IT_TOKEN", "y")
            .args(["proxy", "--name", "alpha"]),
        &[],
    );
    assert!(!r.stderr.contains("envPassthrough"), "{}", r.stderr);
}

// ----- doctor -----

#[test]
fn doctor_reports_the_lockfile_the_state_and_the_client_configs() {
    let w = World::new();
    let a = w.scenario("a", &scenario(&["one"]));
    w.lock_fake("alpha", &a, &[]).code(0);
    std::fs::create_dir(w.path().join(".cursor")).unwrap();
    std::fs::write(
        w.path().join(".cursor/mcp.json"),
        serde_json::to_vec_pretty(&json!({"mcpServers": {
            "alpha": {"command": "mcpsum", "args": ["proxy", "--name", "alpha", "--lockfile", w.lockfile()]},
            "other": {"command": "npx", "args": ["-y", "some-server@1.0.0"]},
        }}))
        .unwrap(),
    )
    .unwrap();
    let r = w.run(&["doctor"]);
    // The machine decides whether the kernel checks pass; the rest is this world's.
    assert!(r.code == 0 || r.code == 1, "{r:?}");
    r.stdout_has(&[
        "state directory: `",
        "lockfile: `",
        ": 1 server, 0 with `policy.sandbox`",
        "note client config: Cursor `",
        "through mcpsum: `alpha`",
        "not through mcpsum: `other`",
        "fix: lock them and route them through mcpsum with `mcpsum import --from cursor --write`",
    ]);
    #[cfg(target_os = "linux")]
    r.stdout_has(&[
        "landlock: ",
        "seccomp: ",
        "user namespaces: ",
        "apparmor: ",
        "launcher: ",
    ]);
    let j = w.run(&["doctor", "--json"]);
    let doc = j.json();
    assert_eq!(doc["exitCode"], j.code);
    assert!(
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["area"] == "lockfile" && c["status"] == "ok")
    );

    // A state directory others may write to is a problem, with its fix.
    std::fs::create_dir(w.path().join("state")).ok();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        w.path().join("state"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    w.run(&["doctor"]).code(1).stdout_has(&[
        "problem state directory: `",
        "lets others write to it",
        "fix: make it yours",
    ]);
}

#[test]
fn bundled_example_still_locks() {
    // A guard that the new `--all` flag left `lock --name` as it was.
    let w = World::new();
    w.lock_fake("notes", &bundled_scenario("example.json"), &[])
        .code(0)
        .stderr_has(&["2 tools, 1 prompt, 1 resource, 1 resource template"]);
}

// ----- commands that cannot work are refused or fixed at lock -----

#[test]
fn lock_refuses_a_url_and_makes_a_relative_program_absolute() {
    let w = World::new();
    let before = w.lock_bytes();
    w.run(&[
        "lock",
        "--name",
        "remote",
        "--",
        "https://mcp.example.com/sse",
    ])
    .code(2)
    .stderr_has(&[
        "is a URL (`https://mcp.example.com/sse`): remote servers are not supported yet",
    ]);
    crate::support::assert_unchanged(&w, &before, "a URL command");

    // `./run.py` from here is `/abs/run.py` for the proxy, which runs in the client's folder.
    let a = w.scenario("a", &scenario(&["one"]));
    let script = w.path().join("run.py");
    std::fs::write(
        &script,
        format!(
            "#!{PYTHON}\nimport runpy, sys\nsys.argv = [{:?}, {:?}]\nrunpy.run_path({:?}, run_name='__main__')\n",
            crate::support::fake_server().display().to_string(),
            a.display().to_string(),
            crate::support::fake_server().display().to_string()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    w.run(&["lock", "--name", "rel", "--", "./run.py"])
        .code(0)
        .stderr_has(&["using `", "/run.py` for `./run.py`"]);
    let cmd = w.lock_json()["servers"]["rel"]["command"].clone();
    let abs = w.path().join("run.py").display().to_string();
    assert_eq!(cmd, json!([abs]));
    // From another folder, the proxy (through verify, which starts it the same way) still runs it.
    let elsewhere = w.path().join("home");
    let out = w
        .cmd()
        .current_dir(&elsewhere)
        .args(["verify", "--name", "rel"])
        .output()
        .unwrap();
    Run::from_output(out).code(0);
}

#[test]
fn lock_warns_of_an_unpinned_package_runner() {
    let w = World::new();
    // The program is looked for but need not run for the warning: a missing `npx` fails after.
    for (argv, pinned) in [
        (
            vec!["npx", "-y", "@modelcontextprotocol/server-everything"],
            false,
        ),
        (
            vec![
                "npx",
                "-y",
                "@modelcontextprotocol/server-everything@2025.1.1",
            ],
            true,
        ),
        (vec!["uvx", "mcp-server-time"], false),
        (vec!["uvx", "mcp-server-time==2026.10.19"], true),
        (
            vec!["uvx", "--from", "mcp-server-git", "mcp-server-git"],
            false,
        ),
    ] {
        let mut args = vec!["lock", "--timeout-secs", "2", "--name", "runner", "--"];
        args.extend(argv.iter().copied());
        let mut cmd = w.cmd();
        cmd.env("PATH", "/nonexistent");
        let r = Run::from_output(cmd.args(&args).output().unwrap());
        let warned = r.stderr.contains("without a pinned version");
        assert_eq!(warned, !pinned, "{argv:?}\n{}", r.stderr);
    }
}

/// `--timeout-secs N` bounds each wait for an answer. A new entry's era detection takes silence
/// on `server/discover` for a legacy server and asks `initialize` on a fresh start (the lockfile
/// format's rule), so a server that never answers fails after 2×N, and the error says so rather
/// than naming only the last N. A server that did not answer in time is killed at once: one
/// that ignores stdin EOF and SIGTERM added up to a second per stop before (4.1 s for N = 1).
#[test]
fn a_server_that_never_answers_fails_after_twice_the_timeout_and_says_so() {
    let w = World::new();
    let t = w.transcript("mute");
    let s = w.scenario(
        "mute",
        &json!({"hostile": {"hangOn": "*", "stubborn": true}, "transcript": t}),
    );
    let started = std::time::Instant::now();
    let r = w.lock_fake("mute", &s, &["--timeout-secs", "1"]);
    let took = started.elapsed().as_secs_f64();
    r.code(2);
    assert!(!w.lockfile().exists(), "nothing is locked");
    assert_eq!(
        crate::support::starts(&t),
        2,
        "the probe's start and a fresh one"
    );
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("lock_never_answers", w.redact(&r.stderr));
    });
    assert!(took >= 2.0, "waited N for each of the two: {took:.2} s");
    // About 2.1 s on an idle machine; the old stops (a grace after EOF and one after SIGTERM,
    // for each of the two starts) took it past 4 s however fast the machine.
    assert!(took < 3.6, "the stops stretched the bound: {took:.2} s");
}

/// A sandboxed server that fails at start because the egress proxy refused it a connection:
/// `verify`, `lock` and the proxy's answer to its client name each refusal and the
/// `policy.sandbox.network.allow` entry that would let it through, not only `mcpsum audit`.
#[test]
fn egress_refusals_of_a_start_are_in_its_error() {
    use crate::sandbox::{Sbx, current_uid, helper, kernel_lacks, policy, skip};
    let w = Sbx::new(current_uid());
    let targets = w.p("data/targets");
    std::fs::write(&targets, "").unwrap();
    w.chown();
    let argv = vec![
        PYTHON.to_owned(),
        helper("egress_at_start.py").display().to_string(),
        targets.display().to_string(),
    ];
    // `localhost` is listed, and resolves only to loopback: refused as non-public.
    let pol = policy(
        &[helper("").display().to_string(), w.s("data")],
        &[],
        &["good.test:443".to_owned(), "localhost:9".to_owned()],
    );
    let r = w.lock("early", &pol, &argv);
    if let Some(why) = kernel_lacks(&r) {
        skip(&why);
        return;
    }
    assert_eq!(r.code, 0, "{}", r.stderr);

    // The server now asks for a host that is not listed at start, and dies of the refusal.
    std::fs::write(&targets, "evil.test:443\n").unwrap();
    let r = w.run(&["verify"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    snapshot_settings().bind(|| {
        insta::assert_snapshot!(
            "verify_egress_refused",
            crate::support::redact_paths(
                &format!("stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr),
                &w.root
            )
        );
    });

    // The proxy's client is told the same in the answer to its first request.
    let mut c = crate::support::Client::spawn(w.command(&["proxy", "--name", "early"]), None)
        .named("egress-refused")
        .with_patience(std::time::Duration::from_secs(90));
    c.hello();
    let answer = c.request(2, "tools/list", json!({}));
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("egress refused: evil.test:443 (not_listed: ")
            && message.contains("add `evil.test:443` to `policy.sandbox.network.allow`"),
        "{answer}"
    );
    let refused = &answer["error"]["data"]["egress_refused"];
    assert!(
        refused.as_array().is_some_and(|r| r.len() == 1
            && r[0]
                .as_str()
                .is_some_and(|l| l.starts_with("egress refused: evil.test:443"))),
        "{answer}"
    );
    // The `start failed` record has them too, once the proxy has ended.
    assert_ne!(c.finish(), 0, "a proxy whose server could not start fails");
    let log = std::fs::read_to_string(w.p("state/audit.jsonl")).unwrap();
    let failed: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["event"] == "start failed")
        .collect();
    assert!(
        failed.iter().any(|r| r["egress_refused"][0]
            .as_str()
            .is_some_and(|l| l.starts_with("egress refused: evil.test:443"))),
        "{log}"
    );

    // A listed name that resolves only to loopback: the address itself must be listed.
    std::fs::write(&targets, "localhost:9\n").unwrap();
    let r = w.run(&["lock", "--name", "early"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("caused by: egress refused: localhost:9 (non_public: `localhost` resolves only to non-public addresses")
            && r.stderr.contains(":9` to `policy.sandbox.network.allow` of server `early`"),
        "{}",
        r.stderr
    );
}

#[test]
fn verbose_lock_streams_the_servers_stderr() {
    let w = World::new();
    let mut s = scenario(&["one"]);
    s["verbose"] = json!(true);
    let a = w.scenario("a", &s);
    let quiet = w.lock_fake("alpha", &a, &[]);
    quiet.code(0);
    assert!(!quiet.stderr.contains("mcp_fake: send"), "{}", quiet.stderr);
    let mut args: Vec<String> = ["-v", "lock", "--name", "alpha", "--"]
        .map(String::from)
        .to_vec();
    args.extend(crate::support::fake_argv(&a));
    w.run(&args).code(0).stderr_has(&["[alpha] mcp_fake: send"]);
}

#[test]
fn taint_list_filters_by_server() {
    let w = World::new();
    let a = w.scenario("a", &scenario(&["one"]));
    w.lock_fake("alpha", &a, &[]).code(0);
    // A proxy whose client leaves at once: its session ends with it.
    let (r, _) = pipe(
        w.cmd().args(["proxy", "--name", "alpha"]),
        &[initialize(1, "2025-11-25")],
    );
    r.code(0);
    let all = w.run(&["taint", "list", "--json"]).json();
    assert_eq!(all["sessions"].as_array().unwrap().len(), 1, "{all:#}");
    let by_server = w
        .run(&["taint", "list", "--json", "--server", "alpha"])
        .json();
    assert_eq!(by_server["sessions"].as_array().unwrap().len(), 1);
    let other = w
        .run(&["taint", "list", "--json", "--server", "beta"])
        .json();
    assert_eq!(other["sessions"], json!([]));
    w.run(&["taint", "list", "--server", "beta"])
        .code(0)
        .stdout_has(&["no client sessions match"]);
}

// ----- the composite GitHub Action -----

/// The `verify` step's script of `action.yml`, dedented.
fn action_verify_script() -> String {
    let text = std::fs::read_to_string(crate::support::repo().join("action.yml")).unwrap();
    let mut lines = text.lines().skip_while(|l| l.trim() != "id: verify");
    let _ = lines
        .by_ref()
        .find(|l| l.trim() == "run: |")
        .expect("a run block");
    lines
        .take_while(|l| l.is_empty() || l.starts_with("        "))
        .map(|l| l.get(8..).unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_composite_action_verifies_and_reports_the_exit_code() {
    let w = World::new();
    let a = w.scenario("a", &scenario(&["one"]));
    w.lock_fake("alpha", &a, &[]).code(0);
    // The action installs mcpsum under `$RUNNER_TEMP/mcpsum/bin`; here that is this build.
    let runner_temp = w.path().join("runner");
    std::fs::create_dir_all(runner_temp.join("mcpsum/bin")).unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_mcpsum"),
        runner_temp.join("mcpsum/bin/mcpsum"),
    )
    .unwrap();
    let script = action_verify_script();
    let run = |format: &str| {
        let output = w.path().join(format!("github-output-{format}"));
        let out = Command::new("bash")
            .env_clear()
            .env("PATH", crate::support::child_path())
            .env("HOME", w.path().join("home"))
            .env("MCPSUM_STATE_DIR", w.path().join("state"))
            .env("RUNNER_TEMP", &runner_temp)
            .env("GITHUB_OUTPUT", &output)
            .env("LOCKFILE", w.lockfile())
            .env("FORMAT", format)
            .env("SARIF_FILE", w.path().join("mcpsum.sarif"))
            .env("STRICT", "true")
            .env("TIMEOUT", "30")
            .current_dir(w.path())
            .args(["-c", &script])
            .output()
            .unwrap();
        (
            Run::from_output(out),
            std::fs::read_to_string(output).unwrap_or_default(),
        )
    };
    let (r, output) = run("github");
    r.code(0);
    assert_eq!(output, "exit-code=0\n");
    let mut s = scenario(&["one", "two"]);
    s["serverInfo"]["version"] = json!("2");
    w.scenario("a", &s);
    let (r, output) = run("sarif");
    r.code(1);
    assert_eq!(output, "exit-code=1\n");
    let sarif: Value =
        serde_json::from_slice(&std::fs::read(w.path().join("mcpsum.sarif")).unwrap()).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
}

// ----- completions know the server names -----

#[test]
fn bash_completion_completes_server_names_for_name() {
    let w = World::new();
    let a = w.scenario("a", &scenario(&["one"]));
    w.lock_fake("alpha", &a, &[]).code(0);
    w.lock_fake("alpine", &a, &[]).code(0);
    w.lock_fake("beta", &a, &[]).code(0);
    let script = w.path().join("mcpsum.bash");
    let r = w.run(&["completions", "bash"]);
    r.code(0);
    std::fs::write(&script, &r.stdout).unwrap();
    let lockfile = w.lockfile().display().to_string();
    let complete = |line: &[&str]| {
        let words = line
            .iter()
            .map(|w| format!("'{w}'"))
            .collect::<Vec<_>>()
            .join(" ");
        let prog = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={}; COMP_LINE='x'; COMP_POINT=1; _mcpsum_with_names \"${{COMP_WORDS[0]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display(),
            line.len() - 1
        );
        let out = Command::new("bash")
            .env_clear()
            .env("PATH", crate::support::child_path())
            .current_dir(w.path().join("home"))
            .args(["--norc", "-c", &prog])
            .output()
            .unwrap();
        let run = Run::from_output(out);
        run.code(0);
        run.stdout
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let bin = env!("CARGO_BIN_EXE_mcpsum");
    assert_eq!(
        complete(&[bin, "--lockfile", &lockfile, "verify", "--name", "alp"]),
        ["alpha", "alpine"]
    );
    assert_eq!(
        complete(&[bin, "--lockfile", &lockfile, "audit", "--server", ""]),
        ["alpha", "alpine", "beta"]
    );
    // Found as every command finds it (here: in the parent of the home folder).
    assert_eq!(complete(&[bin, "show", "--name", "b"]), ["beta"]);
    // A lockfile that cannot be read gives nothing, and no error.
    assert!(
        complete(&[
            bin,
            "--lockfile",
            "/nonexistent/mcp.lock",
            "show",
            "--name",
            ""
        ])
        .is_empty()
    );
    // Other words still complete as before.
    assert!(complete(&[bin, "ver"]).contains(&"verify".to_owned()));
}

#[test]
fn import_says_before_it_locks_that_a_dry_run_writes_the_lockfile() {
    let w = World::new();
    let a = w.scenario("a", &scenario(&["one"]));
    let argv = crate::support::fake_argv(&a);
    let config = w.path().join("mcp.json");
    std::fs::write(
        &config,
        serde_json::to_vec_pretty(
            &json!({"mcpServers": {"alpha": {"command": argv[0], "args": argv[1..]}}}),
        )
        .unwrap(),
    )
    .unwrap();
    let r = w.run(&["import", "--from", config.to_str().unwrap()]);
    r.code(0);
    let note = r
        .stderr
        .find("note: locking 1 server into `")
        .expect(&r.stderr);
    let locked = r.stderr.find("locked `alpha`").expect(&r.stderr);
    assert!(note < locked, "{}", r.stderr);
    assert!(
        r.stderr.contains("not changed without `--write`"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_refused_sandbox_file_lists_each_problem_on_its_own_line() {
    let w = World::new();
    let sb = w.path().join("sb.json");
    std::fs::write(
        &sb,
        r#"{"filesystem": {"read": ["relative/x", "~bob/y"], "write": []}, "network": {"allow": []}}"#,
    )
    .unwrap();
    let r = w.run(&[
        "lock",
        "--name",
        "x",
        "--sandbox",
        sb.to_str().unwrap(),
        "--",
        "/bin/true",
    ]);
    r.code(2);
    assert!(!r.stderr.contains("\\n"), "{}", r.stderr);
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("sandbox_file_problems", w.redact(&r.stderr));
    });
}
