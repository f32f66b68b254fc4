use proptest::prelude::*;

use super::*;
use crate::message::{Message, MessageId, Part, Role};
use crate::tokens::{CharEstimator, TokenEstimator};

fn est() -> CharEstimator {
    CharEstimator::default()
}

fn artifact(kind: ArtifactKind, value: &str, id: i64) -> Artifact {
    Artifact::new(kind, value, MessageId(id))
}

fn read(kind: ArtifactKind, value: &str, id: i64) -> Artifact {
    artifact(kind, value, id).said_by(Source::ToolOutput, Salience::Read)
}

fn stated(kind: ArtifactKind, value: &str, id: i64) -> Artifact {
    artifact(kind, value, id).said_by(Source::User, Salience::Stated)
}

fn setting(key: &str, value: &str, id: i64, salience: Salience) -> Artifact {
    let source = match salience {
        Salience::Stated => Source::User,
        Salience::Written => Source::Assistant,
        Salience::Read | Salience::Answered | Salience::Listed => Source::ToolOutput,
    };
    Artifact::setting(key, value, MessageId(id)).said_by(source, salience)
}

fn values(l: &ArtifactLedger, kind: ArtifactKind) -> Vec<&str> {
    l.entries()
        .iter()
        .filter(|a| a.kind == kind)
        .map(|a| a.value.as_str())
        .collect()
}

fn record(l: &mut ArtifactLedger, seen: impl IntoIterator<Item = Artifact>) {
    l.record(seen, &LedgerCaps::default(), &est());
}

#[test]
fn ledgers_stored_by_older_versions_still_read() {
    let json = r#"[{"kind":"path","value":"src/a.rs","last_seen":12},
                   {"kind":"quantity","value":"512 MB","last_seen":3}]"#;
    let l: ArtifactLedger = serde_json::from_str(json).unwrap();
    assert_eq!(l.len(), 2);
    let a = &l.entries()[0];
    assert_eq!(
        (a.kind, a.value.as_str(), a.key.as_deref()),
        (ArtifactKind::Path, "src/a.rs", None)
    );
    assert_eq!((a.first_seen, a.last_seen), (MessageId(12), MessageId(12)));
    assert_eq!(a.mentions, 1);
    assert_eq!((a.source, a.salience), (Source::Unknown, Salience::Written));
    assert!(!a.superseded);
    assert_eq!(l.render(), "Files:\n- src/a.rs\nNumbers:\n- 512 MB\n");

    // What is written now reads back unchanged.
    let mut l = l;
    record(&mut l, [setting("MAX_RETRIES", "5", 20, Salience::Stated)]);
    let json = serde_json::to_string(&l).unwrap();
    let back: ArtifactLedger = serde_json::from_str(&json).unwrap();
    assert_eq!(back, l);
}

