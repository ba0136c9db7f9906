//! The one user-facing error type and its exit codes.
//!
//! Every error says what failed, where (file, server, item) and what to do next. It renders as
//!
//! ```text
//! error: what failed
//!   caused by: a cause
//!
//! hint: the next step
//! ```

use std::fmt;

/// How a command ended, as a process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Exit {
    /// Success.
    Ok = 0,
    /// The check ran and said no (drift, a failed sandbox expectation).
    Problem = 1,
    /// mcpsum could not do its job (usage, invalid file, server failed to start, timeout).
    CannotRun = 2,
}

/// A user-facing error: a message, its causes, details (one line each, for errors that gather
/// several problems in one pass) and an optional hint.
#[derive(Debug)]
pub struct Error {
    exit: Exit,
    message: String,
    causes: Vec<String>,
    details: Vec<String>,
    hint: Option<String>,
}

/// Result alias for the `mcpsum` crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error meaning "could not run" (exit 2).
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            exit: Exit::CannotRun,
            message: message.into(),
            causes: Vec::new(),
            details: Vec::new(),
            hint: None,
        }
    }

    /// Adds a cause line.
    #[must_use]
    pub fn cause(mut self, cause: impl fmt::Display) -> Self {
        self.causes.push(cause.to_string());
        self
    }

    /// Adds detail lines (one problem each).
    #[must_use]
    pub fn details(mut self, details: impl IntoIterator<Item = String>) -> Self {
        self.details.extend(details);
        self
    }

    /// Sets the hint, the next step for the user.
    #[must_use]
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The detail lines (each problem of a lockfile that failed validation).
    pub fn detail_lines(&self) -> &[String] {
        &self.details
    }

    /// The cause lines, outermost first.
    pub fn cause_lines(&self) -> &[String] {
        &self.causes
    }

    /// The hint, if any.
    pub fn hint_text(&self) -> Option<&str> {
        self.hint.as_deref()
    }

    /// The process exit code this error maps to.
    pub fn exit(&self) -> Exit {
        self.exit
    }

    /// The message and its causes on one line, for logs and JSON output.
    pub fn one_line(&self) -> String {
        let mut s = self.message.clone();
        for c in &self.causes {
            s.push_str(": ");
            s.push_str(c);
        }
        s
    }
}

/// Each part of an error is one line: server- and file-controlled text inside it (an item's
/// name, a JSON-RPC error message) cannot start a line of its own that reads like mcpsum's.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = crate::text::sanitize_line;
        f.write_str(&line(&self.message))?;
        for d in &self.details {
            write!(f, "\n  {}", line(d))?;
        }
        for c in &self.causes {
            write!(f, "\n  caused by: {}", line(c))?;
        }
        if let Some(h) = &self.hint {
            write!(f, "\n\nhint: {}", line(h))?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}
