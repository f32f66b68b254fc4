//! Planted-fact survival: a generated 2,000-message coding conversation
//! with planted paths, commands, ids, URLs, error codes and numbers is
//! compacted 10 times in a row by the extractive summarizer through the
//! pipeline the worker runs (`compactor_shared::pipeline::compact`), and
//! the context is built as the chat path builds it.
//! At least 95 % of the planted values must be in the built context, and
//! the summary must never grow past its budget.
//!
//! The conversation also carries realistic noise — recurring files and
//! commands, and a unique build duration every tenth turn — so the evidence's
//! budget and choice are exercised, not bypassed.

use compactor_shared::config::EngineConfig;
use compactor_shared::context::{self, ContextConfig, ContextInput};
use compactor_shared::pipeline;
use compactor_shared::prompt::summary_output_budget;
use compactor_shared::transcript::{ToolAllowList, TranscriptConfig};
use compactor_shared::{
    CharEstimator, Message, Part, Role, Summary, TokenEstimator, WorkstreamState,
};

/// Tiny deterministic PRNG (xorshift64*), so the conversation is the same
/// on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

const COMMON_FILES: &[&str] = &[
    "src/main.rs",
    "src/lib.rs",
    "src/config.rs",
    "Cargo.toml",
    "README.md",
    "src/db/mod.rs",
    "src/http/routes.rs",
    "tests/api.rs",
];
const COMMON_COMMANDS: &[&str] = &[
    "cargo test",
    "cargo build --release",
    "git status",
    "cargo clippy",
];

/// The planted values: (what to look for in the context, sentence planting it).
fn planted() -> Vec<(String, String)> {
    let mut v = Vec::new();
    for i in 0..12 {
        let path = format!("services/billing/src/invoice_{i:02}_handler.rs");
        v.push((
            path.clone(),
            format!("The bug is in `{path}`, look at the rounding there."),
        ));
    }
    for i in 0..8 {
        let cmd = format!("cargo test -p billing --test roundtrip_{i} -- --nocapture");
        v.push((
            cmd.clone(),
            format!("Reproduce it with:\n```bash\n{cmd}\n```"),
        ));
    }
    for i in 0..8 {
        let id = format!("BILL-{}", 4100 + i * 7);
        v.push((
            id.clone(),
            format!("This is tracked as {id} in the tracker."),
        ));
    }
    for i in 0..6 {
        let url = format!("https://grafana.internal.example.com/d/billing-{i}/latency");
        v.push((
            url.clone(),
            format!("The dashboard is at {url} if you need it."),
        ));
    }
    for code in ["E0499", "E0502", "ECONNREFUSED", "E0277"] {
        v.push((
            code.to_string(),
            format!("The compiler said {code} on the last build."),
        ));
    }
    for (q, s) in [
        ("512 MB", "Keep the cache under 512 MB please."),
        ("250 ms", "The p99 budget for invoices is 250 ms."),
        ("99.95%", "Our SLO is 99.95% monthly."),
        ("45 minutes", "The migration took 45 minutes on staging."),
    ] {
        v.push((q.to_string(), s.to_string()));
    }
    v
}

/// Builds the 2,000-message conversation, planting one value every
/// `2000 / planted.len()` messages in user or assistant text.
fn conversation(planted: &[(String, String)]) -> Vec<Message> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut messages = Vec::with_capacity(2_000);
    let every = 2_000 / planted.len();
    let mut next_plant = 0usize;
    let mut turn = 0u64;
    while messages.len() < 2_000 {
        turn += 1;
        let id = |m: &Vec<Message>| m.len() as i64 + 1;
        let plant = if messages.len() >= next_plant * every && next_plant < planted.len() {
            next_plant += 1;
            Some(planted[next_plant - 1].1.clone())
        } else {
            None
        };
        let file = rng.pick(COMMON_FILES);
        let mut user =
            format!("Turn {turn}: can you check {file} and tell me whether the handler is right?");
        if let Some(p) = plant.as_ref().filter(|_| turn.is_multiple_of(2)) {
            user.push(' ');
            user.push_str(p);
        }
        messages.push(Message::text(id(&messages), Role::User, user));
        let call_id = format!("call-{turn}");
        let cmd = rng.pick(COMMON_COMMANDS);
        messages.push(Message::new(
            id(&messages),
            Role::Assistant,
            vec![
                Part::Reasoning {
                    text: "thinking about what to run".into(),
                },
                Part::ToolCall {
                    call_id: call_id.clone(),
                    tool_name: "bash".into(),
                    input: serde_json::json!({ "command": cmd }),
                },
            ],
        ));
        let output =
            "test result: ok. 42 passed; 0 failed\n".repeat(1 + (rng.next() % 200) as usize);
        messages.push(Message::new(
            id(&messages),
            Role::Tool,
            vec![Part::ToolResult {
                call_id,
                tool_name: "bash".into(),
                output,
                is_error: false,
                pruned: false,
            }],
        ));
        let mut answer =
            format!("I ran `{cmd}` and read {file}; the handler looks fine after the change.");
        if turn.is_multiple_of(10) {
            answer.push_str(&format!(" The build took {} s.", 30 + turn));
        }
        if let Some(p) = plant.as_ref().filter(|_| turn % 2 == 1) {
            answer.push(' ');
            answer.push_str(p);
        }
        messages.push(Message::text(id(&messages), Role::Assistant, answer));
    }
    messages.truncate(2_000);
    messages
}

