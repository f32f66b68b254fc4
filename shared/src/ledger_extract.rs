//! Deterministic artifact extraction for the ledger. (STUB)

use crate::ledger::Artifact;
use crate::message::Message;

pub(crate) fn extract(messages: &[Message]) -> Vec<Artifact> {
    let _ = messages;
    unimplemented!("ledger extraction")
}
