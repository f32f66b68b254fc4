//! Whether a salvaged answer may replace the summary: the parser takes what
//! it can from any answer, and these checks decide if what it took is a
//! summary at all.
//!
//! The parser is lenient on purpose (a heading written as `## Key Facts` is
//! still a heading), so an answer of unrelated JSON, a bare
//! `{"key_decisions": [...]}` or three sections of `(none)` parse without an
//! error. Committing such an answer replaces a summary that had content
//! with nothing, and does so as a success. A rejected answer is instead a
//! retryable failure of the summarizer, and the compaction falls back to
//! the extractive summarizer when the retries are used up.
//!
//! The rules are about the shape of the answer, never about one corpus:
//! - at least one section heading of the answer's format is there (an
//!   answer in the other format has none, and is no summary either);
//! - at least one bullet says something: not a placeholder (`(none)`,
//!   `n/a`), not punctuation, not a line copied from our own instructions
//!   (small models echo the answer template);
//! - a summary that had content is never replaced by an empty one;
//! - the bullets are not mostly repeats of each other (a model stuck in a
//!   loop writes the same line until its output limit);
//! - the answer was not cut off by the output limit (the caller knows the
//!   stop reason and reports it as [`Rejection::Truncated`]).

use std::collections::HashSet;
use std::sync::LazyLock;

use super::{is_placeholder, ParseError, ParseProblem, Parsed};
use crate::prompt::{
    HANDOFF9_ROLLUP_SYSTEM_PROMPT, HANDOFF9_SYSTEM_PROMPT, MEMORY_BLOCK_SYSTEM_PROMPT,
    ROLLUP_SYSTEM_PROMPT, SYSTEM_PROMPT,
};
use crate::summary::{Section, Summary};

/// Why an answer is not used. The `Display` never quotes the answer, so it
/// may be logged and stored as the run's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// Neither a section nor a state delta could be found.
    #[error("nothing usable in the answer: no summary section and no state delta")]
    Unparseable,
    /// None of the format's sections is there (KEY FACTS, CONVERSATION
    /// FLOW, OPEN THREADS, or the nine hand-off sections): unrelated JSON, a
    /// bare state delta, an answer in the other format.
    #[error("none of the sections of the summary format is in the answer")]
    NoSections,
    /// No bullet says anything: placeholders such as `(none)`, punctuation,
    /// or lines of the instructions echoed back.
    #[error("no section has content: every bullet is empty, a placeholder such as (none), or an echo of the instructions")]
    Empty,
    /// As [`Rejection::Empty`], over a summary that had content.
    #[error("the answer would replace a summary of {previous_bullets} bullets with an empty one")]
    Emptied { previous_bullets: usize },
    /// Most bullets repeat an earlier one.
    #[error("{repeated} of the answer's {bullets} bullets repeat an earlier one")]
    Repetitive { bullets: usize, repeated: usize },
    /// The model stopped at the output-token limit: the answer ends
    /// mid-way (reported by the caller, which knows the stop reason).
    #[error("the answer was cut off at the output limit of {max_output_tokens} tokens")]
    Truncated { max_output_tokens: u64 },
    /// The answer repeats the prompt's own input: its tags or the
    /// transcript's message headers (`[#12 USER]`), which no summary holds.
    #[error("the answer echoes the prompt's input ({markers} of its tags or message headers) instead of summarizing it")]
    Echo { markers: usize },
}

impl Rejection {
    /// Every value of [`Rejection::label`].
    pub const LABELS: [&'static str; 7] = [
        "unparseable",
        "no_sections",
        "empty",
        "emptied",
        "repetitive",
        "truncated",
        "echo",
    ];

    /// A bounded name of the reason, for metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            Rejection::Unparseable => "unparseable",
            Rejection::NoSections => "no_sections",
            Rejection::Empty => "empty",
            Rejection::Emptied { .. } => "emptied",
            Rejection::Repetitive { .. } => "repetitive",
            Rejection::Truncated { .. } => "truncated",
            Rejection::Echo { .. } => "echo",
        }
    }
}

impl From<ParseError> for Rejection {
    fn from(error: ParseError) -> Self {
        match error {
            ParseError::Empty => Rejection::Empty,
            ParseError::NoSummary { .. } => Rejection::Unparseable,
        }
    }
}