/// Stored workstream, as the database will hold it.
#[derive(Default)]
struct Workstream {
    summary: Option<Summary>,
    state: WorkstreamState,
    summary_tokens: u64,
    /// Stored messages with their compacted flag.
    messages: Vec<(Message, bool)>,
}

impl Workstream {
    fn uncompacted(&self) -> Vec<Message> {
        self.messages
            .iter()
            .filter(|(_, c)| !c)
            .map(|(m, _)| m.clone())
            .collect()
    }

    /// One compaction through the pipeline the worker runs
    /// (`pipeline::compact`), then what the commit does: the summary and
    /// state stored, the compacted messages marked, pruned output stored.
    fn compact(&mut self, engine: &EngineConfig) {
        let e = CharEstimator::default();
        let live = self.uncompacted();
        let stored = pipeline::Workstream {
            summary: self.summary.clone(),
            state: self.state.clone(),
            summary_tokens: self.summary_tokens,
            uncompacted_tokens: live.iter().map(|m| e.message_tokens(m)).sum(),
            ..Default::default()
        };
        let mut pages = pipeline::InMemory::new(&live, 100);
        let mut summarizer = pipeline::Extractive::new(engine, &e);
        let outcome = pipeline::now_or_never(pipeline::compact(
            &stored,
            &pipeline::Request::default(),
            engine,
            &e,
            4_000,
            &mut pages,
            &mut summarizer,
        ))
        .expect("in memory: ready at once")
        .expect("the extractive summarizer cannot fail");
        let pipeline::Outcome::Compacted(c) = outcome else {
            panic!("something to compact")
        };
        self.summary = Some(c.summary);
        self.state = c.state;
        self.summary_tokens = c.summary_tokens;
        let keep: std::collections::HashSet<_> = c.keep.iter().copied().collect();
        for (m, compacted) in &mut self.messages {
            if m.id <= c.watermark && !keep.contains(&m.id) {
                *compacted = true;
            }
            if let Some(p) = c.pruned.iter().find(|p| p.id == m.id) {
                m.parts = p.parts.clone();
            }
        }
    }

    fn context_text(&self) -> String {
        let live = self.uncompacted();
        let built = context::build(
            &ContextInput {
                summary: self.summary.as_ref(),
                state: &self.state,
                memory_block_summary: None,
                memory_entries: &[],
                messages: &live,
                just_auto_compacted: true,
                context_window: 200_000,
                state_text: None,
            },
            &ContextConfig::default(),
            &CharEstimator::default(),
        );
        let mut text = String::new();
        for m in &built.messages {
            for p in &m.parts {
                match p {
                    Part::Text { text: t } => text.push_str(t),
                    Part::ToolCall { input, .. } => text.push_str(&input.to_string()),
                    Part::ToolResult { output, .. } => text.push_str(output),
                    _ => {}
                }
                text.push('\n');
            }
        }
        text
    }
}

#[test]
fn planted_values_survive_ten_compactions_and_the_summary_stays_in_budget() {
    let planted = planted();
    let all = conversation(&planted);
    assert_eq!(all.len(), 2_000);
    let budget = summary_output_budget(200_000);
    let e = CharEstimator::default();
    // The engine as configured by default, with the bash tool's output
    // shown to the summarizer.
    let engine = EngineConfig {
        transcript: TranscriptConfig {
            tools: ToolAllowList {
                names: vec!["bash".into()],
                prefixes: vec![],
            },
            ..Default::default()
        },
        ..EngineConfig::default()
    };

    let mut ws = Workstream::default();
    for (round, batch) in all.chunks(200).enumerate() {
        ws.messages
            .extend(batch.iter().cloned().map(|m| (m, false)));
        ws.compact(&engine);
        let tokens = ws.summary.as_ref().map_or(0, |s| s.tokens(&e));
        assert!(
            tokens <= budget,
            "round {round}: summary {tokens} tokens > budget {budget}"
        );
    }

    let context = ws.context_text();
    let missing: Vec<&str> = planted
        .iter()
        .map(|(v, _)| v.as_str())
        .filter(|v| !context.contains(v))
        .collect();
    let kept = planted.len() - missing.len();
    assert!(
        kept * 100 >= planted.len() * 95,
        "kept {kept}/{} planted values; missing: {missing:?}",
        planted.len()
    );
    // The reasoning text was never carried anywhere.
    assert!(!context.contains("thinking about what to run"));
}
