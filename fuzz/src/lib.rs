//! Invariant checks shared by the fuzz targets. Each check panics, with a
//! message saying which invariant broke, so libFuzzer records the input as a
//! crash.

pub mod parse_checks;
pub mod transcript_checks;
