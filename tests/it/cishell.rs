//! CI and shell fit: `verify --format sarif|github|json` against drift made with the fake server
//! (SARIF validated against the OASIS 2.1.0 schema in `tests/fixtures`), escaping of hostile
//! server text, the pre-commit hook, shell completions, man pages and the examples in `--help`.

use std::path::{Path, PathBuf};
use std::process::Command;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::{Run, World, real_servers_required, repo, snapshot_settings, test_dep};

fn base() -> Value {
    json!({
        "serverInfo": {"name": "drifty", "version": "1.0.0"},
        "instructions": "Use fetch for web pages.",
        "tools": [
            {"name": "fetch", "description": "Fetches a web page.",
             "inputSchema": {"type": "object", "properties": {"url": {"type": "string"}}}},
            {"name": "ping", "description": "Answers pong.", "inputSchema": {"type": "object"}}
        ],
        "prompts": [{"name": "summarize", "description": "Summarize a page."}]
    })
}

/// A world with `drifty` locked from `base()`.
fn locked() -> World {
    let w = World::new();
    let s = w.scenario("drifty", &base());
    w.lock_fake("drifty", &s, &[]).code(0);
    w
}

/// Runs `verify` in all four formats, asserts each ends with `code`, and returns the runs as
/// (text, json, sarif, github).
fn verify_all(w: &World, extra: &[&str], code: i32) -> (Run, Value, Value, Run) {
    let with = |args: &[&str]| {
        let mut all = vec!["verify"];
        all.extend_from_slice(args);
        all.extend_from_slice(extra);
        let r = w.run(&all);
        r.code(code);
        r
    };
    let text = with(&[]);
    let json_flag = with(&["--json"]).json();
    let json_format = with(&["--format", "json"]).json();
    assert_eq!(json_flag, json_format, "--json is --format json");
    let sarif = with(&["--format", "sarif"]).json();
    assert_valid_sarif(&sarif);
    let github = with(&["--format", "github"]);
    (text, json_flag, sarif, github)
}

fn validator() -> jsonschema::Validator {
    let schema: Value = serde_json::from_slice(
        &std::fs::read(repo().join("tests/fixtures/sarif-schema-2.1.0.json")).unwrap(),
    )
    .unwrap();
    jsonschema::options()
        .should_validate_formats(true)
        .build(&without_stray_bracket(schema))
        .unwrap()
}

/// The schema's `language` patterns (in `run` and `toolComponent`) end in `]?$`: a stray `]`,
/// a literal in ECMA 262 without the `u` flag, but the meta-schema's `format: regex` check (with
/// it) refuses the pattern, and with it the whole schema. `\]` means the same and passes. Only
/// these two strings change; anything else in the file is used as published.
fn without_stray_bracket(mut schema: Value) -> Value {
    const PUBLISHED: &str = "^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$";
    for def in ["run", "toolComponent"] {
        let pattern = &mut schema["definitions"][def]["properties"]["language"]["pattern"];
        assert_eq!(pattern, PUBLISHED, "the vendored schema changed");
        *pattern = json!(PUBLISHED.replace("]?$", "\\]?$"));
    }
    schema
}

fn schema_errors(doc: &Value) -> Vec<String> {
    validator()
        .iter_errors(doc)
        .map(|e| format!("{e} (at {})", e.instance_path()))
        .collect()
}

#[track_caller]
fn assert_valid_sarif(doc: &Value) {
    let errors = schema_errors(doc);
    assert!(
        errors.is_empty(),
        "not valid SARIF 2.1.0:\n{}\n{doc:#}",
        errors.join("\n")
    );
}

fn results(sarif: &Value) -> &Vec<Value> {
    sarif["runs"][0]["results"].as_array().unwrap()
}

fn result<'a>(sarif: &'a Value, rule: &str) -> &'a Value {
    results(sarif)
        .iter()
        .find(|r| r["ruleId"] == rule)
        .unwrap_or_else(|| panic!("no `{rule}` result in {sarif:#}"))
}

