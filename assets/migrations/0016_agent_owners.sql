-- Approvals that cannot run twice (issue 38). Each open operation has one
-- owner: the process driving it ("pid:start time", so a reused pid is not
-- mistaken for it). Another process never resumes an operation whose owner
-- is alive; it may only decide one of its waiting calls, with a
-- compare-and-swap on the call's status, and the owner runs it. A process
-- adopts an operation whose owner is gone with a compare-and-swap too.
ALTER TABLE operations ADD COLUMN owner TEXT;
