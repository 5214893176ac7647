//! MPRIS over the D-Bus session bus: is any media player playing? Playing media
//! keeps a quiet user present (not AFK), as does a fullscreen active window
//! (which capture asks the desktop backend about).

use std::time::{Duration, Instant};

use zbus::blocking::Connection;
use zbus::blocking::connection::Builder;
use zbus::zvariant::OwnedValue;

const CALL_TIMEOUT: Duration = Duration::from_millis(300);
/// Without a session bus, how often to look for one again.
const RECONNECT: Duration = Duration::from_secs(30);

#[derive(Default)]
pub struct MediaProbe {
    conn: Option<Connection>,
    failed_at: Option<Instant>,
}

impl MediaProbe {
    fn connection(&mut self) -> Option<&Connection> {
        if self.conn.is_none() && self.failed_at.is_none_or(|at| at.elapsed() >= RECONNECT) {
            match Builder::session().and_then(|b| b.method_timeout(CALL_TIMEOUT).build()) {
                Ok(conn) => self.conn = Some(conn),
                Err(err) => {
                    tracing::debug!("media: no session bus: {err}");
                    self.failed_at = Some(Instant::now());
                }
            }
        }
        self.conn.as_ref()
    }

    /// The bus name of a player whose `PlaybackStatus` is `Playing`, if any.
    pub fn playing(&mut self) -> Option<String> {
        let conn = self.connection()?.clone();
        let names: Vec<String> = match conn
            .call_method(Some("org.freedesktop.DBus"), "/org/freedesktop/DBus", Some("org.freedesktop.DBus"), "ListNames", &())
            .and_then(|reply| reply.body().deserialize())
        {
            Ok(names) => names,
            Err(err) => {
                tracing::debug!("media: session bus lost: {err}");
                self.conn = None;
                self.failed_at = Some(Instant::now());
                return None;
            }
        };
        names.into_iter().filter(|n| n.starts_with("org.mpris.MediaPlayer2.")).find(|name| {
            conn.call_method(
                Some(name.as_str()),
                "/org/mpris/MediaPlayer2",
                Some("org.freedesktop.DBus.Properties"),
                "Get",
                &("org.mpris.MediaPlayer2.Player", "PlaybackStatus"),
            )
            .and_then(|reply| reply.body().deserialize::<OwnedValue>())
            .ok()
            .and_then(|value| String::try_from(value).ok())
            .is_some_and(|status| status == "Playing")
        })
    }
}
