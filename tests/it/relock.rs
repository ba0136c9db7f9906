//! Re-locking: `policy` is kept, labels of vanished tools are dropped and printed, other entries
//! are never disturbed, the recorded command is reused, and concurrent locks all land.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::{World, bundled_scenario, fake_argv, starts, transcript_events};

fn write_json(w: &World, v: &Value) {
    let mut bytes = serde_json::to_vec_pretty(v).unwrap();
    bytes.push(b'\n');
    w.write_lock(&bytes);
}

#[test]
fn relock_keeps_policy_and_drops_vanished_labels() {
    let w = World::new();
    let mut scen = crate::support::example_scenario();
    let s = w.scenario("notes", &scen);
    w.lock_fake("notes", &s, &[]).code(0);
    w.lock_fake("modern", &bundled_scenario("modern.json"), &[])
        .code(0);
    let mut v = w.lock_json();
    v["servers"]["notes"]["policy"] = json!({
        "taint": {"sources": ["echo", "resources:*", "prompts:*"], "sinks": ["add", "echo"]}
    });
    write_json(&w, &v);
    w.run(&["show"]).code(0).stdout_has(&[
        "echo  readOnly=true openWorld=false  [source, sink]",
        "taint        sources: echo, resources:*, prompts:*; sinks: add, echo",
    ]);
    let modern_before = v["servers"]["modern"].clone();
    let modern_text = entry_text(&w.lock_bytes(), "modern");

    // `echo` vanishes.
    scen["tools"]
        .as_array_mut()
        .unwrap()
        .retain(|t| t["name"] != "echo");
    w.scenario("notes", &scen);
    let r = w.run(&["lock", "--name", "notes"]);
    r.code(0).stderr_has(&[
        "dropped the taint label sources: echo of `notes`",
        "dropped the taint label sinks: echo of `notes`",
        "changes against the previous lock",
        "- tool `echo` removed",
    ]);
    let e = &w.lock_json()["servers"]["notes"];
    assert_eq!(
        e["policy"],
        json!({"taint": {"sources": ["resources:*", "prompts:*"], "sinks": ["add"]}})
    );
    w.run(&["verify"]).code(0);
    assert_eq!(
        entry_text(&w.lock_bytes(), "modern"),
        modern_text,
        "other entry's bytes"
    );
    assert_eq!(
        w.lock_json()["servers"]["modern"],
        modern_before,
        "other entry untouched"
    );
}

/// The text of one server entry in the lockfile (from its key to the next server's key).
fn entry_text(bytes: &[u8], name: &str) -> String {
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let start = text.find(&format!("\n    \"{name}\": {{")).expect("entry");
    let rest = &text[start + 1..];
    let end = rest.find("\n    }").expect("entry end");
    rest[..end].to_owned()
}

#[test]
fn relock_without_command_reuses_the_recorded_one() {
    let w = World::new();
    let t = w.transcript("s");
    let s = w.scenario(
        "s",
        &json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}], "transcript": t}),
    );
    w.lock_fake("s", &s, &["--env", "LANG"]).code(0);
    let before = w.lock_bytes();
    let r = w.run(&["lock", "--name", "s"]);
    r.code(0).stderr_has(&["unchanged since the previous lock"]);
    assert!(!r.stderr.contains("replacing the command"), "{r:?}");
    assert_eq!(w.lock_bytes(), before, "unchanged server: identical bytes");
    let argvs: Vec<Value> = transcript_events(&t)
        .into_iter()
        .filter(|e| e["event"] == "start")
        .map(|e| e["argv"].clone())
        .collect();
    // The first lock probes and then starts a fresh process for `initialize`; the re-lock asks
    // the locked (legacy) era directly.
    assert_eq!(starts(&t), 3);
    assert!(
        argvs.iter().all(|a| *a == argvs[0]),
        "same argv every time: {argvs:?}"
    );
    let e = &w.lock_json()["servers"]["s"];
    assert_eq!(e["command"], json!(fake_argv(&s)));
    assert_eq!(
        e["envPassthrough"],
        json!(["LANG"]),
        "recorded passthrough kept"
    );

    // A re-lock with `--env` adds to the recorded names.
    w.run(&["lock", "--name", "s", "--env", "TZ"]).code(0);
    assert_eq!(
        w.lock_json()["servers"]["s"]["envPassthrough"],
        json!(["LANG", "TZ"])
    );
}

