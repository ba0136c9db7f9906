//! A `lock` killed (SIGKILL) at random moments never leaves a truncated or half-written
//! `mcp.lock`: the file is always the old bytes or a complete, valid new file. Temporary files
//! a killed run leaves (`.mcp.lock.*.tmp`) are ignored by later runs.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{World, temp_leftovers};

/// xorshift64*: a seeded, dependency-free generator, so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

const SEED: u64 = 0x6d63_7073_756d_2026;
const ITERATIONS: usize = 30;

#[test]
fn killed_lock_never_leaves_a_torn_lockfile() {
    let w = World::new();
    // A large neighbour entry makes reading, validating and writing the file take a while, so
    // kills land in every phase, including the write.
    let bulk = w.scenario("bulk", &json!({"generateTools": 150, "pageSize": 50}));
    w.lock_fake("bulk", &bulk, &[]).code(0);

    let victim = |i: usize| {
        json!({"era": "modern", "generateTools": 30, "pageSize": 2,
               "tools": [{"name": "marker", "description": format!("iteration {i}"),
                          "inputSchema": {"type": "object"}}]})
    };
    let s = w.scenario("victim", &victim(0));
    w.lock_fake("victim", &s, &[]).code(0);
    // Calibrate on the operation each iteration runs (a re-lock): the median of three.
    let mut runs: Vec<Duration> = (0..3)
        .map(|_| {
            let started = Instant::now();
            w.run(&["lock", "--name", "victim"]).code(0);
            started.elapsed()
        })
        .collect();
    runs.sort();
    let full = runs[1];
    let window_us = u64::try_from(full.as_micros()).unwrap() * 13 / 10;

    let mut rng = Rng(SEED);
    let mut old = w.lock_bytes();
    let (mut kept_old, mut got_new, mut finished, mut during_write) = (0, 0, 0, 0);
    for i in 1..=ITERATIONS {
        w.scenario("victim", &victim(i));
        let earlier = temp_leftovers(w.path());
        let delay = Duration::from_micros(rng.next() % window_us.max(1));
        let mut child = w
            .cmd()
            .args(["lock", "--name", "victim"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        if i % 2 == 0 {
            // Anywhere in the run.
            std::thread::sleep(delay);
        } else {
            // Aimed at the write: kill as soon as the temporary file shows up (or at the random
            // moment, if it is never seen).
            let started = Instant::now();
            while started.elapsed() < delay * 2 && child.try_wait().unwrap().is_none() {
                if temp_leftovers(w.path())
                    .iter()
                    .any(|t| !earlier.contains(t))
                {
                    during_write += 1;
                    break;
                }
                std::thread::yield_now();
            }
        }
        let exited_before_kill = child.try_wait().unwrap().is_some();
        let _ = child.kill(); // SIGKILL
        let status = child.wait().unwrap();
        if exited_before_kill {
            finished += 1;
            assert_eq!(status.code(), Some(0), "iteration {i}");
        }

        let now = w.lock_bytes();
        if now == old {
            kept_old += 1;
            continue;
        }
        // A new file: complete, valid (every digest checked by `show`) and the new surface.
        let text = String::from_utf8(now.clone())
            .unwrap_or_else(|_| panic!("iteration {i} (delay {delay:?}): lockfile is not UTF-8"));
        assert!(
            text.ends_with("}\n"),
            "iteration {i} (delay {delay:?}): truncated lockfile ({} bytes)",
            now.len()
        );
        let show = w.run(&["show", "--json"]);
        show.code(0);
        let doc = show.json();
        assert_eq!(doc["servers"]["bulk"]["counts"]["tools"], 150);
        let file: serde_json::Value = serde_json::from_slice(&now).unwrap();
        let marker = file["servers"]["victim"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "marker")
            .unwrap()["description"]
            .clone();
        assert_eq!(marker, json!(format!("iteration {i}")), "iteration {i}");
        got_new += 1;
        old = now;
    }

    let leftovers = temp_leftovers(w.path());
    // Nothing but the lockfile, scenarios, and the temp files of killed writes.
    let strays: Vec<String> = std::fs::read_dir(w.path())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            !(n == "mcp.lock"
                || n == "home"
                || n == "state"
                || n.ends_with(".json")
                || (n.starts_with(".mcp.lock.") && n.ends_with(".tmp")))
        })
        .collect();
    assert!(strays.is_empty(), "stray files: {strays:?}");
    eprintln!(
        "crash test: {ITERATIONS} kills over a {full:?} lock (seed {SEED:#x}): \
         {kept_old} left the old file, {got_new} a new complete file ({finished} had already \
         finished, {during_write} killed once the temporary file existed); {} \
         `.mcp.lock.*.tmp` left behind: {leftovers:?}",
        leftovers.len()
    );

    // Later runs ignore the leftovers.
    w.scenario("victim", &victim(999));
    w.run(&["lock", "--name", "victim"]).code(0);
    w.run(&["verify", "--name", "victim"]).code(0);
    w.run(&["show"]).code(0);
}
