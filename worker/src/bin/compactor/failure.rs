//! A command's failure: its exit code (for shells) and its error code (for
//! `--json`). The error codes are the admin HTTP API's
//! (`compactor_worker::http::error::ApiError::code`) wherever the failure is
//! the same one, so the CLI and HTTP speak one vocabulary; the CLI adds only
//! what HTTP cannot meet (see [`codes`]).

use std::process::ExitCode;

use compactor_producer::client::ClientError;
use compactor_producer::queue::QueueError;
use compactor_producer::reconcile::ReconcileError;
use compactor_producer::store::StoreError;
use compactor_worker::http::error::ApiError;

use crate::output::{Output, NO, UNAVAILABLE, USAGE};

/// Error codes of the CLI's own, for failures the HTTP API has no code for.
pub(crate) mod codes {
    /// A command-line argument is malformed (an idempotency key, a file
    /// that cannot be read, a missing entry).
    pub(crate) const INVALID_ARGUMENT: &str = "invalid_argument";
    /// The configuration cannot work (a setting out of range, a URL that
    /// is not one). The server reports its own as `internal`: there it is
    /// the operator's fault, not the caller's.
    pub(crate) const INVALID_CONFIG: &str = "invalid_config";
    /// The demo's workstream was not compacted in time: no worker ran it.
    pub(crate) const NO_WORKER: &str = "no_live_worker";
}

/// A failure, with the exit code and the error code it maps to.
pub(crate) struct Failure {
    exit: u8,
    code: &'static str,
    message: String,
}

impl Failure {
    pub(crate) fn new(exit: u8, code: &'static str, message: impl std::fmt::Display) -> Failure {
        Failure {
            exit,
            code,
            message: message.to_string(),
        }
    }

    /// Bad usage (exit 2) with an error code.
    pub(crate) fn usage(code: &'static str, message: impl std::fmt::Display) -> Failure {
        Failure::new(USAGE, code, message)
    }

    /// A malformed command-line argument (exit 2).
    pub(crate) fn argument(message: impl std::fmt::Display) -> Failure {
        Failure::usage(codes::INVALID_ARGUMENT, message)
    }

    /// An invalid workstream key (exit 2), HTTP's `invalid_key`.
    pub(crate) fn key(message: impl std::fmt::Display) -> Failure {
        Failure::usage("invalid_key", message)
    }

    /// The command's answer is "no" (exit 1).
    pub(crate) fn no(code: &'static str, message: impl std::fmt::Display) -> Failure {
        Failure::new(NO, code, message)
    }

    /// Reports the failure and returns its exit code.
    pub(crate) fn exit(self, out: Output) -> ExitCode {
        out.fail(self.exit, self.code, self.message)
    }
}

/// The exit code of a queue error that is not about the configuration:
/// "no" for a job that is not there (or over), usage for a bad page
/// request, else Redis failed.
fn queue_exit(e: &QueueError) -> u8 {
    match e {
        QueueError::JobNotFound { .. } | QueueError::JobFinished { .. } => NO,
        QueueError::InvalidCursor { .. } | QueueError::InvalidLimit { .. } => USAGE,
        _ => UNAVAILABLE,
    }
}

/// Whether a queue error is a configuration that can never work.
fn queue_config(e: &QueueError) -> bool {
    matches!(e, QueueError::Url { .. } | QueueError::Config(_))
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        let message = e.to_string();
        match e {
            ClientError::Config(_) => Failure::usage(codes::INVALID_CONFIG, message),
            ClientError::Queue(q) if queue_config(&q) => {
                Failure::usage(codes::INVALID_CONFIG, message)
            }
            e => {
                let exit = match &e {
                    ClientError::Queue(q) => queue_exit(q),
                    ClientError::UnknownWorkstream(_) => NO,
                    ClientError::InvalidMessage { .. }
                    | ClientError::ClientIdConflict { .. }
                    | ClientError::InvalidInstructions(_) => USAGE,
                    _ => UNAVAILABLE,
                };
                Failure::new(exit, ApiError::from(e).code(), message)
            }
        }
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        let message = e.to_string();
        Failure::new(UNAVAILABLE, ApiError::from(e).code(), message)
    }
}

impl From<QueueError> for Failure {
    fn from(e: QueueError) -> Failure {
        let message = e.to_string();
        if queue_config(&e) {
            // A URL or a queue setting that can never work: bad usage.
            return Failure::usage(codes::INVALID_CONFIG, message);
        }
        let exit = queue_exit(&e);
        Failure::new(exit, ApiError::from(e).code(), message)
    }
}

impl From<ReconcileError> for Failure {
    fn from(e: ReconcileError) -> Failure {
        match e {
            ReconcileError::Store(e) => e.into(),
            ReconcileError::Queue(e) => e.into(),
        }
    }
}