/// The text a SARIF region covers, cut from `text` by this test's own reading of lines and
/// UTF-16 columns (independent of mcpsum's).
fn region_text(text: &str, region: &Value) -> String {
    let line_of = |n: &Value| {
        text.split('\n')
            .nth(n.as_u64().unwrap() as usize - 1)
            .unwrap()
    };
    let byte_at = |line: &str, col: &Value| {
        let mut units = col.as_u64().unwrap() as usize - 1;
        let mut bytes = 0;
        for c in line.chars() {
            if units == 0 {
                break;
            }
            units -= c.len_utf16();
            bytes += c.len_utf8();
        }
        bytes
    };
    let (sl, el) = (&region["startLine"], &region["endLine"]);
    let start_line = line_of(sl);
    let start = byte_at(start_line, &region["startColumn"]);
    if sl == el {
        return start_line[start..byte_at(start_line, &region["endColumn"])].to_owned();
    }
    let mut out = start_line[start..].to_owned();
    for n in sl.as_u64().unwrap() + 1..el.as_u64().unwrap() {
        out.push('\n');
        out.push_str(line_of(&json!(n)));
    }
    let end_line = line_of(el);
    out.push('\n');
    out.push_str(&end_line[..byte_at(end_line, &region["endColumn"])]);
    out
}

/// The locked item of `field` keyed `key` in server `drifty`.
fn locked_item(w: &World, field: &str, key_field: &str, key: &str) -> Value {
    w.lock_json()["servers"]["drifty"][field]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i[key_field] == key)
        .cloned()
        .unwrap()
}

