//! Property test through the real binary: whatever JSON a server lists (unicode, escapes,
//! numbers of every form, any key order), `lock` pins it, `show` validates it, `verify` finds it
//! clean and a re-lock reproduces the file byte for byte.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use crate::support::World;

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        prop::sample::select(vec![
            1e21,
            1e-7,
            -0.0,
            0.1,
            1.0,
            5e-324,
            1.7976931348623157e308
        ])
        .prop_map(|f| json!(f)),
        "\\PC{0,12}".prop_map(Value::String),
        prop::sample::select(vec![
            "\u{e000}",
            "\u{10000}",
            "\r\n",
            "\u{7}",
            "\"\\/",
            "\u{2028}"
        ])
        .prop_map(|s| Value::String(s.to_owned())),
        Just(Value::Null),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("\\PC{0,6}", inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn tools() -> impl Strategy<Value = Vec<Value>> {
    prop::collection::btree_map("[a-z_]{1,8}", ("\\PC{0,40}", value()), 1..5).prop_map(|m| {
        m.into_iter()
            .map(|(name, (description, extra))| {
                json!({"name": name, "description": description,
                       "inputSchema": {"type": "object", "properties": {"x": {"default": extra}}},
                       "_meta": {"extra": extra}})
            })
            .collect()
    })
}

proptest! {
    // Each case starts the fake server four times; keep the count small (PROPTEST_CASES raises
    // it for a longer local run).
    #![proptest_config(ProptestConfig { cases: 4, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_listed_surface_round_trips(tools in tools(), instructions in "\\PC{0,30}") {
        let w = World::new();
        let s = w.scenario("p", &json!({"tools": tools, "instructions": instructions}));
        w.lock_fake("p", &s, &[]).code(0);
        w.run(&["show", "--json"]).code(0);
        w.run(&["verify"]).code(0).stdout_has(&["ok p: clean"]);
        let before = w.lock_bytes();
        w.run(&["lock", "--name", "p"]).code(0);
        prop_assert_eq!(String::from_utf8(w.lock_bytes()).unwrap(), String::from_utf8(before).unwrap());
    }
}
