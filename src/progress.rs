//! What `lock` and `verify` wait for, shown on a terminal while a server is slow to answer (a
//! first `uvx`/`npx` start downloads packages before the server says anything).
//!
//! One board per command holds a slot per server; the MCP client moves its slot through the
//! phases ([`Reporter`]), and one ticker task (a tokio interval, whatever the number of servers)
//! renders the board as a single updating line on stderr. Nothing is shown when stderr is not a
//! terminal or with `-q`, and nothing for a server that answers within [`SHOW_AFTER`]. The
//! writing itself is `output::status`, which the other stderr writers clear first.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::output;

/// A server that answers faster than this is never shown waiting (no flicker on fast starts).
pub const SHOW_AFTER: Duration = Duration::from_millis(500);

/// How often the line is redrawn (seconds and phases change at most this often).
const TICK: Duration = Duration::from_millis(200);

/// Where one server is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Started (or started again, after the era probe), no handshake answer yet.
    Starting,
    /// Reading a list: its kind (plural) and page, from 1.
    Listing(&'static str, usize),
    /// Finished, whatever the outcome.
    Done,
}

struct Slot {
    name: String,
    command: String,
    started: Instant,
    phase: Phase,
}

#[derive(Default)]
struct Board {
    slots: Vec<Slot>,
}

