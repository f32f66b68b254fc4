//! Transcript extraction from messages as the chat backend stores them
//! (a JSON array of `Message`): deserializing never panics, messages
//! survive a serialize round trip, and extraction plus chunking keep their
//! invariants under three configurations (defaults; tiny budgets with every
//! tool allowed; zero budgets with no tool allowed).
#![no_main]

use compactor_fuzz::transcript_checks::{check_chunks, check_transcript};
use compactor_shared::transcript::{extract, ToolAllowList, TranscriptBudgets, TranscriptConfig};
use compactor_shared::{Message, Part};
use libfuzzer_sys::fuzz_target;

fn configs() -> [TranscriptConfig; 3] {
    let budgets = |user, assistant, tool_result, tool_input| TranscriptBudgets {
        user,
        assistant,
        tool_result,
        tool_input,
    };
    [
        TranscriptConfig::default(),
        TranscriptConfig {
            tools: ToolAllowList {
                names: vec![],
                prefixes: vec![String::new()],
            },
            budgets: budgets(10, 7, 5, 3),
        },
        TranscriptConfig {
            tools: ToolAllowList {
                names: vec![],
                prefixes: vec![],
            },
            budgets: budgets(0, 0, 0, 0),
        },
    ]
}

/// Serialized and read back, a message is the same message. Tool-call
/// inputs are compared by kind only: serde_json's default float parsing is
/// not guaranteed to round-trip the last bit.
fn check_round_trip(messages: &[Message]) {
    let json = serde_json::to_string(messages).expect("messages serialize");
    let back: Vec<Message> = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("serialized messages do not deserialize: {e}: {json}"));
    assert_eq!(back.len(), messages.len());
    for (a, b) in messages.iter().zip(&back) {
        assert_eq!((a.id, a.role, a.pinned), (b.id, b.role, b.pinned));
        assert_eq!(a.parts.len(), b.parts.len());
        for (p, q) in a.parts.iter().zip(&b.parts) {
            match (p, q) {
                (
                    Part::ToolCall {
                        call_id, tool_name, ..
                    },
                    Part::ToolCall {
                        call_id: c,
                        tool_name: t,
                        ..
                    },
                ) => assert_eq!((call_id, tool_name), (c, t)),
                _ => assert_eq!(p, q, "part changed in a JSON round trip"),
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(messages) = serde_json::from_slice::<Vec<Message>>(data) else {
        return;
    };
    check_round_trip(&messages);
    for config in configs() {
        let t = extract(&messages, &config);
        check_transcript(&messages, &config, &t);
        for max_chars in [0, 7, 64, 4_096] {
            check_chunks(&messages, &config, &t, max_chars, &[1, 0, 2]);
        }
    }
});
