//! What goes over the wire to the hook and back: the request the worker
//! sends ([`HookRequest`]) and the answer it accepts, parsed into
//! [`HookAnswer`] — one of four things, never a mix — or refused.

use compactor_shared::message::Role;
use compactor_shared::summary::SummaryFormat;
use serde::{Deserialize, Serialize};

/// Longest `instructions` accepted, in chars.
pub const MAX_INSTRUCTIONS_CHARS: usize = 4_000;
/// Most `context` lines accepted…
pub const MAX_CONTEXT_LINES: usize = 64;
/// …each at most this many chars.
pub const MAX_CONTEXT_LINE_CHARS: usize = 1_000;
/// Longest `replace` summary accepted, in chars.
pub const MAX_REPLACE_CHARS: usize = 200_000;

/// The JSON body POSTed to the hook before a compaction summarizes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HookRequest {
    pub workstream: Workstream,
    pub job_id: u64,
    pub attempt: u32,
    /// `auto`, `reactive`, `manual` or `follow_up`.
    pub trigger: String,
    /// Instructions the request itself carried (a manual one's).
    pub instructions: Option<String>,
    pub span: Span,
    /// The format the summary is written in (and a `replace` must be in).
    pub summary_format: SummaryFormat,
    /// The summary this compaction extends, rendered; `None` on the first.
    pub previous_summary: Option<String>,
    /// The span's messages, oldest first, text parts only, bounded by
    /// `hook.max_message_chars`.
    pub messages: Vec<SpanMessage>,
    /// Some message text was left out or cut to stay within the bound.
    pub messages_truncated: bool,
}

/// Whose workstream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Workstream {
    pub domain: String,
    pub entity_id: String,
}

/// The messages this compaction folds into the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Span {
    pub first_message_id: i64,
    pub last_message_id: i64,
    pub message_count: u64,
    /// Their estimated tokens.
    pub tokens: u64,
}

/// One message of the span, as the hook sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpanMessage {
    pub id: i64,
    pub role: Role,
    /// Its text parts, joined by new lines (tool calls and results left
    /// out); cut when over its share of the bound.
    pub text: String,
}

/// What the hook asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookAnswer {
    /// An empty answer (204, an empty body, `{}`): compact as usual.
    Proceed,
    /// Compact, with extra focus instructions for the summarizer (after a
    /// manual request's own) and extra context lines it must consider.
    Adjust {
        instructions: Option<String>,
        context: Vec<String>,
    },
    /// Use this summary instead of calling the summarizer.
    Replace(String),
    /// Do not compact this time.
    Skip,
}

/// Why an answer was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    #[error("not a hook answer: {0}")]
    Json(String),
    #[error("replace and skip cannot be combined with anything else")]
    Mixed,
    #[error("{field}: over {max} chars")]
    TooLong { field: &'static str, max: usize },
    #[error("context: more than {MAX_CONTEXT_LINES} lines")]
    TooManyLines,
    #[error("replace: empty")]
    EmptyReplacement,
}

/// The answer as written; every field optional, nothing else allowed.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    instructions: Option<String>,
    context: Option<Vec<String>>,
    replace: Option<String>,
    #[serde(default)]
    skip: bool,
}

impl HookAnswer {
    /// Parses a 2xx answer's body (empty: [`HookAnswer::Proceed`]).
    pub fn parse(body: &[u8]) -> Result<HookAnswer, AnswerError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(HookAnswer::Proceed);
        }
        let wire: Wire =
            serde_json::from_slice(body).map_err(|e| AnswerError::Json(e.to_string()))?;
        let instructions = wire
            .instructions
            .map(|i| i.trim().to_owned())
            .filter(|i| !i.is_empty());
        let context: Vec<String> = wire
            .context
            .unwrap_or_default()
            .into_iter()
            .map(|l| l.trim().to_owned())
            .filter(|l| !l.is_empty())
            .collect();
        let adjusts = instructions.is_some() || !context.is_empty();
        if wire.skip {
            if adjusts || wire.replace.is_some() {
                return Err(AnswerError::Mixed);
            }
            return Ok(HookAnswer::Skip);
        }
        if let Some(summary) = wire.replace {
            if adjusts {
                return Err(AnswerError::Mixed);
            }
            if summary.trim().is_empty() {
                return Err(AnswerError::EmptyReplacement);
            }
            over("replace", &summary, MAX_REPLACE_CHARS)?;
            return Ok(HookAnswer::Replace(summary));
        }
        if !adjusts {
            return Ok(HookAnswer::Proceed);
        }
        if let Some(i) = &instructions {
            over("instructions", i, MAX_INSTRUCTIONS_CHARS)?;
        }
        if context.len() > MAX_CONTEXT_LINES {
            return Err(AnswerError::TooManyLines);
        }
        for line in &context {
            over("context", line, MAX_CONTEXT_LINE_CHARS)?;
        }
        Ok(HookAnswer::Adjust {
            instructions,
            context,
        })
    }
}

fn over(field: &'static str, text: &str, max: usize) -> Result<(), AnswerError> {
    if text.chars().count() > max {
        return Err(AnswerError::TooLong { field, max });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_answers_proceed() {
        for body in [
            "",
            "  \n",
            "{}",
            r#"{"context": [" "], "instructions": ""}"#,
        ] {
            assert_eq!(
                HookAnswer::parse(body.as_bytes()).unwrap(),
                HookAnswer::Proceed
            );
        }
    }

    #[test]
    fn each_answer_parses_into_its_variant() {
        assert_eq!(
            HookAnswer::parse(br#"{"instructions": " keep the SKU ", "context": ["a", ""]}"#)
                .unwrap(),
            HookAnswer::Adjust {
                instructions: Some("keep the SKU".into()),
                context: vec!["a".into()],
            }
        );
        assert_eq!(
            HookAnswer::parse(br#"{"replace": "KEY FACTS:\n- x"}"#).unwrap(),
            HookAnswer::Replace("KEY FACTS:\n- x".into())
        );
        assert_eq!(
            HookAnswer::parse(br#"{"skip": true}"#).unwrap(),
            HookAnswer::Skip
        );
        assert_eq!(
            HookAnswer::parse(br#"{"skip": false}"#).unwrap(),
            HookAnswer::Proceed
        );
    }

    #[test]
    fn garbage_mixes_and_oversize_are_refused() {
        for body in [
            "not json",
            "[1, 2]",
            r#"{"skip": "yes"}"#,
            r#"{"action": "skip"}"#,
            r#"{"skip": true, "replace": "x"}"#,
            r#"{"replace": "x", "instructions": "y"}"#,
            r#"{"replace": "  "}"#,
        ] {
            assert!(HookAnswer::parse(body.as_bytes()).is_err(), "{body}");
        }
        let long = serde_json::json!({ "instructions": "x".repeat(MAX_INSTRUCTIONS_CHARS + 1) });
        assert!(HookAnswer::parse(long.to_string().as_bytes()).is_err());
        let many = serde_json::json!({ "context": vec!["x"; MAX_CONTEXT_LINES + 1] });
        assert!(HookAnswer::parse(many.to_string().as_bytes()).is_err());
    }
}
