//! The connections a command opens: the client app code uses, or the bare
//! queue for the operator's queue commands. Every command connects through
//! here, so a connection failure becomes the same [`Failure`] everywhere.

use compactor_producer::client::{ClientSettings, Compactor};
use compactor_producer::queue::Queue;

use crate::failure::Failure;

/// The client, as app code would connect it.
pub(crate) async fn client(settings: &ClientSettings) -> Result<Compactor, Failure> {
    Ok(Compactor::connect(settings).await?)
}

/// The queue alone (no database), for the queue and dead-letter commands.
pub(crate) async fn queue(settings: &ClientSettings) -> Result<Queue, Failure> {
    Ok(Queue::connect_with(&settings.redis, settings.queue.clone()).await?)
}