#[test]
fn a_legacy_entry_learns_its_source_when_seen_again() {
    let mut l: ArtifactLedger =
        serde_json::from_str(r#"[{"kind":"path","value":"src/a.rs","last_seen":12}]"#).unwrap();
    record(
        &mut l,
        [artifact(ArtifactKind::Path, "src/a.rs", 14)
            .said_by(Source::Assistant, Salience::Written)],
    );
    let a = &l.entries()[0];
    assert_eq!((a.source, a.mentions), (Source::Assistant, 2));
    assert_eq!((a.first_seen, a.last_seen), (MessageId(12), MessageId(14)));
}

#[test]
fn sightings_merge_with_provenance_and_mention_counts() {
    let mut l = ArtifactLedger::default();
    record(
        &mut l,
        [
            read(ArtifactKind::Path, "a.rs", 5),
            read(ArtifactKind::Path, "b.rs", 6),
        ],
    );
    record(
        &mut l,
        [
            stated(ArtifactKind::Path, "a.rs", 9),
            read(ArtifactKind::Path, "a.rs", 11),
            read(ArtifactKind::Path, "a.rs", 3),
        ],
    );
    let a = &l.entries()[0];
    assert_eq!(a.value, "a.rs", "first seen first");
    assert_eq!(a.mentions, 4);
    assert_eq!((a.first_seen, a.last_seen), (MessageId(3), MessageId(11)));
    assert_eq!(
        (a.source, a.salience),
        (Source::User, Salience::Stated),
        "the most salient sighting names the source"
    );
    assert_eq!(l.entries()[1].mentions, 1);
}

#[test]
fn recording_the_same_batch_twice_changes_nothing() {
    let batch = vec![
        stated(ArtifactKind::Path, "a.rs", 5),
        read(ArtifactKind::Path, "a.rs", 7),
        setting("timeout", "37s", 5, Salience::Stated),
        setting("timeout", "45s", 7, Salience::Stated),
        read(ArtifactKind::Url, "https://x.io", 7),
    ];
    let mut l = ArtifactLedger::default();
    record(&mut l, batch.clone());
    let once = l.clone();
    record(&mut l, batch);
    assert_eq!(l, once);
}

#[test]
fn overlong_and_empty_values_are_skipped() {
    let caps = LedgerCaps {
        max_value_chars: 10,
        ..Default::default()
    };
    let mut l = ArtifactLedger::default();
    l.record(
        [
            artifact(ArtifactKind::Command, "make", 1),
            artifact(ArtifactKind::Command, &"x".repeat(11), 2),
            artifact(ArtifactKind::Command, "  ", 3),
        ],
        &caps,
        &est(),
    );
    assert_eq!(l.render(), "Commands:\n- make\n");
}

#[test]
fn caps_evict_the_least_salient_of_that_kind_only() {
    let caps = LedgerCaps {
        paths: 2,
        ..Default::default()
    };
    let mut l = ArtifactLedger::default();
    l.record(
        [
            read(ArtifactKind::Url, "https://u", 1),
            stated(ArtifactKind::Path, "named.rs", 2),
            read(ArtifactKind::Path, "b.rs", 3),
            read(ArtifactKind::Path, "c.rs", 4),
            read(ArtifactKind::Path, "c.rs", 5),
        ],
        &caps,
        &est(),
    );
    assert_eq!(values(&l, ArtifactKind::Path), ["named.rs", "c.rs"]);
    assert_eq!(values(&l, ArtifactKind::Url), ["https://u"]);
    // Written outranks read, and among equals more mentions, then recency.
    l.record(
        [
            artifact(ArtifactKind::Path, "edited.rs", 6),
            read(ArtifactKind::Path, "d.rs", 7),
        ],
        &caps,
        &est(),
    );
    assert_eq!(values(&l, ArtifactKind::Path), ["named.rs", "edited.rs"]);
}

/// The issue's case: a path the user named in message 1 was gone by
/// round 6, pushed out by files the agent merely read.
#[test]
fn a_path_the_user_named_survives_ten_rounds_of_reading() {
    let caps = LedgerCaps::default();
    let mut l = ArtifactLedger::default();
    let first = Message::text(
        1,
        Role::User,
        "The rounding bug is in services/billing/src/rounding.rs, start there.",
    );
    l.record(extract(&[first]), &caps, &est());
    let mut id = 1;
    for round in 0..10 {
        let mut span = Vec::new();
        for i in 0..100 {
            id += 1;
            let path = format!("src/round_{round}/file_{i}.rs");
            span.push(Message::new(
                id,
                Role::Assistant,
                vec![Part::tool_call(
                    format!("r{id}"),
                    "read_file",
                    serde_json::json!({ "path": path }),
                )],
            ));
            id += 1;
            span.push(Message::new(
                id,
                Role::Tool,
                vec![Part::tool_result(
                    format!("r{id}"),
                    "read_file",
                    format!("// {path}\nuse crate::util::helpers_{i};\n"),
                )],
            ));
        }
        l.record(extract(&span), &caps, &est());
        assert!(
            l.contains(ArtifactKind::Path, "services/billing/src/rounding.rs"),
            "round {round}"
        );
        assert!(values(&l, ArtifactKind::Path).len() <= caps.paths);
    }
    assert!(l.render().contains("services/billing/src/rounding.rs"));
}

#[test]
fn only_the_users_own_values_can_push_out_the_users_values() {
    let caps = LedgerCaps {
        paths: 3,
        ..Default::default()
    };
    let mut l = ArtifactLedger::default();
    l.record(
        [
            stated(ArtifactKind::Path, "old.rs", 1),
            stated(ArtifactKind::Path, "twice.rs", 2),
            stated(ArtifactKind::Path, "twice.rs", 3),
        ],
        &caps,
        &est(),
    );
    l.record(
        (10..50).map(|i| read(ArtifactKind::Path, &format!("r{i}.rs"), i)),
        &caps,
        &est(),
    );
    assert_eq!(
        values(&l, ArtifactKind::Path),
        ["old.rs", "twice.rs", "r49.rs"]
    );
    l.record(
        [
            stated(ArtifactKind::Path, "new.rs", 60),
            stated(ArtifactKind::Path, "newer.rs", 61),
        ],
        &caps,
        &est(),
    );
    // Lowest first: fewest mentions, then oldest.
    assert_eq!(
        values(&l, ArtifactKind::Path),
        ["twice.rs", "new.rs", "newer.rs"]
    );
}

#[test]
fn a_new_value_for_the_same_key_supersedes_and_is_marked() {
    let msgs = vec![
        Message::text(1, Role::User, "Set the timeout to 37s and MAX_RETRIES=5."),
        Message::text(2, Role::User, "Also billing.fx_cache = on for now."),
        Message::text(3, Role::Assistant, "Done: timeout 37s, retries 5."),
        Message::text(
            7,
            Role::User,
            "Make the timeout 45s, bump MAX_RETRIES to 8 and billing.fx_cache = off.",
        ),
    ];
    let mut l = ArtifactLedger::default();
    record(&mut l, extract(&msgs));
    assert_eq!(l.current("timeout").map(|a| a.value.as_str()), Some("45s"));
    assert_eq!(
        l.current("MAX_RETRIES").map(|a| a.value.as_str()),
        Some("8")
    );
    assert_eq!(
        l.current("billing.fx_cache").map(|a| a.value.as_str()),
        Some("off")
    );
    let rendered = l.render();
    assert!(
        rendered.contains("- timeout: 45s (superseded: 37s)\n"),
        "{rendered}"
    );
    assert!(
        rendered.contains("- MAX_RETRIES=8 (superseded: 5)\n"),
        "{rendered}"
    );
    assert!(
        rendered.contains("- billing.fx_cache=off (superseded: on)\n"),
        "{rendered}"
    );
    for old in ["37s", "=5", "on)"] {
        for line in rendered.lines().filter(|l| l.contains(old)) {
            assert!(line.contains("superseded"), "{line}");
        }
    }
}

#[test]
fn unrelated_keys_never_supersede_each_other() {
    let mut l = ArtifactLedger::default();
    record(
        &mut l,
        [
            setting("read timeout", "30s", 1, Salience::Stated),
            setting("write timeout", "60s", 2, Salience::Stated),
            setting("TIMEOUT", "10s", 3, Salience::Stated),
        ],
    );
    assert!(l.entries().iter().all(|a| !a.superseded));
    assert!(!l.render().contains("superseded"));
    // Plain values never supersede anything either.
    record(
        &mut l,
        [
            artifact(ArtifactKind::Duration, "37s", 4),
            artifact(ArtifactKind::Duration, "45s", 5),
        ],
    );
    assert!(l.entries().iter().all(|a| !a.superseded));
}

#[test]
fn reading_an_old_value_does_not_undo_a_stated_one() {
    let mut l = ArtifactLedger::default();
    record(
        &mut l,
        [
            setting("MAX_RETRIES", "5", 1, Salience::Read),
            setting("MAX_RETRIES", "8", 2, Salience::Stated),
            // The agent reads the config file before editing it.
            setting("MAX_RETRIES", "5", 3, Salience::Read),
        ],
    );
    assert_eq!(
        l.current("MAX_RETRIES").map(|a| a.value.as_str()),
        Some("8")
    );
    // Reading something nobody stated replaces what was only read.
    record(
        &mut l,
        [
            setting("POOL_SIZE", "10", 4, Salience::Read),
            setting("POOL_SIZE", "20", 5, Salience::Read),
        ],
    );
    assert_eq!(l.current("POOL_SIZE").map(|a| a.value.as_str()), Some("20"));
    // And the user can always go back to an old value.
    record(&mut l, [setting("MAX_RETRIES", "5", 9, Salience::Stated)]);
    assert_eq!(
        l.current("MAX_RETRIES").map(|a| a.value.as_str()),
        Some("5")
    );
    assert!(l.render().contains("- MAX_RETRIES=5 (superseded: 8)\n"));
}

#[test]
fn the_budget_is_respected_and_spent_on_the_most_salient() {
    let caps = LedgerCaps {
        max_tokens: 200,
        ..Default::default()
    };
    let mut l = ArtifactLedger::default();
    let mut seen: Vec<Artifact> = (0..300)
        .map(|i| read(ArtifactKind::Path, &format!("src/read/file_{i}.rs"), i))
        .collect();
    seen.push(stated(ArtifactKind::Amount, "€249.99", 1));
    seen.push(stated(ArtifactKind::Reference, "KD-5512-0937", 2));
    seen.push(setting("timeout", "37s", 3, Salience::Stated));
    seen.push(setting("timeout", "45s", 4, Salience::Stated));
    l.record(seen, &caps, &est());
    let rendered = l.render();
    assert!(est().count(&rendered) <= caps.max_tokens, "{rendered}");
    for kept in [
        "€249.99",
        "KD-5512-0937",
        "- timeout: 45s (superseded: 37s)",
    ] {
        assert!(rendered.contains(kept), "{kept}: {rendered}");
    }
    assert!(
        rendered.contains("src/read/file_299.rs"),
        "the rest of the budget goes to the newest reads"
    );
    assert!(!rendered.contains("src/read/file_0.rs"));

    let none = LedgerCaps {
        max_tokens: 0,
        ..Default::default()
    };
    l.record([stated(ArtifactKind::Path, "a.rs", 9)], &none, &est());
    assert!(l.is_empty() && l.render().is_empty());
}

#[test]
fn history_ranks_below_its_own_rank_of_current_values() {
    let seen = [
        setting("timeout", "37s", 1, Salience::Stated),
        setting("timeout", "45s", 2, Salience::Stated),
        setting("POOL_SIZE", "10", 3, Salience::Read),
        setting("RETRIES", "3", 4, Salience::Stated),
    ];
    let rendered = |settings: usize| {
        let caps = LedgerCaps {
            settings,
            ..Default::default()
        };
        let mut l = ArtifactLedger::default();
        l.record(seen.clone(), &caps, &est());
        l.render()
    };
    assert_eq!(rendered(2), "Settings:\n- timeout: 45s\n- RETRIES=3\n");
    assert_eq!(
        rendered(3),
        "Settings:\n- timeout: 45s (superseded: 37s)\n- RETRIES=3\n",
        "what the user said before outranks what was only read"
    );
    assert_eq!(
        rendered(4),
        "Settings:\n- timeout: 45s (superseded: 37s)\n- POOL_SIZE=10\n- RETRIES=3\n"
    );
}

#[test]
fn a_plain_echo_of_a_replaced_value_is_not_shown_as_current() {
    let mut l = ArtifactLedger::default();
    record(
        &mut l,
        [
            setting("timeout", "37s", 1, Salience::Stated),
            artifact(ArtifactKind::Duration, "37s", 2),
            artifact(ArtifactKind::Duration, "12s", 2),
            setting("timeout", "45s", 3, Salience::Stated),
            artifact(ArtifactKind::Duration, "45s", 4),
        ],
    );
    assert_eq!(
        l.render(),
        "Settings:\n- timeout: 45s (superseded: 37s)\nDurations:\n- 12s\n- 45s\n"
    );
}

#[test]
fn render_groups_by_kind_in_the_order_values_entered() {
    let mut l = ArtifactLedger::default();
    record(
        &mut l,
        [
            read(ArtifactKind::Path, "b.rs", 1),
            stated(ArtifactKind::Person, "Dana Whitfield", 2),
            read(ArtifactKind::Path, "a.rs", 3),
            read(ArtifactKind::Path, "b.rs", 4),
        ],
    );
    assert_eq!(
        l.render(),
        "People:\n- Dana Whitfield\nFiles:\n- b.rs\n- a.rs\n"
    );
    assert_eq!(ArtifactLedger::default().render(), "");
}

#[test]
fn a_hand_made_ledger_with_two_current_values_is_repaired() {
    let json = r#"[{"kind":"setting","key":"timeout","value":"37s","last_seen":1},
                   {"kind":"setting","key":"timeout","value":"45s","last_seen":2},
                   {"kind":"path","value":"a.rs","last_seen":1},
                   {"kind":"path","value":"a.rs","last_seen":4}]"#;
    let mut l: ArtifactLedger = serde_json::from_str(json).unwrap();
    record(&mut l, []);
    assert_eq!(l.len(), 3);
    assert_eq!(l.current("timeout").map(|a| a.value.as_str()), Some("45s"));
    assert!(l.render().contains("- timeout: 45s (superseded: 37s)"));
}

