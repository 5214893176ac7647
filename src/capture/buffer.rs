//! The activity buffer between capture and the store: five slots, flushed on
//! every focus change (and on AFK changes, heartbeats and shutdown). Capture
//! never waits on the store: a flush hands over what fits with `try_send` and
//! keeps the rest; when all five slots are taken, the oldest row is dropped
//! and counted. A newer state of a row already waiting replaces it in place.

use std::collections::VecDeque;

use crossbeam_channel::{Sender, TrySendError};

use crate::store::StoreCommand;

pub const SLOTS: usize = 5;

#[derive(Default)]
pub struct ActivityBuffer {
    slots: VecDeque<StoreCommand>,
}

/// Rows that are newer states of the same row (same session or event id).
fn same_row(a: &StoreCommand, b: &StoreCommand) -> bool {
    a.row().is_some() && a.row() == b.row()
}

impl ActivityBuffer {
    /// Queues a row; returns how many rows were dropped to make room (0 or 1).
    pub fn push(&mut self, command: StoreCommand) -> u64 {
        if let Some(slot) = self.slots.iter_mut().find(|queued| same_row(queued, &command)) {
            *slot = command;
            return 0;
        }
        let dropped = if self.slots.len() == SLOTS {
            self.slots.pop_front();
            1
        } else {
            0
        };
        self.slots.push_back(command);
        dropped
    }

    /// Hands over what the store queue takes now, oldest first; the rest waits.
    /// Returns `(sent, dropped)`: rows are dropped only when the store is gone.
    pub fn flush(&mut self, store: &Sender<StoreCommand>) -> (usize, u64) {
        let mut sent = 0;
        while let Some(command) = self.slots.pop_front() {
            match store.try_send(command) {
                Ok(()) => sent += 1,
                Err(TrySendError::Full(command)) => {
                    self.slots.push_front(command);
                    break;
                }
                Err(TrySendError::Disconnected(_)) => {
                    let dropped = 1 + self.slots.len() as u64;
                    self.slots.clear();
                    return (sent, dropped);
                }
            }
        }
        (sent, 0)
    }

    /// Takes the oldest waiting row (for a last, waiting send at shutdown).
    pub fn pop(&mut self) -> Option<StoreCommand> {
        self.slots.pop_front()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::ActivitySession;

    fn session(id: i64, ended: Option<i64>) -> StoreCommand {
        crate::capture::db::session_write(ActivitySession {
            session_id: id,
            app: "XTerm".into(),
            title: format!("t{id}"),
            started_at_millis: id,
            ended_at_millis: ended,
            ..ActivitySession::default()
        })
    }

    #[test]
    fn a_stuck_store_costs_the_oldest_rows_counted_and_never_blocks() {
        let (store, queue) = crossbeam_channel::bounded(2);
        let mut buffer = ActivityBuffer::default();
        let mut dropped = 0;
        for id in 0..10 {
            dropped += buffer.push(session(id, None));
            // The close of the same session replaces its open row in place.
            dropped += buffer.push(session(id, Some(id + 1)));
            let started = std::time::Instant::now();
            buffer.flush(&store);
            assert!(started.elapsed() < std::time::Duration::from_millis(5), "flush waited on the store");
        }
        // Two went to the store, five wait, three were dropped (the oldest waiting ones).
        assert_eq!((queue.len(), buffer.len(), dropped), (2, SLOTS, 3));
        let delivered: Vec<i64> = queue.try_iter().map(|c| c.row().unwrap().1).collect();
        assert_eq!(delivered, vec![0, 1]);
        let (sent, lost) = buffer.flush(&store);
        assert_eq!((sent, lost), (2, 0));
        drop(queue);
        assert_eq!(buffer.flush(&store), (0, 3), "a store that is gone loses what waits, counted");
    }
}
