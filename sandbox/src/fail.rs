//! A launch step that could not be done: the one line the launcher and the guard print before
//! they exit, `sandbox setup failed, server not started: <layer>: <cause>; <fix>`. Below both, so
//! neither imports the other for it.

/// A layer that could not be applied: printed as one line, then exit 126.
#[derive(Debug)]
pub(crate) struct Fail {
    pub(crate) layer: &'static str,
    pub(crate) cause: String,
    pub(crate) fix: String,
}

pub(crate) fn fail(layer: &'static str, cause: impl ToString, fix: impl Into<String>) -> Fail {
    Fail {
        layer,
        cause: cause.to_string(),
        fix: fix.into(),
    }
}

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}{}: {}; {}",
            crate::SETUP_FAILED_PREFIX,
            self.layer,
            self.cause,
            self.fix
        )
    }
}

/// The fix of a failure that only a bug in mcpsum can cause.
pub(crate) const BUG: &str = "this is a bug in mcpsum; please report it";