#[test]
fn ten_thousand_artifacts_record_with_an_index() {
    // Performance is measured in the benchmark; this checks the result of
    // a large batch with many repeats.
    let caps = LedgerCaps {
        paths: 20_000,
        max_tokens: u64::MAX,
        ..Default::default()
    };
    let mut l = ArtifactLedger::default();
    l.record(
        (0..10_000).map(|i| read(ArtifactKind::Path, &format!("src/f{}.rs", i % 5_000), i)),
        &caps,
        &est(),
    );
    assert_eq!(l.len(), 5_000);
    assert!(l.entries().iter().all(|a| a.mentions == 2));
}

fn any_artifact() -> impl Strategy<Value = Artifact> {
    let kinds = prop::sample::select(vec![
        ArtifactKind::Path,
        ArtifactKind::Setting,
        ArtifactKind::Count,
        ArtifactKind::Person,
    ]);
    let saliences = prop::sample::select(vec![Salience::Read, Salience::Written, Salience::Stated]);
    (kinds, 0..4usize, 0..12usize, 1..40i64, saliences).prop_map(
        |(kind, key, value, id, salience)| {
            let value = format!("v{value}");
            let a = if kind == ArtifactKind::Setting {
                Artifact::setting(format!("k{key}"), value, MessageId(id))
            } else {
                Artifact::new(kind, value, MessageId(id))
            };
            a.said_by(Source::Unknown, salience)
        },
    )
}