/// insta settings for SARIF: the version of mcpsum is filtered too.
fn sarif_settings() -> insta::Settings {
    let mut s = snapshot_settings();
    let version = env!("CARGO_PKG_VERSION").replace('.', r"\.");
    s.add_filter(
        &format!(r#""(semanticV|v)ersion": "{version}""#),
        r#""${1}ersion": "[VERSION]""#,
    );
    s
}

#[test]
fn sarif_has_one_result_per_drifted_item_on_its_lockfile_lines() {
    let w = locked();
    let mut s = base();
    s["serverInfo"]["version"] = json!("1.0.1");
    s["instructions"] = json!("Use fetch for web pages. Call it first.");
    s["tools"][1]["description"] = json!("Answers pong, loudly.");
    s["tools"][0]["inputSchema"]["required"] = json!(["url"]);
    s["tools"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "send_email", "inputSchema": {"type": "object"}}));
    s["prompts"] = json!([]);
    w.scenario("drifty", &s);
    let (text, doc, sarif, _) = verify_all(&w, &[], 1);
    text.stdout_has(&["drift drifty: definitional drift"]);
    assert_eq!(doc["exitCode"], 1);

    let run = &sarif["runs"][0];
    assert_eq!(sarif["version"], "2.1.0");
    assert_eq!(run["tool"]["driver"]["name"], "mcpsum");
    assert_eq!(run["invocations"][0]["exitCode"], 1);
    assert_eq!(run["invocations"][0]["executionSuccessful"], true);
    let mut got: Vec<(String, String)> = results(&sarif)
        .iter()
        .map(|r| {
            (
                r["ruleId"].as_str().unwrap().to_owned(),
                r["level"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    got.sort();
    let expected: Vec<(String, String)> = [
        // No prompts left: the fake server stops advertising the prompts capability.
        ("capabilities-changed", "note"),
        ("instructions-changed", "error"),
        ("prompt-removed", "error"),
        ("server-info-changed", "note"),
        ("tool-added", "error"),
        ("tool-changed", "error"),
        ("tool-changed", "error"),
    ]
    .iter()
    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
    .collect();
    assert_eq!(got, expected);

    // Each result's rule is the rule at its index, and every location is the lockfile.
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    for r in results(&sarif) {
        let index = r["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[index]["id"], r["ruleId"]);
        let loc = &r["locations"][0]["physicalLocation"];
        assert_eq!(loc["artifactLocation"]["uri"], "mcp.lock", "{r:#}");
    }

    // The regions cover exactly what the lockfile pins for each result.
    let lock_text = String::from_utf8(w.lock_bytes()).unwrap();
    let region = |r: &Value| r["locations"][0]["physicalLocation"]["region"].clone();
    for r in results(&sarif) {
        let key = r["properties"]["key"].as_str().unwrap_or_default();
        match r["ruleId"].as_str().unwrap() {
            "tool-changed" => {
                let covered: Value =
                    serde_json::from_str(&region_text(&lock_text, &region(r))).unwrap();
                assert_eq!(covered, locked_item(&w, "tools", "name", key));
            }
            "prompt-removed" => {
                let covered: Value =
                    serde_json::from_str(&region_text(&lock_text, &region(r))).unwrap();
                assert_eq!(covered, locked_item(&w, "prompts", "name", "summarize"));
            }
            "tool-added" => {
                // An added item points at the list it would join.
                let line = region(r)["startLine"].as_u64().unwrap() as usize;
                let text_line = lock_text.split('\n').nth(line - 1).unwrap();
                assert!(
                    text_line.trim_start().starts_with("\"tools\": ["),
                    "{text_line}"
                );
                assert_eq!(key, "send_email");
            }
            "instructions-changed" => {
                let covered: Value =
                    serde_json::from_str(&region_text(&lock_text, &region(r))).unwrap();
                assert_eq!(covered, json!("Use fetch for web pages."));
            }
            "capabilities-changed" => {
                let covered: Value =
                    serde_json::from_str(&region_text(&lock_text, &region(r))).unwrap();
                assert_eq!(covered, w.lock_json()["servers"]["drifty"]["capabilities"]);
            }
            "server-info-changed" => {
                let covered: Value =
                    serde_json::from_str(&region_text(&lock_text, &region(r))).unwrap();
                assert_eq!(covered, json!({"name": "drifty", "version": "1.0.0"}));
                assert_eq!(r["properties"]["live"]["version"], "1.0.1");
            }
            other => panic!("unexpected {other}"),
        }
    }
    let ping = results(&sarif)
        .iter()
        .find(|r| r["properties"]["key"] == "ping")
        .unwrap();
    assert_eq!(
        ping["properties"]["lockedDigest"],
        w.lock_json()["servers"]["drifty"]["digests"]["tools"]["ping"]
    );
    assert!(
        ping["message"]["text"]
            .as_str()
            .unwrap()
            .starts_with("tool `ping` of server `drifty` changed"),
        "{ping:#}"
    );
    sarif_settings().bind(|| {
        insta::assert_snapshot!("sarif_drift", serde_json::to_string_pretty(&sarif).unwrap());
    });
}

#[test]
fn sarif_fingerprints_are_stable_and_distinct() {
    let w = locked();
    let mut s = base();
    s["tools"][0]["description"] = json!("Fetches a web page, and more.");
    s["tools"][1]["description"] = json!("Answers pong, loudly.");
    w.scenario("drifty", &s);
    let fingerprints = || -> Vec<Value> {
        let r = w.run(&["verify", "--format", "sarif"]);
        r.code(1);
        results(&r.json())
            .iter()
            .map(|r| r["partialFingerprints"].clone())
            .collect()
    };
    let first = fingerprints();
    assert_eq!(first.len(), 2);
    assert_ne!(first[0], first[1]);
    assert_eq!(first, fingerprints());
}

#[test]
fn informational_drift_is_a_note_and_a_warning_under_strict() {
    let w = locked();
    let (_, _, clean, gh) = verify_all(&w, &[], 0);
    assert_eq!(results(&clean), &Vec::<Value>::new());
    assert_eq!(
        gh.stdout,
        "ok drifty: clean\nsignature unsigned: it is not signed (there is no `mcp.lock.sig` beside it)\n"
    );

    let mut s = base();
    s["serverInfo"]["version"] = json!("1.0.1");
    w.scenario("drifty", &s);
    let (_, _, sarif, gh) = verify_all(&w, &[], 0);
    assert_eq!(result(&sarif, "server-info-changed")["level"], "note");
    assert!(
        gh.stdout.starts_with("::notice file=mcp.lock,line="),
        "{}",
        gh.stdout
    );
    let (_, _, sarif, gh) = verify_all(&w, &["--strict"], 1);
    assert_eq!(result(&sarif, "server-info-changed")["level"], "warning");
    assert!(
        gh.stdout.starts_with("::warning file=mcp.lock,line="),
        "{}",
        gh.stdout
    );
    assert_eq!(sarif["runs"][0]["properties"]["strict"], true);
}

#[test]
fn a_server_that_fails_to_start_is_a_result_on_its_entry() {
    let w = locked();
    let c = w.scenario(
        "calm",
        &json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}),
    );
    w.lock_fake("calm", &c, &[]).code(0);
    let b = w.scenario("broken", &json!({}));
    w.lock_fake("broken", &b, &[]).code(0);
    w.scenario(
        "broken",
        &json!({"hostile": {"exitAtStart": 9, "stderrLines": ["boom\u{1b}[2J", "::error::forged"]}}),
    );
    let (_, _, sarif, gh) = verify_all(&w, &[], 2);
    let run = &sarif["runs"][0];
    assert_eq!(run["invocations"][0]["executionSuccessful"], false);
    assert_eq!(run["invocations"][0]["exitCode"], 2);
    assert_eq!(results(&sarif).len(), 1, "{sarif:#}");
    let broken = result(&sarif, "server-not-verified");
    assert_eq!(broken["level"], "error");
    assert_eq!(broken["properties"]["server"], "broken");
    let line = broken["locations"][0]["physicalLocation"]["region"]["startLine"]
        .as_u64()
        .unwrap() as usize;
    let lock_text = String::from_utf8(w.lock_bytes()).unwrap();
    assert_eq!(
        lock_text.split('\n').nth(line - 1).unwrap().trim(),
        "\"broken\": {"
    );
    // The server's stderr reaches the annotation, escaped: no escape byte, no second command.
    let lines: Vec<&str> = gh.stdout.lines().collect();
    assert_eq!(
        lines[1..].to_vec(),
        [
            "error broken: could not verify",
            "ok calm: clean",
            "ok drifty: clean",
            "signature unsigned: it is not signed (there is no `mcp.lock.sig` beside it)"
        ]
    );
    assert!(
        lines[0].starts_with("::error file=mcp.lock,line="),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("boom\\u{1b}[2J%0A"), "{}", lines[0]);
    assert!(lines[0].contains("%0A| ::error::forged"), "{}", lines[0]);
    assert!(!gh.stdout.contains('\u{1b}'));
}

#[test]
fn era_and_protocol_version_rules() {
    let w = World::new();
    let tools = json!([{"name": "t", "inputSchema": {"type": "object"}}]);
    let s = w.scenario("m", &json!({"era": "modern", "tools": tools}));
    w.lock_fake("m", &s, &[]).code(0);
    w.scenario(
        "m",
        &json!({"era": "modern", "supportedVersions": ["2027-01-01"], "tools": tools}),
    );
    let (_, _, sarif, _) = verify_all(&w, &[], 1);
    let dropped = result(&sarif, "protocol-version-dropped");
    assert_eq!(dropped["level"], "error");
    assert!(
        dropped["message"]["text"]
            .as_str()
            .unwrap()
            .contains("no longer lists the locked protocol version \"2026-07-28\""),
        "{dropped:#}"
    );

    let w = World::new();
    let s = w.scenario("m", &json!({"era": "legacy", "tools": tools}));
    w.lock_fake("m", &s, &[]).code(0);
    w.scenario("m", &json!({"era": "modern", "tools": tools}));
    let (_, _, sarif, _) = verify_all(&w, &[], 1);
    assert_eq!(result(&sarif, "era-changed")["level"], "error");
}

#[test]
fn a_lockfile_that_cannot_be_used_is_still_a_report() {
    // CI uploads whatever `verify` printed: a tampered lockfile must give a SARIF log and an
    // annotation on the offending line, not an empty file.
    let w = locked();
    let text = String::from_utf8(w.lock_bytes()).unwrap();
    w.write_lock(text.replace("Answers pong.", "Answers pong!"));
    let sarif = w.run(&["verify", "--format", "sarif"]);
    sarif
        .code(2)
        .stderr_has(&["failed validation", "digest mismatch"]);
    let sarif = sarif.json();
    assert_valid_sarif(&sarif);
    assert_eq!(
        sarif["runs"][0]["invocations"][0]["executionSuccessful"],
        false
    );
    assert_eq!(results(&sarif).len(), 1);
    let r = result(&sarif, "lockfile-not-used");
    assert_eq!(r["level"], "error");
    let line = r["locations"][0]["physicalLocation"]["region"]["startLine"]
        .as_u64()
        .unwrap() as usize;
    // The first problem's line: the digest recorded for `ping`.
    assert!(
        text.split('\n')
            .nth(line - 1)
            .unwrap()
            .contains("\"ping\": \"sha256:"),
        "line {line}"
    );
    assert!(
        r["properties"]["details"]
            .as_str()
            .unwrap()
            .contains("digest mismatch"),
        "{r:#}"
    );
    let gh = w.run(&["verify", "--format", "github"]);
    gh.code(2);
    assert!(
        gh.stdout
            .starts_with(&format!("::error file=mcp.lock,line={line},")),
        "{}",
        gh.stdout
    );
    assert_eq!(gh.stdout.lines().count(), 1);

    // No lockfile at all: a result without a location.
    let empty = World::new();
    let r = empty
        .bare_cmd()
        .args(["verify", "--format", "sarif"])
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(2));
    let sarif: Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_valid_sarif(&sarif);
    assert_eq!(result(&sarif, "lockfile-not-used")["locations"], json!([]));
    let r = empty
        .bare_cmd()
        .args(["verify", "--format", "github"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&r.stdout)
            .starts_with("::error title=mcpsum%3A the lockfile could not be used::no `mcp.lock`"),
        "{r:?}"
    );

    // An unknown `--name` is reported the same way.
    let w = locked();
    let r = w.run(&["verify", "--name", "nope", "--format", "sarif"]);
    r.code(2).stderr_has(&["no server named `nope`"]);
    assert_eq!(results(&r.json())[0]["ruleId"], "lockfile-not-used");
}

/// A tool name and description written to break out of each format.
const HOSTILE_NAME: &str = "x,y:z%0A [docs](https://evil.example/{0}) \\";
const HOSTILE_DESCRIPTION: &str = "Fetches.\r\n::warning file=mcp.lock::forged\n%0A\u{202e}txt.exe";

#[test]
fn github_annotations_escape_server_text() {
    let w = locked();
    let mut s = base();
    s["tools"][0]["description"] = json!(HOSTILE_DESCRIPTION);
    s["tools"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": HOSTILE_NAME, "inputSchema": {"type": "object"}}));
    w.scenario("drifty", &s);
    let (_, _, _, gh) = verify_all(&w, &[], 1);
    let lines: Vec<&str> = gh.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", gh.stdout);
    assert_eq!(lines[2], "drift drifty: definitional drift");
    assert!(lines[3].starts_with("signature unsigned: "), "{}", lines[3]);

    let lock_text = String::from_utf8(w.lock_bytes()).unwrap();
    let mut seen = Vec::new();
    for line in &lines[..2] {
        let (command, props, message) = parse_command(line);
        assert_eq!(command, "error");
        assert_eq!(props["file"], "mcp.lock");
        let n: usize = props["line"].parse().unwrap();
        assert!(n >= 1 && n <= lock_text.lines().count());
        assert!(
            !message.contains('\u{202e}'),
            "bidi override reached the log"
        );
        seen.push((props["title"].clone(), message));
    }
    seen.sort();
    let (added_title, added) = &seen[0];
    assert_eq!(added_title, "mcpsum: tool added (server `drifty`)");
    assert!(
        added.starts_with(&format!("server `drifty` now lists tool `{HOSTILE_NAME}`")),
        "{added}"
    );
    let (changed_title, changed) = &seen[1];
    assert_eq!(changed_title, "mcpsum: tool changed (server `drifty`)");
    assert!(changed.contains("\\u{202e}txt.exe"), "{changed}");
    // The forged command is text inside this annotation's message, not a line of its own.
    assert!(
        changed.contains("::warning file=mcp.lock::forged"),
        "{changed}"
    );
    snapshot_settings().bind(|| insta::assert_snapshot!("github_hostile", gh.stdout));
}

/// Splits `::command k=v,k=v::message` the way the Actions runner does and decodes its escapes.
fn parse_command(line: &str) -> (String, std::collections::BTreeMap<String, String>, String) {
    let rest = line.strip_prefix("::").unwrap();
    let (head, message) = rest.split_once("::").unwrap();
    let (command, props) = head.split_once(' ').unwrap();
    let unescape = |s: &str| {
        s.replace("%0D", "\r")
            .replace("%0A", "\n")
            .replace("%3A", ":")
            .replace("%2C", ",")
            .replace("%25", "%")
    };
    let props = props
        .split(',')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_owned(), unescape(v))
        })
        .collect();
    let message = message
        .replace("%0D", "\r")
        .replace("%0A", "\n")
        .replace("%25", "%");
    (command.to_owned(), props, message)
}