#[test]
fn relock_with_a_new_command_replaces_it_and_says_so() {
    let w = World::new();
    let a = w.scenario(
        "a",
        &json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}),
    );
    let b = w.scenario(
        "b",
        &json!({"tools": [{"name": "u", "inputSchema": {"type": "object"}}]}),
    );
    w.lock_fake("s", &a, &["--env", "LANG"]).code(0);
    let r = w.lock_fake("s", &b, &[]);
    r.code(0).stderr_has(&[
        "replacing the command of `s`",
        "a.json -> ",
        "b.json",
        "+ tool `u` added",
        "- tool `t` removed",
    ]);
    let e = &w.lock_json()["servers"]["s"];
    assert_eq!(e["command"], json!(fake_argv(&b)));
    assert_eq!(
        e["envPassthrough"],
        json!([]),
        "a new command replaces the passthrough names"
    );
}

#[test]
fn relock_of_an_existing_modern_entry_stays_modern() {
    let w = World::new();
    let t = w.transcript("d");
    let mut scen: Value =
        serde_json::from_slice(&std::fs::read(bundled_scenario("dual.json")).unwrap()).unwrap();
    scen["transcript"] = json!(t);
    let s = w.scenario("d", &scen);
    w.lock_fake("d", &s, &[]).code(0);
    w.run(&["lock", "--name", "d"]).code(0);
    assert_eq!(
        w.lock_json()["servers"]["d"]["protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(w.lock_json()["lockfileVersion"], 2);
}

#[test]
fn concurrent_locks_of_different_names_all_land() {
    let w = World::new();
    let s = w.scenario("s", &json!({"generateTools": 10, "pageSize": 5}));
    let mut expected = Vec::new();
    for round in 0..5 {
        let names = [format!("a{round}"), format!("b{round}")];
        let children: Vec<_> = names
            .iter()
            .map(|n| {
                w.cmd()
                    .args(["lock", "--name", n, "--"])
                    .args(fake_argv(&s))
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for (n, c) in names.iter().zip(children) {
            let out = c.wait_with_output().unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "{n}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        expected.extend(names);
        let lock = w.lock_json();
        let mut got: Vec<String> = lock["servers"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        got.sort();
        let mut want = expected.clone();
        want.sort();
        assert_eq!(got, want, "round {round}: every lock landed");
    }
    w.run(&["show"]).code(0);
    assert!(crate::support::temp_leftovers(w.path()).is_empty());
}

#[test]
fn file_goes_back_to_version_1_when_no_entry_needs_2() {
    let w = World::new();
    let modern = w.scenario("m", &json!({"era": "modern", "tools": [{"name": "t"}]}));
    w.lock_fake("s", &modern, &[]).code(0);
    assert_eq!(w.lock_json()["lockfileVersion"], 2);
    let legacy = w.scenario("l", &json!({"era": "legacy", "tools": [{"name": "t"}]}));
    w.lock_fake("s", &legacy, &[])
        .code(0)
        .stderr_has(&["replacing the command of `s`", "legacy (initialize)"]);
    let lock = w.lock_json();
    assert_eq!(lock["lockfileVersion"], 1, "{lock:#}");
    assert!(lock["servers"]["s"].get("supportedVersions").is_none());
}

#[test]
fn relock_keeps_the_file_mode() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    let s = w.scenario("s", &json!({"tools": [{"name": "t"}]}));
    w.lock_fake("s", &s, &[]).code(0);
    let mode = |w: &World| {
        std::fs::metadata(w.lockfile())
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode(&w), 0o644, "a new lockfile is 0644");
    std::fs::set_permissions(w.lockfile(), std::fs::Permissions::from_mode(0o600)).unwrap();
    w.scenario("s", &json!({"tools": [{"name": "u"}]}));
    w.run(&["lock", "--name", "s"]).code(0);
    assert_eq!(mode(&w), 0o600);
}
