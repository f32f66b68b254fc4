//! Parsing of summarizer output. (STUB)