fn small_caps() -> LedgerCaps {
    LedgerCaps {
        paths: 4,
        settings: 5,
        counts: 3,
        people: 2,
        max_tokens: 40,
        ..Default::default()
    }
}

proptest! {
    #[test]
    fn record_is_idempotent_and_fits(
        earlier in prop::collection::vec(prop::collection::vec(any_artifact(), 0..20), 0..4),
        batch in prop::collection::vec(any_artifact(), 0..30),
    ) {
        let caps = small_caps();
        let mut l = ArtifactLedger::default();
        for b in earlier {
            l.record(b, &caps, &est());
        }
        l.record(batch.clone(), &caps, &est());
        let once = l.clone();
        l.record(batch, &caps, &est());
        prop_assert_eq!(&l, &once);
        prop_assert!(est().count(&l.render()) <= caps.max_tokens);
        prop_assert!(est().count(&l.render_cited(&|_| None)) <= caps.max_tokens);
        for kind in ArtifactKind::ALL {
            prop_assert!(l.entries().iter().filter(|a| a.kind == kind).count() <= caps.cap(kind));
        }
        // One current value per key, and history only beside it, cited or
        // not.
        let rendered = format!("{}{}", l.render(), l.render_cited(&|_| None));
        for a in l.entries().iter().filter(|a| a.superseded) {
            let key = a.key.as_deref().unwrap_or("");
            prop_assert!(l.current(key).is_some(), "{} has history but no current value", key);
        }
        for line in rendered.lines() {
            let superseded_here = l.entries().iter().any(|a| {
                a.superseded && line.starts_with(&format!("- {}=", a.key.as_deref().unwrap_or("")))
            });
            if superseded_here {
                prop_assert!(line.contains("superseded"), "{}", line);
            }
        }
    }

    #[test]
    fn extraction_never_panics(text in "\\PC{0,400}", role in 0..4u8) {
        let role = [Role::User, Role::Assistant, Role::System, Role::Tool][role as usize];
        let msgs = vec![
            Message::text(1, role, text.clone()),
            Message::new(2, Role::Assistant, vec![Part::tool_call("c", "bash", serde_json::json!({"command": text.clone(), "n": [text.clone()]}))]),
            Message::new(3, Role::Tool, vec![Part::ToolResult { call_id: "c".into(), tool_name: "bash".into(), output: text.clone(), is_error: true, pruned: false }]),
        ];
        let found = extract(&msgs);
        prop_assert!(found.iter().all(|a| !a.value.trim().is_empty()));
        let _ = has_artifact(&text);
    }

    #[test]
    fn extraction_never_panics_on_value_shaped_text(parts in prop::collection::vec(prop::sample::select(vec![
        "€", "$", "1", "23", ".", ",", ":", "-", "#", "@", "/", " ", "\n", "```", "A", "KD", "Mr.", "my name is ",
        "set the ", " to ", "=", "MAX_", "é", "東京", "x.y_z", "2026-", "March ", "+49 ", "(", ")", "am", "UTC",
    ]), 0..60)) {
        let text: String = parts.concat();
        let found = extract(&[Message::text(1, Role::User, text.clone())]);
        for a in &found {
            prop_assert!(!a.value.trim().is_empty());
        }
        let mut l = ArtifactLedger::default();
        l.record(found.clone(), &LedgerCaps::default(), &est());
        let once = l.clone();
        l.record(found, &LedgerCaps::default(), &est());
        prop_assert_eq!(l, once);
    }
}