/// Below this many bullets, repeats are not judged (a short answer may
/// repeat a point across sections).
const REPETITION_MIN_BULLETS: usize = 6;

/// An echoed instruction is at least this long once normalized (shorter
/// lines of the prompt, "the next step", can be real content).
const ECHO_MIN_CHARS: usize = 24;

/// Checks a compaction or rollup answer. `previous` is the summary the
/// answer replaces (the summary so far for a compaction, the summary being
/// rewritten for a rollup).
pub fn check(parsed: &Parsed, previous: Option<&Summary>) -> Result<(), Rejection> {
    let missing = parsed
        .problems
        .iter()
        .filter(|p| matches!(p, ParseProblem::MissingSection(_)))
        .count();
    if missing >= parsed.output.summary.format.sections().len() {
        return Err(Rejection::NoSections);
    }
    check_summary(&parsed.output.summary, previous)
}

/// Tags our prompts wrap their input in.
const PROMPT_TAGS: &[&str] = &[
    "<context-compaction-input>",
    "</context-compaction-input>",
    "<previous-summary>",
    "</previous-summary>",
    "<existing-workstream-state>",
    "</existing-workstream-state>",
    "<new-messages>",
    "</new-messages>",
    "<operator-instructions>",
];

/// Message headers of the transcript the prompt carries (`[#12 USER]`)
/// that one answer may mention before it counts as an echo.
const ECHO_MAX_HEADERS: usize = 2;

/// Whether the raw answer `text` repeats the prompt's input instead of
/// summarizing it: a small model at a low temperature may copy the prompt
/// back. Any of the prompt's own tags, or more than
/// [`ECHO_MAX_HEADERS`] transcript message headers, is an echo; a summary
/// that names one message (`#12`) is not.
pub fn echo(text: &str) -> Result<(), Rejection> {
    let tags = PROMPT_TAGS.iter().filter(|t| text.contains(*t)).count();
    let headers =
        text.match_indices("[#")
            .filter(|(at, _)| {
                let rest = &text[at + 2..];
                let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
                digits > 0
                    && rest[digits..].starts_with(' ')
                    && rest[digits + 1..].split(']').next().is_some_and(|role| {
                        matches!(role, "USER" | "ASSISTANT" | "TOOL" | "SYSTEM")
                    })
            })
            .count();
    let markers = tags + headers;
    if tags > 0 || headers > ECHO_MAX_HEADERS {
        Err(Rejection::Echo { markers })
    } else {
        Ok(())
    }
}

/// Checks the content of a summary that would replace `previous`.
pub fn check_summary(summary: &Summary, previous: Option<&Summary>) -> Result<(), Rejection> {
    let content: Vec<String> = bullets(summary)
        .filter(|b| has_content(b))
        .map(normalize)
        .collect();
    if content.is_empty() {
        let previous_bullets =
            previous.map_or(0, |p| bullets(p).filter(|b| has_content(b)).count());
        return Err(if previous_bullets > 0 {
            Rejection::Emptied { previous_bullets }
        } else {
            Rejection::Empty
        });
    }
    let distinct = content.iter().collect::<HashSet<_>>().len();
    let repeated = content.len() - distinct;
    if content.len() >= REPETITION_MIN_BULLETS && repeated * 2 > content.len() {
        return Err(Rejection::Repetitive {
            bullets: content.len(),
            repeated,
        });
    }
    Ok(())
}

/// Checks a memory-block answer (plain bullets) that would replace
/// `previous`.
pub fn check_memory_block(text: &str, previous: Option<&str>) -> Result<(), Rejection> {
    // A heading of the summary format (a model that answers in the wrong
    // format) is not content; the text after its colon may be.
    let lines = |t: &str| {
        t.lines()
            .map(|l| match super::any_heading(l) {
                Some((_, rest)) => rest,
                None => super::bullet(l).unwrap_or(l.trim()),
            })
            .filter(|l| has_content(l))
            .count()
    };
    if lines(text) > 0 {
        return Ok(());
    }
    match previous.map_or(0, lines) {
        0 => Err(Rejection::Empty),
        previous_bullets => Err(Rejection::Emptied { previous_bullets }),
    }
}

fn bullets(summary: &Summary) -> impl Iterator<Item = &str> {
    Section::ALL
        .into_iter()
        .flat_map(|s| summary.section(s).iter().map(String::as_str))
}

