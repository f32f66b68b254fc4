//! The extractive (offline) summarizer. (STUB)
