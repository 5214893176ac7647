//! The agent worker's held commands (`give_way`): commands taken from its own
//! channel, in order, while background work runs, so that the work can give
//! way to one someone waits for. Generic over the command, so that this file
//! names nothing of the worker.

use std::collections::VecDeque;
use std::sync::Arc;

use crossbeam_channel::Receiver;
use parking_lot::Mutex;

use crate::llm::GiveWay;

/// At most this many commands are held while background work gives way;
/// beyond that they wait in the channel, whose bound the senders see.
const HELD: usize = 16;

pub struct Inbox<C> {
    /// The worker's channel (set by its run loop; a worker driven directly,
    /// as in unit tests, never gives way).
    commands: Option<Receiver<C>>,
    /// Commands taken from the channel while background work ran, in order.
    held: Arc<Mutex<VecDeque<C>>>,
    /// Held commands are running: background work they start does not give way.
    serving: bool,
}

impl<C> Default for Inbox<C> {
    fn default() -> Self {
        Self { commands: None, held: Arc::default(), serving: false }
    }
}

impl<C: Send + 'static> Inbox<C> {
    pub fn attach(&mut self, commands: &Receiver<C>) {
        self.commands = Some(commands.clone());
    }

    /// The oldest held command: the run loop takes it before its channel.
    pub fn next_held(&self) -> Option<C> {
        self.held.lock().pop_front()
    }

    /// Puts `kept` back before whatever is held, in its order.
    pub fn hold_first(&self, kept: VecDeque<C>) {
        let mut held = self.held.lock();
        for command in kept.into_iter().rev() {
            held.push_front(command);
        }
    }

    /// Held commands are running (or no longer): nothing gives way meanwhile.
    pub fn set_serving(&mut self, serving: bool) {
        self.serving = serving;
    }

    /// What a background generation asks: moves the channel's commands into
    /// the held ones and says whether one of them `waits` (someone waits for
    /// it). None where it cannot give way (no channel, or held commands running).
    pub fn give_way(&self, waits: fn(&C) -> bool) -> Option<GiveWay> {
        if self.serving {
            return None;
        }
        let (commands, held) = (self.commands.clone()?, self.held.clone());
        Some(GiveWay::new(move || {
            let mut held = held.lock();
            while held.len() < HELD {
                match commands.try_recv() {
                    Ok(command) => held.push_back(command),
                    Err(_) => break,
                }
            }
            held.iter().any(waits)
        }))
    }
}
