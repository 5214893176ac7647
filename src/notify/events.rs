//! The notification inbox as the Apps panel shows it (`InboxItem`s, sent whole).

/// One notification as the inbox shows it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InboxItem {
    pub notification_id: i64,
    pub source: String,
    pub tier: String,
    pub title: String,
    pub body: String,
    /// pending, inbox, shown, accepted, opened, dismissed, expired, closed
    pub state: String,
    /// The gate's word on it, while it holds it.
    pub reason: Option<String>,
    pub created_at_millis: i64,
    /// It has something to accept (an approval, a proposal to mute, a call to listen to).
    pub can_accept: bool,
    /// Its Accept button's word ("Accept", "Listen").
    pub accept_label: String,
    /// When the desktop showed it (the gate's budget counts these).
    pub shown_at_millis: Option<i64>,
    /// Why it appeared.
    pub why: String,
}
