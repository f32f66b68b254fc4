//! A summary as the timeline shows it: one collapsible `<details>` per
//! section, open for the sections the next reader acts on
//! ([`Section::expanded_by_default`], as CoWork's timeline does).
//!
//! A run stores the summary it wrote as rendered text; it is split back
//! into sections at the headings [`Summary::render`] writes (either
//! format), so runs written under another `[engine.summary] format` still
//! show by section.

use std::fmt::Write as _;

use compactor_shared::summary::Section;
use compactor_shared::Summary;

use super::html::esc;

/// One section of a rendered summary: its heading (`None` for text before
/// the first heading) and its lines, bullets without their `- `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SectionText {
    pub(super) section: Option<Section>,
    pub(super) lines: Vec<String>,
}

/// Splits a rendered summary at its section headings.
pub(super) fn split_rendered(text: &str) -> Vec<SectionText> {
    let headings: Vec<(String, Section)> = Section::ALL
        .iter()
        .map(|&s| (s.rendered_heading(), s))
        .collect();
    let mut out: Vec<SectionText> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_end();
        if let Some((_, section)) = headings.iter().find(|(h, _)| h == trimmed) {
            out.push(SectionText {
                section: Some(*section),
                lines: Vec::new(),
            });
            continue;
        }
        if trimmed.is_empty() {
            continue;
        }
        if out.is_empty() {
            out.push(SectionText {
                section: None,
                lines: Vec::new(),
            });
        }
        if let Some(current) = out.last_mut() {
            let bullet = trimmed.strip_prefix("- ").unwrap_or(trimmed);
            if bullet != "(none)" {
                current.lines.push(bullet.to_owned());
            }
        }
    }
    out
}

/// The sections of a stored (structured) summary.
pub(super) fn sections_of(summary: &Summary) -> Vec<SectionText> {
    summary
        .sections()
        .map(|(section, bullets)| SectionText {
            section: Some(section),
            lines: bullets.to_vec(),
        })
        .collect()
}

/// The sections as `<details>` elements.
pub(super) fn render(sections: &[SectionText]) -> String {
    let mut html = String::new();
    for s in sections {
        let (title, open) = match s.section {
            Some(section) => (
                match section.number() {
                    Some(n) => format!("{n}. {}", section.heading()),
                    None => section.heading().to_owned(),
                },
                section.expanded_by_default(),
            ),
            None => ("Preamble".to_owned(), true),
        };
        let _ = write!(
            html,
            "<details class=\"section\"{}><summary>{} <span class=\"muted\">({})</span></summary>",
            if open { " open" } else { "" },
            esc(&title),
            s.lines.len()
        );
        if s.lines.is_empty() {
            html.push_str("<p class=\"muted\">(none)</p>");
        } else {
            html.push_str("<ul>");
            for line in &s.lines {
                let _ = write!(html, "<li>{}</li>", esc(line));
            }
            html.push_str("</ul>");
        }
        html.push_str("</details>");
    }
    html
}

#[cfg(test)]
mod tests {
    use super::*;
    use compactor_shared::summary::SummaryFormat;

    #[test]
    fn a_rendered_summary_splits_back_into_its_sections() {
        let mut summary = Summary::empty(SummaryFormat::Sections);
        summary.key_facts = vec!["the API is v2".into(), "deploy on friday".into()];
        summary.open_threads = vec!["fix <migration> 42".into()];
        let split = split_rendered(&summary.render());
        assert_eq!(split, sections_of(&summary));
        let html = render(&split);
        assert_eq!(html.matches("<details").count(), 3);
        assert!(html.contains("fix &lt;migration&gt; 42"), "{html}");
        // Key facts open, the conversation flow collapsed, open threads open.
        let parts: Vec<&str> = html.split("<details").skip(1).collect();
        assert!(parts[0].starts_with(" class=\"section\" open>"), "{html}");
        assert!(parts[1].starts_with(" class=\"section\">"), "{html}");
        assert!(parts[2].starts_with(" class=\"section\" open>"), "{html}");
    }

    #[test]
    fn a_handoff_summary_splits_by_its_numbered_headings() {
        let mut summary = Summary::empty(SummaryFormat::Handoff9);
        summary.next_step = vec!["ship it".into()];
        let split = split_rendered(&summary.render());
        assert_eq!(split.len(), 9);
        assert_eq!(split[8].section, Some(Section::NextStep));
        assert_eq!(split[8].lines, vec!["ship it".to_owned()]);
    }

    #[test]
    fn text_without_headings_is_one_preamble() {
        let split = split_rendered("just text\n- a bullet\n");
        assert_eq!(split.len(), 1);
        assert_eq!(split[0].section, None);
        assert_eq!(
            split[0].lines,
            vec!["just text".to_owned(), "a bullet".to_owned()]
        );
    }
}
