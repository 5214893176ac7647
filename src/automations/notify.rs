//! Showing what flows send: a desktop notification through the freedesktop
//! Notifications service on the session bus. TODO(issue 16, part 4): every
//! notice goes through the notification gate (do-not-disturb, focus
//! deferral, caps, cooldowns, bundling) and lands in the persisted inbox.

use super::steps::{Notice, Notifier};

/// Straight to the desktop.
pub struct Desktop;

impl Notifier for Desktop {
    fn post(&self, notice: Notice) -> Result<i64, String> {
        crate::tools::desktop::notify(&notice.title, &notice.body).map(i64::from)
    }
}
