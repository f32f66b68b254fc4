//! LLM-output parsing: whatever a summarizer answers, the parser returns
//! (never panics), and what it salvages is bounded by the answer itself.
#![no_main]

use compactor_fuzz::parse_checks::{check_memory_block, check_parsed, check_rollup_matches_output};
use compactor_shared::parse::{parse_memory_block, parse_output, parse_rollup};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Lossy, so every byte string is an answer (models do emit U+FFFD).
    let text = String::from_utf8_lossy(data);
    let output = parse_output(&text);
    let rollup = parse_rollup(&text);
    check_rollup_matches_output(&output, &rollup);
    check_parsed(&text, output, true);
    check_parsed(&text, rollup, false);
    check_memory_block(&text, parse_memory_block(&text));
});
