//! Invariants of `compactor_shared::parse` on arbitrary answers.

use compactor_shared::parse::{ParseError, ParseProblem, Parsed};
use compactor_shared::summary::Section;
use compactor_shared::StateItem;

/// Longest excerpt the parser quotes: 80 chars and an ellipsis.
const MAX_EXCERPT_CHARS: usize = 81;

/// Checks one `parse_output` (`expect_delta`) or `parse_rollup` result.
pub fn check_parsed(text: &str, result: Result<Parsed, ParseError>, expect_delta: bool) {
    let parsed = match result {
        Ok(parsed) => parsed,
        Err(ParseError::Empty) => {
            assert!(text.trim().is_empty(), "Empty for a non-blank answer");
            return;
        }
        Err(ParseError::NoSummary { excerpt }) => {
            assert!(!text.trim().is_empty(), "NoSummary for a blank answer");
            check_excerpt(&excerpt);
            return;
        }
    };
    assert!(!text.trim().is_empty(), "a blank answer parsed");
    check_sections(text, &parsed);
    check_delta(text, &parsed);
    check_problems(text, &parsed.problems, expect_delta);
}

/// Bullets are trimmed, single-line, non-empty pieces of the answer's
/// lines: there are no more bullets than lines and no more bullet bytes
/// than answer bytes (a continuation line's joining space stands for the
/// line break it replaces).
fn check_sections(text: &str, parsed: &Parsed) {
    let summary = &parsed.output.summary;
    let mut count = 0;
    let mut bytes = 0;
    for section in Section::ALL {
        for bullet in summary.section(section) {
            assert!(!bullet.is_empty(), "empty bullet in {section:?}");
            assert_eq!(bullet.trim(), bullet, "untrimmed bullet in {section:?}");
            assert!(!bullet.contains('\n'), "multi-line bullet {bullet:?}");
            count += 1;
            bytes += bullet.len();
        }
    }
    assert!(
        count <= text.lines().count(),
        "{count} bullets from {} lines",
        text.lines().count()
    );
    assert!(
        bytes <= text.len(),
        "{bytes} bullet bytes from a {}-byte answer",
        text.len()
    );
}

/// Delta items are trimmed, have a text or an id, and are bounded by the
/// answer (a JSON number may print longer than written, `1e15` as
/// `1000000000000000.0`, hence the factor).
fn check_delta(text: &str, parsed: &Parsed) {
    let delta = &parsed.output.delta;
    let items: Vec<&StateItem> = compactor_shared::state::Field::ALL
        .into_iter()
        .flat_map(|f| delta.field(f).iter())
        .collect();
    assert!(
        items.len() <= text.len(),
        "{} delta items from {} bytes",
        items.len(),
        text.len()
    );
    let mut bytes = 0;
    for item in items {
        assert_eq!(item.text.trim(), item.text, "untrimmed item text");
        assert!(
            !item.text.is_empty() || item.id.is_some(),
            "item with neither text nor id: {item:?}"
        );
        for s in [&item.id, &item.status].into_iter().flatten() {
            assert!(!s.is_empty() && s.trim() == s, "bad id or status {s:?}");
        }
        bytes += item.text.len() + item.id.as_ref().map_or(0, String::len);
        bytes += item.status.as_ref().map_or(0, String::len);
    }
    assert!(
        bytes <= 3 * text.len(),
        "{bytes} delta bytes from a {}-byte answer",
        text.len()
    );
}

/// Problems are bounded, not repeated where they describe the whole
/// answer, and consistent with success: an answer with no section at all
/// only parses because its delta was valid JSON.
fn check_problems(text: &str, problems: &[ParseProblem], expect_delta: bool) {
    assert!(
        problems.len() <= text.len() + 4,
        "{} problems for {} bytes",
        problems.len(),
        text.len()
    );
    let mut missing_sections = 0;
    let mut delta_broken = false;
    let mut outside = 0;
    for problem in problems {
        match problem {
            ParseProblem::MissingSection(_) => missing_sections += 1,
            ParseProblem::MissingDelta => {
                assert!(expect_delta, "MissingDelta reported by parse_rollup");
                delta_broken = true;
            }
            ParseProblem::InvalidDeltaJson { error } => {
                check_excerpt(error);
                delta_broken = true;
            }
            ParseProblem::UnknownDeltaKey { key } => check_excerpt(key),
            ParseProblem::TextOutsideSections { excerpt } => {
                check_excerpt(excerpt);
                outside += 1;
            }
            ParseProblem::DeltaNotAnObject { .. }
            | ParseProblem::FieldWrongType { .. }
            | ParseProblem::ItemWrongType { .. }
            | ParseProblem::ItemWithoutText { .. } => {}
        }
    }
    assert!(missing_sections <= 3, "a section reported missing twice");
    assert!(outside <= 1, "TextOutsideSections reported twice");
    assert!(
        missing_sections < 3 || !delta_broken,
        "no section and no valid delta, yet parsed: {problems:?}"
    );
}

fn check_excerpt(excerpt: &str) {
    let chars = excerpt.chars().count();
    assert!(chars <= MAX_EXCERPT_CHARS, "{chars}-char excerpt");
}

/// `parse_rollup` is `parse_output` without the missing-delta complaint.
pub fn check_rollup_matches_output(
    output: &Result<Parsed, ParseError>,
    rollup: &Result<Parsed, ParseError>,
) {
    let expected = output.clone().map(|mut p| {
        p.problems.retain(|p| *p != ParseProblem::MissingDelta);
        p
    });
    assert_eq!(
        &expected, rollup,
        "parse_rollup disagrees with parse_output"
    );
}

/// A memory block is the trimmed, unfenced answer: non-empty and part of it.
pub fn check_memory_block(text: &str, result: Result<String, ParseError>) {
    match result {
        Ok(block) => {
            assert!(!block.is_empty(), "empty memory block");
            assert_eq!(block.trim(), block, "untrimmed memory block");
            assert!(text.contains(&block), "memory block not in the answer");
        }
        Err(ParseError::Empty) => {}
        Err(e) => panic!("memory block error other than Empty: {e:?}"),
    }
}