/// Whether a short text says anything: not a placeholder, and not
/// punctuation only. Used for state-delta items too.
pub(super) fn says_something(text: &str) -> bool {
    !is_placeholder(text) && text.chars().any(char::is_alphanumeric)
}

/// Whether a bullet is content: it says something, and is not a line of
/// our own instructions echoed back.
fn has_content(bullet: &str) -> bool {
    says_something(bullet) && !echoes_instructions(bullet)
}

/// Our prompts, normalized, to recognise an echo of them.
static INSTRUCTIONS: LazyLock<String> = LazyLock::new(|| {
    normalize(
        &[
            SYSTEM_PROMPT,
            ROLLUP_SYSTEM_PROMPT,
            HANDOFF9_SYSTEM_PROMPT,
            HANDOFF9_ROLLUP_SYSTEM_PROMPT,
            MEMORY_BLOCK_SYSTEM_PROMPT,
        ]
        .join("\n"),
    )
});

fn echoes_instructions(bullet: &str) -> bool {
    let n = normalize(bullet);
    n.len() >= ECHO_MIN_CHARS && INSTRUCTIONS.contains(&n)
}

/// Lower case, letters and digits only, single spaces: two bullets that
/// differ only in markup or punctuation are the same bullet.
fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{parse_memory_block, parse_output, parse_rollup};
    use super::*;
    use crate::summary::SummaryFormat;

    #[test]
    fn an_answer_that_echoes_the_prompt_is_rejected() {
        let echoed = "<context-compaction-input>\n<previous-summary>\n(none)\n</previous-summary>";
        assert!(matches!(echo(echoed), Err(Rejection::Echo { .. })));
        let transcript =
            "KEY FACTS:\n- [#1 USER]\nhi\n- [#2 ASSISTANT]\nhello\n- [#3 USER]\nfix it";
        assert_eq!(echo(transcript), Err(Rejection::Echo { markers: 3 }));
        assert_eq!(Rejection::Echo { markers: 3 }.label(), "echo");
        for fine in [
            "KEY FACTS:\n- the user chose SQLite (#12)\nCONVERSATION FLOW:\n- [#4 USER] asked for a fix",
            "KEY FACTS:\n- arrays are indexed as a[#i]\n",
        ] {
            assert_eq!(echo(fine), Ok(()), "{fine}");
        }
    }
    use proptest::prelude::*;

    fn summary(facts: &[&str], flow: &[&str], threads: &[&str]) -> Summary {
        let own = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect();
        Summary {
            key_facts: own(facts),
            conversation_flow: own(flow),
            open_threads: own(threads),
            ..Default::default()
        }
    }

    fn previous() -> Summary {
        summary(
            &["deploy target is eu-west-1", "retries capped at 5"],
            &["#3 user asked for the migration"],
            &["run the load test"],
        )
    }

    fn verdict(answer: &str, previous: Option<&Summary>) -> Result<(), Rejection> {
        check(&parse_output(answer)?, previous)
    }

    #[test]
    fn a_real_answer_is_accepted() {
        let answer = "KEY FACTS:\n- deploy target is eu-west-1\nCONVERSATION FLOW:\n- #4 user approved the plan\nOPEN THREADS:\n- (none)\nSTATE DELTA:\n{}";
        assert_eq!(verdict(answer, Some(&previous())), Ok(()));
        // One section with content is enough: the others may be empty.
        assert_eq!(verdict("KEY FACTS:\n- port 8443\n", None), Ok(()));
    }

    const HANDOFF: &str = "## 1. Primary Request and Intent\n- migrate billing to Postgres 16\n## 2. User Messages\n- #1 user: migrate billing\n## 3. Work Completed\n- (none)\n## 4. Errors and Fixes\n- (none)\n## 5. Key Technical Details\n- config in `billing/app.toml`\n## 6. Decisions Made\n- (none)\n## 7. Pending/Incomplete Work\n- run the load test\n## 8. Current State\n- (none)\n## 9. Recommended Next Step\n- run the load test\nSTATE DELTA:\n{}";

    fn verdict_as(
        answer: &str,
        format: SummaryFormat,
        previous: Option<&Summary>,
    ) -> Result<(), Rejection> {
        check(&super::super::parse_output_as(answer, format)?, previous)
    }

    #[test]
    fn a_handoff9_answer_is_accepted_in_its_format_only() {
        assert_eq!(
            verdict_as(HANDOFF, SummaryFormat::Handoff9, Some(&previous())),
            Ok(())
        );
        // An answer in the other format is no summary in the configured one:
        // it never replaces the summary, whichever way round.
        assert_eq!(
            verdict_as(HANDOFF, SummaryFormat::Sections, Some(&previous())),
            Err(Rejection::NoSections)
        );
        let sections =
            "KEY FACTS:\n- deploy target is eu-west-1\nOPEN THREADS:\n- load test\nSTATE DELTA:\n{}";
        assert_eq!(
            verdict_as(sections, SummaryFormat::Handoff9, Some(&previous())),
            Err(Rejection::NoSections)
        );
    }

    #[test]
    fn a_handoff9_answer_of_placeholders_never_empties_a_summary() {
        let none: String = Section::HANDOFF9
            .iter()
            .map(|s| format!("## {}. {}\n- (none)\n", s.number().unwrap(), s.heading()))
            .collect();
        let previous = previous().into_format(SummaryFormat::Handoff9);
        assert_eq!(
            verdict_as(&none, SummaryFormat::Handoff9, Some(&previous)),
            Err(Rejection::Emptied {
                previous_bullets: 4
            })
        );
        assert_eq!(
            verdict_as(&none, SummaryFormat::Handoff9, None),
            Err(Rejection::Empty)
        );
        // The template of the hand-off prompt echoed back is no content.
        let echoed = "## 1. Primary Request and Intent\n- what the user originally asked for, and how the requirements evolved\n## 9. Recommended Next Step\n- what the next agent should do first\n";
        assert_eq!(
            verdict_as(echoed, SummaryFormat::Handoff9, None),
            Err(Rejection::Empty)
        );
    }

    #[test]
    fn unrelated_json_is_rejected() {
        let answer = r#"{"status": "ok", "items": [1, 2, 3], "message": "done"}"#;
        assert_eq!(verdict(answer, None), Err(Rejection::NoSections));
    }

    #[test]
    fn a_fenced_delta_without_sections_is_rejected() {
        let answer =
            "```json\n{\"key_decisions\": [\"the\", \"and\", \"user\"], \"tasks\": []}\n```";
        // It parses (the delta is salvaged) …
        assert!(parse_output(answer).is_ok());
        // … but it is no summary.
        assert_eq!(
            verdict(answer, Some(&previous())),
            Err(Rejection::NoSections)
        );
    }

    #[test]
    fn all_sections_none_is_rejected_and_named_emptied_over_content() {
        let answer = "KEY FACTS:\n- (none)\nCONVERSATION FLOW:\n- (none)\nOPEN THREADS:\n- none\nSTATE DELTA:\n{}";
        assert_eq!(verdict(answer, None), Err(Rejection::Empty));
        assert_eq!(
            verdict(answer, Some(&previous())),
            Err(Rejection::Emptied {
                previous_bullets: 4
            })
        );
        assert_eq!(
            verdict(answer, Some(&Summary::default())),
            Err(Rejection::Empty)
        );
    }

    #[test]
    fn punctuation_and_echoed_instructions_are_not_content() {
        let answer = "KEY FACTS:\n- durable facts, decisions with their reasons, constraints, exact values\nCONVERSATION FLOW:\n- What happened, in order, citing message numbers like #42 where useful.\nOPEN THREADS:\n- ...\n- *\n";
        assert_eq!(verdict(answer, None), Err(Rejection::Empty));
        // A short line that happens to appear in the prompt is content.
        assert_eq!(verdict("OPEN THREADS:\n- the next step\n", None), Ok(()));
    }

    #[test]
    fn a_looping_answer_is_rejected() {
        let answer = format!(
            "KEY FACTS:\n{}CONVERSATION FLOW:\n- the user asked for a fix\n",
            "- The user is asking about the file.\n".repeat(12)
        );
        assert_eq!(
            verdict(&answer, None),
            Err(Rejection::Repetitive {
                bullets: 13,
                repeated: 11
            })
        );
        // A few repeats across sections are fine.
        let answer = "KEY FACTS:\n- ship on friday\n- db is postgres 16\nCONVERSATION FLOW:\n- ship on friday\n- #2 tests fixed\nOPEN THREADS:\n- ship on friday\n- check the cache\n";
        assert_eq!(verdict(answer, None), Ok(()));
    }

    #[test]
    fn nothing_usable_maps_to_unparseable() {
        assert_eq!(
            verdict("I cannot help with that.", None),
            Err(Rejection::Unparseable)
        );
    }

    #[test]
    fn a_rollup_must_keep_content() {
        let rolled = parse_rollup("KEY FACTS:\n- (none)\nCONVERSATION FLOW:\n- (none)\n").unwrap();
        assert_eq!(
            check(&rolled, Some(&previous())),
            Err(Rejection::Emptied {
                previous_bullets: 4
            })
        );
        let rolled = parse_rollup("KEY FACTS:\n- eu-west-1, retries 5\n").unwrap();
        assert_eq!(check(&rolled, Some(&previous())), Ok(()));
    }

    #[test]
    fn a_memory_block_must_keep_content() {
        let folded = parse_memory_block("- (none)").unwrap();
        assert_eq!(
            check_memory_block(&folded, Some("- likes tea\n- lives in Oslo")),
            Err(Rejection::Emptied {
                previous_bullets: 2
            })
        );
        assert_eq!(check_memory_block(&folded, None), Err(Rejection::Empty));
        assert_eq!(
            check_memory_block("KEY FACTS:\n- n/a\nOPEN THREADS: (none)", None),
            Err(Rejection::Empty)
        );
        assert_eq!(check_memory_block("- likes tea", None), Ok(()));
    }

    #[test]
    fn labels_are_bounded_and_the_display_quotes_nothing() {
        let all = [
            Rejection::Unparseable,
            Rejection::NoSections,
            Rejection::Empty,
            Rejection::Emptied {
                previous_bullets: 1,
            },
            Rejection::Repetitive {
                bullets: 6,
                repeated: 4,
            },
            Rejection::Truncated {
                max_output_tokens: 10,
            },
            Rejection::Echo { markers: 3 },
        ];
        for r in &all {
            assert!(Rejection::LABELS.contains(&r.label()), "{r:?}");
        }
        assert_eq!(all.len(), Rejection::LABELS.len());
        let secret = "I cannot help with the SECRET-PLAN";
        let r: Rejection = parse_output(secret).unwrap_err().into();
        assert!(!r.to_string().contains("SECRET"), "{r}");
    }

    fn bullet_text() -> impl Strategy<Value = String> {
        "[a-z][a-z0-9 ,'./`-]{4,60}[a-z0-9]"
    }

    proptest! {
        #[test]
        fn distinct_bullets_with_content_are_accepted(
            facts in proptest::collection::hash_set(bullet_text(), 1..8),
            flow in proptest::collection::hash_set(bullet_text(), 0..8),
        ) {
            let s = Summary {
                key_facts: facts.into_iter().collect(),
                conversation_flow: flow.into_iter().collect(),
                open_threads: Vec::new(),
                ..Default::default()
            };
            // Distinct after normalization too, or the repetition rule may
            // rightly apply.
            let normalized: HashSet<String> = bullets(&s).map(normalize).collect();
            prop_assume!(normalized.len() == bullets(&s).count());
            prop_assume!(bullets(&s).all(|b| !echoes_instructions(b)));
            let parsed = parse_output(&s.render()).unwrap();
            prop_assert_eq!(check(&parsed, Some(&previous())), Ok(()));
        }

        #[test]
        fn placeholders_alone_never_pass_and_never_empty_a_summary(
            placeholders in proptest::collection::vec(
                prop_oneof![Just("(none)"), Just("none"), Just("n/a"), Just("-"), Just("."), Just("*"), Just("nothing")],
                0..6,
            ),
        ) {
            let mut answer = String::from("KEY FACTS:\n");
            for p in &placeholders {
                answer.push_str("- ");
                answer.push_str(p);
                answer.push('\n');
            }
            answer.push_str("CONVERSATION FLOW:\n- (none)\nOPEN THREADS:\n");
            let parsed = parse_output(&answer).unwrap();
            prop_assert_eq!(
                check(&parsed, Some(&previous())),
                Err(Rejection::Emptied { previous_bullets: 4 })
            );
        }

        #[test]
        fn checking_never_panics(s in "(?s)[ -~\u{e9}\n{}\\[\\]\"#*:-]{0,300}") {
            if let Ok(parsed) = parse_output(&s) {
                let _ = check(&parsed, Some(&previous()));
            }
            let _ = check_memory_block(&s, Some(&s));
        }
    }
}