#[test]
fn a_kind_that_comes_in_bulk_cannot_starve_another_of_the_budget() {
    let read = |kind, value: &str, id| {
        artifact(kind, value, id).said_by(Source::ToolOutput, Salience::Read)
    };
    let mut l = ArtifactLedger::default();
    let amount = read(ArtifactKind::Amount, "€1,359.00", 1);
    // Many newer, more mentioned identifiers of the same salience.
    let mut seen = vec![amount];
    for i in 0..200 {
        let mut a = read(ArtifactKind::Identifier, &format!("SKU-{i:04}"), 10 + i);
        a.mentions = 3;
        seen.push(a);
    }
    let caps = LedgerCaps {
        max_tokens: 60,
        ..LedgerCaps::default()
    };
    l.record(seen, &caps, &est());
    assert!(
        l.contains(ArtifactKind::Amount, "€1,359.00"),
        "{}",
        l.render()
    );
    assert!(est().count(&l.render()) <= 60);
}

#[test]
fn listed_values_go_before_values_read_alone() {
    let mut l = ArtifactLedger::default();
    let caps = LedgerCaps {
        amounts: 2,
        ..LedgerCaps::default()
    };
    let alone =
        artifact(ArtifactKind::Amount, "€1,359.00", 1).said_by(Source::ToolOutput, Salience::Read);
    let listed: Vec<Artifact> = (0..5)
        .map(|i| {
            artifact(ArtifactKind::Amount, &format!("€{i}9.99"), 10 + i)
                .said_by(Source::ToolOutput, Salience::Listed)
        })
        .collect();
    l.record(std::iter::once(alone).chain(listed), &caps, &est());
    assert!(
        l.contains(ArtifactKind::Amount, "€1,359.00"),
        "{}",
        l.render()
    );
}