#[test]
fn sarif_messages_cannot_carry_links_or_placeholders() {
    let w = locked();
    let mut s = base();
    s["tools"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": HOSTILE_NAME, "inputSchema": {"type": "object"}}));
    w.scenario("drifty", &s);
    let (_, _, sarif, _) = verify_all(&w, &[], 1);
    let added = result(&sarif, "tool-added");
    let text = added["message"]["text"].as_str().unwrap();
    assert!(
        text.contains(r"`x,y:z%0A \[docs\](https://evil.example/{{0}}) \\`"),
        "{text}"
    );
    // The data keeps the name as the server sent it.
    assert_eq!(added["properties"]["key"], HOSTILE_NAME);
}

#[test]
fn the_schema_check_rejects_what_is_not_sarif() {
    // The validator in these tests must be able to say no.
    let w = locked();
    let mut s = base();
    s["prompts"] = json!([]);
    w.scenario("drifty", &s);
    let r = w.run(&["verify", "--format", "sarif"]);
    r.code(1);
    let good = r.json();
    assert!(schema_errors(&good).is_empty());
    let mut bad = good.clone();
    bad["runs"][0]["results"][0]["level"] = json!("fatal");
    assert!(!schema_errors(&bad).is_empty());
    let mut bad = good.clone();
    bad["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] =
        json!(0);
    assert!(!schema_errors(&bad).is_empty());
    let mut bad = good;
    bad["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] =
        json!("a b\\c");
    assert!(!schema_errors(&bad).is_empty());
}

#[test]
fn a_lockfile_outside_the_directory_is_named_by_a_file_uri() {
    let w = locked();
    let mut s = base();
    s["prompts"] = json!([]);
    w.scenario("drifty", &s);
    let elsewhere = w.path().join("home");
    let out = w
        .bare_cmd()
        .current_dir(&elsewhere)
        .arg("--lockfile")
        .arg(w.lockfile())
        .args(["verify", "--format", "sarif"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid_sarif(&sarif);
    let uri = result(&sarif, "prompt-removed")["locations"][0]["physicalLocation"]
        ["artifactLocation"]["uri"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(uri, format!("file://{}", w.lockfile().display()));

    // From the lockfile's own directory, with a relative `--lockfile`, it is relative.
    let out = w
        .bare_cmd()
        .args(["--lockfile", "./mcp.lock", "verify", "--format", "github"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("::error file=mcp.lock,"),
        "{out:?}"
    );
}

#[test]
fn json_and_format_cannot_both_be_given() {
    let w = locked();
    let r = w.run(&["verify", "--json", "--format", "sarif"]);
    r.code(2).stderr_has(&["--json", "--format"]);
}

// ---------------------------------------------------------------------------------------------
// pre-commit

#[test]
fn pre_commit_hook_verifies_a_changed_lockfile() {
    let Some(pre_commit) = test_dep("venv/bin/pre-commit") else {
        return;
    };
    let w = World::new();
    let project = w.path().join("project");
    std::fs::create_dir_all(project.join("sub")).unwrap();
    let s = w.scenario("drifty", &base());
    let lock = project.join("sub/mcp.lock");
    w.bare_cmd()
        .arg("--lockfile")
        .arg(&lock)
        .args(["lock", "--name", "drifty", "--"])
        .args(crate::support::fake_argv(&s))
        .output()
        .unwrap();
    assert!(lock.exists());
    std::fs::write(project.join("notes.txt"), "x\n").unwrap();
    git(&project, &["init", "-q"]);
    git(&project, &["add", "."]);

    let hook = |files: &[&str]| -> Run {
        let bin_dir = Path::new(env!("CARGO_BIN_EXE_mcpsum")).parent().unwrap();
        let path = format!(
            "{}:{}",
            bin_dir.display(),
            crate::support::child_path().to_string_lossy()
        );
        let out = Command::new(&pre_commit)
            .args([
                "try-repo",
                &repo().display().to_string(),
                "mcpsum-verify",
                "--verbose",
            ])
            .arg("--files")
            .args(files)
            .current_dir(&project)
            .env_clear()
            .env("PATH", path)
            .env("HOME", w.path().join("home"))
            .env("PRE_COMMIT_HOME", w.path().join("pre-commit-cache"))
            .env("MCPSUM_STATE_DIR", w.path().join("state"))
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    };
    hook(&["sub/mcp.lock"])
        .code(0)
        .stdout_has(&["mcpsum verify", "Passed", "ok drifty: clean"]);
    // Only `mcp.lock` files trigger it.
    hook(&["notes.txt"]).code(0).stdout_has(&["Skipped"]);

    let mut drifted = base();
    drifted["tools"][1]["description"] = json!("Answers pong, loudly.");
    w.scenario("drifty", &drifted);
    hook(&["sub/mcp.lock"])
        .code(1)
        .stdout_has(&["Failed", "exit code: 1", "tool `ping` changed"]);
}

fn git(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap();
    assert!(st.success(), "git {args:?}");
}

#[test]
fn pre_commit_hook_matches_only_lockfiles() {
    let hooks = std::fs::read_to_string(repo().join(".pre-commit-hooks.yaml")).unwrap();
    let files = hooks
        .lines()
        .find_map(|l| l.trim().strip_prefix("files: "))
        .unwrap();
    assert_eq!(files, r"(^|/)mcp\.lock$");
    // pre-commit applies `files` with Python's `re.search`; so does this check.
    let out = Command::new(crate::support::PYTHON)
        .args([
            "-c",
            "import re,sys; p=re.compile(sys.argv[1]); print(' '.join(str(bool(p.search(f))) for f in sys.argv[2:]))",
            files,
            "mcp.lock",
            "a/b/mcp.lock",
            "mcp.lock.bak",
            "xmcp.lock",
            "mcp_lock",
            "mcp.lock/x",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "True True False False False False"
    );
}

// ---------------------------------------------------------------------------------------------
// completions, man pages, --help

/// A shell from the machine, or `None` with a note (a failure when the test deps are required).
fn shell(name: &str) -> Option<PathBuf> {
    let found = ["/usr/bin", "/bin", "/usr/local/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists());
    if found.is_none() {
        assert!(
            !real_servers_required(),
            "`{name}` is missing; run `scripts/install-test-deps.sh`"
        );
        eprintln!("skipping the {name} checks: `{name}` is not installed");
    }
    found
}

fn completion_script(w: &World, shell: &str) -> PathBuf {
    let r = w.run(&["completions", shell]);
    r.code(0);
    assert!(
        r.stdout.contains("verify") && r.stdout.contains("--format"),
        "{shell}"
    );
    let p = w.path().join(format!("mcpsum.{shell}"));
    std::fs::write(&p, &r.stdout).unwrap();
    p
}

fn run_shell(shell: &Path, args: &[&str]) -> Run {
    let out = Command::new(shell)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn bash_completion_parses_and_completes() {
    let w = World::new();
    let script = completion_script(&w, "bash");
    let Some(bash) = shell("bash") else { return };
    let script = script.display().to_string();
    run_shell(&bash, &["-n", &script]).code(0);
    let complete = |words: &str| -> Vec<String> {
        let r = run_shell(
            &bash,
            &[
                "-c",
                &format!(
                    "source {script}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); COMP_LINE=\"${{COMP_WORDS[*]}}\"; COMP_POINT=${{#COMP_LINE}}; _mcpsum mcpsum \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\""
                ),
            ],
        );
        r.code(0);
        r.stdout.lines().map(str::to_owned).collect()
    };
    let subcommands = complete("mcpsum ''");
    for c in [
        "lock",
        "verify",
        "show",
        "proxy",
        "completions",
        "man",
        "taint",
        "sandbox",
    ] {
        assert!(subcommands.iter().any(|s| s == c), "{c} in {subcommands:?}");
    }
    let formats = complete("mcpsum verify --format ''");
    assert_eq!(formats, ["text", "json", "sarif", "github"]);
}

#[test]
fn zsh_completion_parses() {
    let w = World::new();
    let script = completion_script(&w, "zsh");
    let Some(zsh) = shell("zsh") else { return };
    run_shell(&zsh, &["-n", &script.display().to_string()]).code(0);
    // Loaded by compinit, the function is defined under its `#compdef` name.
    let r = run_shell(
        &zsh,
        &[
            "-f",
            "-c",
            &format!(
                "autoload -Uz compinit && compinit -u -D; source {}; whence -w _mcpsum",
                script.display()
            ),
        ],
    );
    r.code(0).stdout_has(&["_mcpsum: function"]);
}

#[test]
fn fish_completion_parses_and_completes() {
    let w = World::new();
    let script = completion_script(&w, "fish");
    let Some(fish) = shell("fish") else { return };
    let script = script.display().to_string();
    run_shell(&fish, &["--no-execute", &script]).code(0);
    let r = run_shell(
        &fish,
        &[
            "--no-config",
            "-c",
            &format!("source {script}; complete --do-complete 'mcpsum verify --format '"),
        ],
    );
    r.code(0);
    let formats: Vec<&str> = r
        .stdout
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(formats, ["github", "json", "sarif", "text"], "{}", r.stdout);
    let r = run_shell(
        &fish,
        &[
            "--no-config",
            "-c",
            &format!("source {script}; complete --do-complete 'mcpsum '"),
        ],
    );
    r.code(0).stdout_has(&["verify\t", "completions\t"]);
}

#[test]
fn completions_reject_an_unknown_shell() {
    let w = World::new();
    w.run(&["completions", "tcsh"]).code(2).stderr_has(&[
        "invalid value 'tcsh'",
        "bash",
        "zsh",
        "fish",
    ]);
}

/// Every command path, from `--help`'s command lists: `[[], ["lock"], ..., ["taint", "list"]]`.
fn command_paths(w: &World) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut todo = vec![Vec::<String>::new()];
    while let Some(path) = todo.pop() {
        let mut args = path.clone();
        args.push("--help".into());
        let r = w.run(&args);
        r.code(0);
        let mut in_commands = false;
        for line in r.stdout.lines() {
            if line == "Commands:" {
                in_commands = true;
                continue;
            }
            if in_commands {
                // A command's line is indented by two; its wrapped description by more.
                let Some(rest) = line.strip_prefix("  ") else {
                    break;
                };
                if rest.starts_with(' ') {
                    continue;
                }
                let name = rest.split_whitespace().next().unwrap();
                if name != "help" {
                    let mut sub = path.clone();
                    sub.push(name.to_owned());
                    todo.push(sub);
                }
            }
        }
        out.push(path);
    }
    out.sort();
    out
}

#[test]
fn every_command_has_examples_in_its_help() {
    let w = World::new();
    let paths = command_paths(&w);
    assert!(paths.len() >= 13, "{paths:?}");
    for path in &paths {
        for flag in ["--help", "-h"] {
            let mut args = path.clone();
            args.push(flag.into());
            let r = w.run(&args);
            r.code(0);
            let examples = r.stdout.split("\nExamples:\n").nth(1).unwrap_or_else(|| {
                panic!("`mcpsum {} {flag}` has no Examples section", path.join(" "))
            });
            let prefix = format!("  mcpsum {}", path.join(" ")).trim_end().to_owned();
            let lines: Vec<&str> = examples.lines().take_while(|l| !l.is_empty()).collect();
            assert!(
                !lines.is_empty() && lines.iter().all(|l| l.starts_with(&prefix)),
                "`mcpsum {} {flag}`: every example starts with `{}`:\n{examples}",
                path.join(" "),
                prefix.trim_start()
            );
        }
    }
}

/// A command's own help opens with the summary that its parent's command list gives, not with
/// the doc comment of its argument type (their arguments are added to the tree lazily).
#[test]
fn every_command_help_opens_with_its_summary() {
    let w = World::new();
    for path in command_paths(&w).iter().filter(|p| !p.is_empty()) {
        let (parent, name) = path.split_at(path.len() - 1);
        let mut args = parent.to_vec();
        args.push("--help".into());
        let list = w.run(&args).stdout;
        let entry = list
            .lines()
            .find_map(|l| l.strip_prefix("  ")?.strip_prefix(&format!("{} ", name[0])))
            .unwrap_or_else(|| panic!("`{}` is not in its parent's list:\n{list}", name[0]));
        let mut args = path.clone();
        args.push("--help".into());
        let help = w.run(&args).stdout;
        let first = help.lines().next().unwrap_or_default();
        // The list may wrap a long summary (its first words are on the command's line), and a
        // long description ends its first line with a full stop.
        let words = |t: &str| -> Vec<String> {
            t.split_whitespace()
                .map(|w| w.trim_end_matches('.').to_owned())
                .collect()
        };
        let listed = words(entry);
        assert!(
            words(first).starts_with(&listed),
            "`mcpsum {} --help` opens with {first:?}, its parent lists {entry:?}",
            path.join(" ")
        );
    }
}

#[test]
fn man_pages_cover_every_command_and_render() {
    let w = World::new();
    let dir = w.path().join("man");
    w.run(&["man", "--out", &dir.display().to_string()])
        .code(0)
        .stderr_has(&["mcpsum.1", "mcpsum-verify.1"]);
    let mut pages: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    let mut expected: Vec<String> = command_paths(&w)
        .iter()
        .map(|p| {
            let mut parts = vec!["mcpsum".to_owned()];
            parts.extend(p.iter().cloned());
            format!("{}.1", parts.join("-"))
        })
        .collect();
    expected.sort();
    assert_eq!(pages, expected);

    // `mcpsum man` alone prints the top page.
    let top = w.run(&["man"]);
    top.code(0);
    assert_eq!(
        top.stdout,
        std::fs::read_to_string(dir.join("mcpsum.1")).unwrap()
    );

    let Some(groff) = shell("groff") else { return };
    for page in &pages {
        let path = dir.join(page).display().to_string();
        // `-ww`: every warning; `-z`: no output. A clean page warns about nothing.
        let check = run_shell(&groff, &["-man", "-ww", "-z", &path]);
        check.code(0);
        assert_eq!(check.stderr, "", "{page}");
    }
    let r = run_shell(
        &groff,
        &[
            "-man",
            "-Tutf8",
            "-rLL=200n",
            "-P",
            "-cbou",
            &dir.join("mcpsum-verify.1").display().to_string(),
        ],
    );
    r.code(0).stdout_has(&[
        "NAME",
        "mcpsum-verify - Compare each server's live surface with the lockfile",
        "SYNOPSIS",
        "--format",
        "sarif",
        "EXIT STATUS",
        "EXAMPLES",
    ]);
    // Each example stays on its own line.
    let lines: Vec<&str> = r.stdout.lines().map(str::trim).collect();
    for example in [
        "mcpsum verify",
        "mcpsum verify --name time --strict --json",
        "mcpsum verify --format github    # annotations in a GitHub Actions job",
    ] {
        assert!(lines.contains(&example), "{example:?} in\n{}", r.stdout);
    }
}
