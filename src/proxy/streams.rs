//! Subscriptions across the eras: a legacy client's `resources/subscribe` to a 2026-07-28
//! server becomes a listen stream, a 2026-07-28 client's `subscriptions/listen` to a legacy
//! server becomes `resources/subscribe` calls; and mcpsum's own listen stream, through which a
//! 2026-07-28 server announces list changes.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::{Core, IdMap, MAX_IN_FLIGHT, META_SUBSCRIPTION, Pending};
use crate::mcp::client::with_modern_meta;
use crate::mcp::codes;

/// How often mcpsum re-opens its own listen stream after the server ended it.
const MAX_LISTEN_REOPENS: u32 = 3;

/// The session's streams and subscriptions.
#[derive(Default)]
pub(super) struct Streams {
    /// Times mcpsum re-opened its own listen stream.
    pub(super) reopens: u32,
    /// Legacy `resources/subscribe` to a 2026-07-28 server: URI → the listen stream's id.
    pub(super) subscriptions: HashMap<String, u64>,
    /// A 2026-07-28 client's listen streams to a legacy server: its id and the URIs that
    /// mcpsum subscribed to for it.
    pub(super) legacy: Vec<(Value, Vec<String>)>,
    /// Server-side listen id → the client's listen id (2026-07-28 subscriptions).
    pub(super) ids: IdMap<Value>,
}

impl Core {
    pub(super) fn open_listen(&mut self) {
        let id = self.alloc_id();
        self.pending.insert(id, Pending::Listen);
        let params = with_modern_meta(
            json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true}}),
            &self.server_version,
            json!({}),
        );
        self.send_server(
            json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": params}),
        );
    }

    /// The server ended (`done`) or refused mcpsum's own listen stream: open it again, a few
    /// times, since without it mid-session drift of a 2026-07-28 server goes unseen.
    pub(super) fn listen_ended(&mut self, done: bool) {
        if done && self.streams.reopens < MAX_LISTEN_REOPENS {
            self.streams.reopens += 1;
            return self.open_listen();
        }
        self.note(
            "drift",
            json!({"class": "unwatched", "reason": "the server ended mcpsum's subscriptions/listen stream; mid-session drift is not detected until the next start"}),
        );
        self.warn(format!(
            "server `{}` ended mcpsum's subscriptions/listen stream; mid-session drift is not detected until the next start",
            self.name
        ));
    }

    /// A 2026-07-28 client's listen stream to a legacy server: mcpsum subscribes to each
    /// locked URI asked for and acknowledges the subset it honours; list changes are never
    /// honoured (the client's lists are the lock). The stream stays open until the client
    /// cancels it.
    pub(super) fn listen_by_subscribe(&mut self, id: &Value, params: Option<&Value>) {
        let can = self.entry.capabilities["resources"]["subscribe"] == json!(true);
        let uris: Vec<String> = params
            .and_then(|p| p.get("notifications"))
            .and_then(|n| n.get("resourceSubscriptions"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .filter(|u| can && self.uri_locked(u))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        if self.streams.legacy.len() >= MAX_IN_FLIGHT
            || self.pending.len() + uris.len() > MAX_IN_FLIGHT
        {
            return self.refuse(
                id,
                "subscriptions/listen",
                "",
                codes::INTERNAL,
                "too many subscriptions; retry later",
            );
        }
        for uri in &uris {
            let taken = self.streams.legacy.iter().any(|(_, us)| us.contains(uri));
            if !taken {
                let sid = self.alloc_id();
                self.pending.insert(sid, Pending::Internal);
                self.send_server(json!({"jsonrpc": "2.0", "id": sid, "method": "resources/subscribe", "params": {"uri": uri}}));
            }
        }
        let mut honoured = Map::new();
        if !uris.is_empty() {
            honoured.insert("resourceSubscriptions".into(), json!(uris));
        }
        self.streams.legacy.push((id.clone(), uris));
        self.note(
            "call",
            json!({"method": "subscriptions/listen", "decision": "allow", "ok": true, "outcome": "ok"}),
        );
        self.send_client(
            json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
            "params": {"_meta": {META_SUBSCRIPTION: id}, "notifications": honoured}}),
        );
    }

    /// The client cancelled a listen stream that stands on legacy subscriptions; `true` if so.
    pub(super) fn end_legacy_stream(&mut self, rid: &Value) -> bool {
        let Some(i) = self.streams.legacy.iter().position(|(id, _)| id == rid) else {
            return false;
        };
        let (_, uris) = self.streams.legacy.remove(i);
        for uri in uris {
            let still = self.streams.legacy.iter().any(|(_, us)| us.contains(&uri));
            if !still && self.pending.len() < MAX_IN_FLIGHT {
                let sid = self.alloc_id();
                self.pending.insert(sid, Pending::Internal);
                self.send_server(json!({"jsonrpc": "2.0", "id": sid, "method": "resources/unsubscribe", "params": {"uri": uri}}));
            }
        }
        true
    }

    pub(super) fn subscribe_by_listen(&mut self, id: &Value, method: &str, uri: String) {
        let existing = self.streams.subscriptions.get(&uri).copied();
        if method == "resources/unsubscribe" {
            if let Some(sid) = existing {
                self.streams.subscriptions.remove(&uri);
                self.pending.remove(&sid);
                let params =
                    with_modern_meta(json!({"requestId": sid}), &self.server_version, json!({}));
                self.send_server(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}));
            }
            self.note(
                "call",
                json!({"method": method, "item": uri, "decision": "allow", "ok": true, "outcome": "ok"}),
            );
            return self.reply(id, json!({}));
        }
        if existing.is_some() {
            return self.reply(id, json!({}));
        }
        if self.pending.len() >= MAX_IN_FLIGHT {
            return self.refuse(
                id,
                method,
                &uri,
                codes::INTERNAL,
                "too many requests in flight; retry later",
            );
        }
        let sid = self.alloc_id();
        self.streams.subscriptions.insert(uri.clone(), sid);
        self.pending.insert(
            sid,
            Pending::Subscription {
                uri: uri.clone(),
                client_id: Some(id.clone()),
            },
        );
        self.note(
            "call",
            json!({"method": method, "item": uri, "decision": "allow", "ok": true, "outcome": "ok"}),
        );
        let params = with_modern_meta(
            json!({"notifications": {"resourceSubscriptions": [uri]}}),
            &self.server_version,
            json!({}),
        );
        self.send_server(json!({"jsonrpc": "2.0", "id": sid, "method": "subscriptions/listen", "params": params}));
    }

    /// A subscription's stream ended or was refused: an unanswered subscribe gets the error.
    pub(super) fn subscription_failed(&mut self, uri: &str, client_id: Option<Value>, why: &str) {
        self.streams.subscriptions.remove(uri);
        if let Some(id) = client_id {
            let message = format!(
                "server `{}` refused the subscription to `{uri}`: {why}",
                self.name
            );
            self.reply_error(&id, codes::INTERNAL, &message, None);
        }
    }
}