/// The ledger of the evidence tests: a path first seen in #1234 and seen
/// again later, a setting stated in #12 and replaced in #88.
fn evidence_ledger() -> ArtifactLedger {
    let mut l = ArtifactLedger::default();
    record(
        &mut l,
        [
            setting("timeout", "37s", 12, Salience::Stated),
            read(ArtifactKind::Path, "src/billing/rounding.rs", 1234),
            setting("timeout", "45s", 88, Salience::Stated),
            setting("MAX_RETRIES", "5", 90, Salience::Written),
            read(ArtifactKind::Path, "src/billing/rounding.rs", 1300),
        ],
    );
    l
}

#[test]
fn a_cited_line_names_the_message_its_value_was_first_seen_in() {
    let l = evidence_ledger();
    let cited = l.render_cited(&|_| None);
    assert_eq!(
        cited,
        "Settings:\n- timeout: 45s (#88) (superseded: 37s)\n- MAX_RETRIES=5 (#90)\n\
         Files:\n- src/billing/rounding.rs (#1234)\n"
    );
    // Every line that shows the superseded value says so.
    for line in cited.lines().filter(|line| line.contains("37s")) {
        assert!(line.contains("superseded"), "{line}");
    }
    // The uncited rendering (the summarizer's prompt) is as before.
    assert_eq!(
        l.render(),
        "Settings:\n- timeout: 45s (superseded: 37s)\n- MAX_RETRIES=5\n\
         Files:\n- src/billing/rounding.rs\n"
    );
}

