//! Helpers of the producer's integration tests that know its types, built
//! on `compactor-testkit`.

pub mod db;
pub mod queue;