/// The progress display of one command. Dropping it stops the ticker and clears the line.
pub struct Progress {
    board: Option<Arc<Mutex<Board>>>,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

/// One server's handle on the board, carried by the MCP client's options.
#[derive(Clone)]
pub struct Reporter {
    board: Arc<Mutex<Board>>,
    index: usize,
}

impl std::fmt::Debug for Reporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reporter")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl Progress {
    /// A display that shows something only when stderr is a terminal and `-q` was not given.
    /// Must be called inside the tokio runtime.
    pub fn start() -> Self {
        if !output::status_enabled() {
            return Self {
                board: None,
                ticker: None,
            };
        }
        let board = Arc::new(Mutex::new(Board::default()));
        let shared = board.clone();
        let ticker = tokio::spawn(async move {
            let mut interval = tokio::time::interval(TICK);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                interval.tick().await;
                let text = shared
                    .lock()
                    .map(|b| b.render(Instant::now(), output::status_width()))
                    .unwrap_or_default();
                output::status(&text);
            }
        });
        Self {
            board: Some(board),
            ticker: Some(ticker),
        }
    }

    /// A slot for server `name` started with `command` (shown as the person would type it);
    /// `None` when nothing is displayed, so the client does no bookkeeping at all.
    pub fn server(&self, name: &str, command: &str) -> Option<Reporter> {
        let board = self.board.as_ref()?;
        let mut b = board.lock().ok()?;
        b.slots.push(Slot {
            name: crate::text::sanitize_line(name),
            command: crate::text::sanitize_line(command),
            started: Instant::now(),
            phase: Phase::Starting,
        });
        Some(Reporter {
            board: board.clone(),
            index: b.slots.len() - 1,
        })
    }

    /// Stops the ticker and clears the line (also done on drop).
    pub fn finish(&mut self) {
        if let Some(t) = self.ticker.take() {
            // On mcpsum's single-threaded runtime the ticker is not running while this runs,
            // so it never draws again after the line is cleared below.
            t.abort();
        }
        if self.board.take().is_some() {
            output::status("");
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Reporter {
    /// Moves this server to `phase`.
    pub fn set(&self, phase: Phase) {
        if let Ok(mut b) = self.board.lock()
            && let Some(slot) = b.slots.get_mut(self.index)
        {
            slot.phase = phase;
        }
    }
}

/// Moves an optional reporter (the client's options carry `None` off a terminal).
pub fn set(reporter: Option<&Reporter>, phase: Phase) {
    if let Some(r) = reporter {
        r.set(phase);
    }
}

impl Board {
    /// The line for `now`, at most `width` characters; empty when there is nothing to show.
    fn render(&self, now: Instant, width: usize) -> String {
        let pending: Vec<&Slot> = self
            .slots
            .iter()
            .filter(|s| s.phase != Phase::Done)
            .collect();
        let waited = |s: &Slot| now.saturating_duration_since(s.started);
        if pending.is_empty() || pending.iter().all(|s| waited(s) < SHOW_AFTER) {
            return String::new();
        }
        let line = if self.slots.len() == 1 {
            let s = pending[0];
            let secs = waited(s).as_secs();
            match s.phase {
                Phase::Listing(kind, page) => {
                    format!("{}: listing {}… {secs}s", s.name, listing(kind, page))
                }
                _ => {
                    // Shorten the command, not the seconds at the end.
                    let frame = format!("starting {} ()… {secs}s", s.name).chars().count();
                    let command =
                        crate::text::ellipsize(&s.command, width.saturating_sub(frame).max(8));
                    format!("starting {} ({command})… {secs}s", s.name)
                }
            }
        } else {
            let each: Vec<String> = pending
                .iter()
                .map(|s| {
                    let what = match s.phase {
                        Phase::Listing(kind, page) => format!("listing {}", listing(kind, page)),
                        _ => "starting".to_owned(),
                    };
                    format!("{} ({what}, {}s)", s.name, waited(s).as_secs())
                })
                .collect();
            format!(
                "waiting for {} of {} servers: {}",
                pending.len(),
                self.slots.len(),
                each.join(", ")
            )
        };
        // Cut so that the line never wraps: a wrapped line cannot be redrawn in place.
        crate::text::ellipsize(&line, width)
    }
}

fn listing(kind: &str, page: usize) -> String {
    if page > 1 {
        format!("{kind}, page {page}")
    } else {
        kind.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn board(slots: &[(&str, Phase, u64)], now: Instant) -> Board {
        Board {
            slots: slots
                .iter()
                .map(|(name, phase, ms)| Slot {
                    name: (*name).to_owned(),
                    command: format!("uvx mcp-server-{name}"),
                    started: now - Duration::from_millis(*ms),
                    phase: *phase,
                })
                .collect(),
        }
    }

    #[test]
    fn one_server_shows_its_command_then_its_pages() {
        let now = Instant::now();
        let b = board(&[("time", Phase::Starting, 3_200)], now);
        assert_eq!(
            b.render(now, 100),
            "starting time (uvx mcp-server-time)… 3s"
        );
        assert_eq!(b.render(now, 34), "starting time (uvx mcp-serve…)… 3s");
        let b = board(&[("time", Phase::Listing("tools", 2), 5_000)], now);
        assert_eq!(b.render(now, 100), "time: listing tools, page 2… 5s");
        let b = board(&[("time", Phase::Listing("prompts", 1), 5_000)], now);
        assert_eq!(b.render(now, 100), "time: listing prompts… 5s");
    }

    #[test]
    fn nothing_before_the_threshold_or_when_done() {
        let now = Instant::now();
        assert_eq!(
            board(&[("t", Phase::Starting, 100)], now).render(now, 80),
            ""
        );
        assert_eq!(board(&[("t", Phase::Done, 9_000)], now).render(now, 80), "");
        assert_eq!(board(&[], now).render(now, 80), "");
    }

    #[test]
    fn several_servers_share_one_line_that_fits_the_terminal() {
        let now = Instant::now();
        let b = board(
            &[
                ("a", Phase::Done, 4_000),
                ("b", Phase::Starting, 4_000),
                ("c", Phase::Listing("tools", 3), 1_000),
            ],
            now,
        );
        assert_eq!(
            b.render(now, 100),
            "waiting for 2 of 3 servers: b (starting, 4s), c (listing tools, page 3, 1s)"
        );
        let cut = b.render(now, 30);
        assert_eq!(cut, "waiting for 2 of 3 servers: b…");
        assert_eq!(cut.chars().count(), 30);
    }
}