#[test]
fn a_mark_follows_the_citation() {
    let l = evidence_ledger();
    let cited = l.render_cited(&|a| {
        (a.kind == ArtifactKind::Path).then(|| " [superseded by the user at #1400]".to_owned())
    });
    assert!(
        cited.contains("- src/billing/rounding.rs (#1234) [superseded by the user at #1400]\n"),
        "{cited}"
    );
}

#[test]
fn the_cost_of_a_line_includes_its_citation() {
    let l = evidence_ledger();
    let path = &l.entries()[1];
    assert_eq!(path.value, "src/billing/rounding.rs");
    let cited_line = "- src/billing/rounding.rs (#1234)\n";
    assert!(render::cost(path, &est()) >= est().count(cited_line));
    assert!(render::cost(path, &est()) > est().count("- src/billing/rounding.rs\n"));
    // Lines and headings add up to at least the cited rendering.
    let mut kinds = std::collections::HashSet::new();
    let total: u64 = l
        .entries()
        .iter()
        .map(|a| {
            let heading = if kinds.insert(a.kind) {
                render::heading_cost(a.kind, &est())
            } else {
                0
            };
            render::cost(a, &est()) + heading
        })
        .sum();
    assert!(total >= est().count(&l.render_cited(&|_| None)));
}

#[test]
fn a_cited_ledger_fits_its_budget() {
    // Long message ids make the citations a large share of each line.
    let seen: Vec<Artifact> = (0..400)
        .map(|i| read(ArtifactKind::Path, &format!("f{i}.rs"), 1_000_000_000 + i))
        .collect();
    for max_tokens in [20, 60, 200, 1_000] {
        let caps = LedgerCaps {
            max_tokens,
            ..Default::default()
        };
        let mut l = ArtifactLedger::default();
        l.record(seen.clone(), &caps, &est());
        let cited = l.render_cited(&|_| None);
        assert!(!l.is_empty(), "{max_tokens}");
        assert!(est().count(&cited) <= max_tokens, "{max_tokens}: {cited}");
        assert!(
            cited
                .lines()
                .skip(1)
                .all(|line| line.ends_with(')') && line.contains("(#1000000")),
            "{cited}"
        );
    }
}
