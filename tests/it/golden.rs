//! The committed golden lockfile, `tests/fixtures/golden.mcp.lock`: its digests must never
//! change (lockfiles in the wild would break; a change needs a `lockfileVersion` decision), and
//! reading then writing it is byte-identical.
//!
//! Its commands name the fake server as `@REPO@/...`; the round-trip test substitutes the
//! repository path. The digests were cross-checked with an independent RFC 8785 implementation
//! (Python) when the fixture was made. The scenarios behind it are `golden-*.scenario.json`:
//! RFC 8785 number forms (`1e+21`, `1e-7`, `-0.0`, `1.0`), keys whose UTF-16 order differs from
//! their UTF-8 order (U+E000 vs U+10000), control characters and escapes.

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::{World, repo};

const GOLDEN_LEGACY_SURFACE: &str =
    "sha256:5f56e072763490029375588de0b72896888522186c72f9e555affe44d5e5ae4f";
const GOLDEN_MODERN_SURFACE: &str =
    "sha256:06baa0893b855ea4c6b76733ec4fae73de858473a0d33aa604c5a6b215919c74";

fn fixture() -> String {
    std::fs::read_to_string(repo().join("tests/fixtures/golden.mcp.lock")).unwrap()
}

/// The fixture with `@REPO@` replaced and the generator of this build, so a re-lock can run it.
fn runnable_fixture() -> String {
    let repo_json = serde_json::to_string(&repo().display().to_string()).unwrap();
    fixture()
        .replace("@REPO@", repo_json.trim_matches('"'))
        .replace(
            "\"generator\": \"mcpsum 0.1.0\"",
            &format!("\"generator\": \"mcpsum {}\"", env!("CARGO_PKG_VERSION")),
        )
}

#[test]
fn golden_digests_never_change() {
    let w = World::new();
    w.write_lock(fixture());
    let r = w.run(&["show", "--json"]);
    r.code(0);
    let doc = r.json();
    assert_eq!(doc["lockfileVersion"], 2);
    let surfaces: Vec<(String, String)> = doc["servers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(n, s)| (n.clone(), s["surfaceDigest"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(
        surfaces,
        [
            ("golden-legacy".to_owned(), GOLDEN_LEGACY_SURFACE.to_owned()),
            ("golden-modern".to_owned(), GOLDEN_MODERN_SURFACE.to_owned()),
        ]
    );
    // `show` recomputed every item digest and found them equal to the recorded ones; pin the
    // recorded ones as well, so a regenerated fixture is caught here too.
    let file: serde_json::Value = serde_json::from_str(&fixture()).unwrap();
    assert_eq!(
        file["servers"]["golden-legacy"]["digests"],
        json!({
            "surface": GOLDEN_LEGACY_SURFACE,
            "instructions": "sha256:b2b290057c997bf75dd87ee68591b4a74dd72ae434e59feea0614abd72af9c87",
            "tools": {
                "escapes": "sha256:966753fbe484ce544121042ad83d592c091dc0f5c5062d67afe3009f3df90765",
                "keys": "sha256:0e78c78c723b8636fd9d3278e71b3555497796802704ef7534d5a728f90ce578",
                "numbers": "sha256:0327fdffb9f7d554eb7250667f87c5afcd4601e9f2e9963b45ddf5c4cd840f77"
            },
            "prompts": {
                "greet": "sha256:a247b98893256facbda1d03e4dd6db5979d2c774b900560e8a3f257854e1f0fd"
            },
            "resources": {
                "golden://a": "sha256:73584929e3bf27c6accbb130c98bf15c3ac205fba2176e1d645ba2d0a0f4b92a",
                "golden://b": "sha256:cc6f58ffe8b30f0142dfda79ffa45b22b59318d70acd78cdb06f2880b76609ba"
            },
            "resourceTemplates": {
                "golden://item/{id}": "sha256:7d15b44abeeb930d787246cc5517d68623d4273600d48b3423aae62aea95051d"
            }
        })
    );
    assert_eq!(
        file["servers"]["golden-modern"]["digests"],
        json!({
            "surface": GOLDEN_MODERN_SURFACE,
            "instructions": null,
            "tools": {
                "search": "sha256:37532eb08ce22b49af42ff72513ffd38cd06d5444c71b5c9c8eefd436622f768"
            },
            "prompts": {},
            "resources": {},
            "resourceTemplates": {}
        })
    );
}

#[test]
fn golden_round_trip_is_byte_identical() {
    let w = World::new();
    let input = runnable_fixture();
    w.write_lock(&input);
    w.run(&["verify"])
        .code(0)
        .stdout_has(&["ok golden-legacy: clean", "ok golden-modern: clean"]);
    for name in ["golden-legacy", "golden-modern"] {
        w.run(&["lock", "--name", name])
            .code(0)
            .stderr_has(&["unchanged since the previous lock"]);
        let out = String::from_utf8(w.lock_bytes()).unwrap();
        assert_eq!(out, input, "re-lock of `{name}` changed the bytes");
    }
    // Locking a new entry leaves the golden entries' bytes as they were.
    let s = w.scenario("extra", &json!({}));
    w.lock_fake("zz-extra", &s, &[]).code(0);
    let out = String::from_utf8(w.lock_bytes()).unwrap();
    let golden_part = &input[..input.rfind("\n  }\n}").unwrap()];
    assert!(out.starts_with(golden_part), "golden entries disturbed");
}

#[test]
fn fixture_is_in_canonical_form() {
    // Two-space indentation, servers sorted, one trailing newline, no `\r`.
    let text = fixture();
    assert!(text.ends_with("}\n") && !text.ends_with("\n\n"));
    assert!(!text.contains('\r') && !text.contains('\t'));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut pretty = serde_json::to_string_pretty(&v).unwrap();
    pretty.push('\n');
    assert_eq!(pretty, text);
}
