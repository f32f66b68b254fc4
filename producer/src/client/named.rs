//! Messages a caller names itself: which of them the workstream stores,
//! and where its head is. A caller that resends a whole history each turn
//! (the worker's proxy) learns from this what is new and where the history
//! leaves the stored one, with one query.

use std::collections::HashMap;

use compactor_shared::{EntityKey, MessageId};

use super::{ClientError, Compactor};

/// What the workstream stores of the client ids asked about.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Named {
    /// The workstream's head (its newest message on the current path);
    /// `None` for a workstream with no message, or none at all.
    pub head: Option<MessageId>,
    /// The stored ones among the ids asked about, with their message ids.
    pub stored: HashMap<String, MessageId>,
}

impl Compactor {
    /// Which of `client_ids` the workstream stores, and its head. A
    /// workstream not created yet stores none.
    pub async fn named_messages(
        &self,
        key: &EntityKey,
        client_ids: &[String],
    ) -> Result<Named, ClientError> {
        let Some(ws) = self.inner.store.workstream_lean(key).await? else {
            return Ok(Named::default());
        };
        let stored = if client_ids.is_empty() {
            HashMap::new()
        } else {
            self.inner
                .store
                .message_ids_by_client_id(ws.id, client_ids)
                .await?
        };
        Ok(Named {
            head: ws.head_message_id.or(ws.last_message_id),
            stored,
        })
    }
}
