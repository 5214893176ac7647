//! Background work gives way to the user (issue 58): a recap or a meeting
//! note takes the local model for half a minute on an idle machine and for
//! minutes on a busy one (it runs at nice 10), and a question asked meanwhile
//! used to wait for all of it, since both run in this worker.
//!
//! Now a local generation no one waits for (`generate_in_background`) may
//! give way: while it runs, the llm worker asks between pieces of its prompt
//! and between tokens (`GenerateRequest::give_way`), and the question moves
//! this worker's waiting commands into its held ones (`inbox.rs`), in order,
//! saying yes when one of them is someone waiting (`AgentCommand::waits_for_someone`: a
//! question, the quick prompt opening, an app's completion, a draft, shutting
//! down). The generation stops
//! (`EngineError::GaveWay`); the held commands run (`serve_held`) except
//! other background work and what drives or cancels operations (a decision
//! on a call, Continue, Stop), which keep their place: the work that gave way
//! may be a step of an operation, which must not be driven from inside
//! itself. Then the generation is asked
//! again, and the engine's prefix cache still holds the pieces it read.
//!
//! The run loop takes held commands before its channel, so nothing is
//! reordered but a question before the background work it interrupted.
//! While held commands run, nothing gives way again (a recap asked by the
//! question runs to its end), and at most 16 commands are held: beyond
//! that they wait in the channel, whose bound the senders see as before.
//! Background summaries (`summarise_pending`) give way too, and are simply
//! left for a later idle moment.

use std::collections::VecDeque;

use super::AgentCommand;
use super::worker::AgentWorker;
use crate::llm::{EngineError, GenerateRequest, Generation, GiveWay, LocalBrain};
use crate::runtime::{WorkerContext, WorkerName};

impl AgentCommand {
    /// Someone is waiting for this one: background work gives way to it.
    pub fn waits_for_someone(&self) -> bool {
        matches!(
            self,
            AgentCommand::Chat(_)
                | AgentCommand::Prepare
                | AgentCommand::DraftFlow { .. }
                | AgentCommand::DraftApp { .. }
                | AgentCommand::AppComplete { .. }
                | AgentCommand::Shutdown
        )
    }

    /// Background work of its own, or what drives or cancels operations (the
    /// work that gave way may be an operation's step, not to be driven from
    /// inside itself), or a fault for tests: it keeps its place behind the
    /// work that gave way instead of running inside it.
    fn runs_after(&self) -> bool {
        matches!(
            self,
            AgentCommand::Summarise { .. }
                | AgentCommand::Recap { .. }
                | AgentCommand::MeetingNote { .. }
                | AgentCommand::AutomationStep(_)
                | AgentCommand::Resume(_)
                | AgentCommand::Decide { .. }
                | AgentCommand::DecideAs { .. }
                | AgentCommand::Continue { .. }
                | AgentCommand::CancelWaiting
                | AgentCommand::CancelOperation(_)
                | AgentCommand::InjectPanic
        )
    }
}

impl<B: LocalBrain> AgentWorker<B> {
    /// One local generation no one waits for, at low priority, giving way to
    /// whoever comes to wait (module docs) and taken up again after them.
    pub(super) fn generate_in_background(&mut self, mut request: GenerateRequest) -> Result<Generation, EngineError> {
        request.background = true;
        loop {
            request.give_way = self.give_way();
            let epoch = self.stop_epoch.load(std::sync::atomic::Ordering::SeqCst);
            match self.brain.generate(request.clone(), epoch, &mut |_| {}) {
                Err(EngineError::GaveWay) => {
                    tracing::info!("background work gave way to someone waiting");
                    if !self.serve_held() {
                        return Err(EngineError::Generation("cowork is stopping".into()));
                    }
                }
                done => return done,
            }
        }
    }

    /// What a background generation asks: whether a held command waits for someone.
    pub(super) fn give_way(&self) -> Option<GiveWay> {
        self.inbox.give_way(AgentCommand::waits_for_someone)
    }

    /// Runs the held commands someone waits for (and the quick ones), keeping
    /// background work and everything from Shutdown on held, in order. False
    /// when cowork is stopping.
    fn serve_held(&mut self) -> bool {
        let ctx = WorkerContext::new(WorkerName::Agent, &self.sink);
        let mut kept = VecDeque::new();
        let mut stopping = false;
        self.inbox.set_serving(true);
        while let Some(command) = self.inbox.next_held() {
            if matches!(command, AgentCommand::Shutdown) {
                stopping = true;
            }
            if stopping || command.runs_after() {
                kept.push_back(command);
                continue;
            }
            self.handle(command, &ctx);
        }
        self.inbox.set_serving(false);
        self.inbox.hold_first(kept);
        !stopping
    }
}
