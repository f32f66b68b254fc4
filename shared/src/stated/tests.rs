use super::*;
use crate::message::Part;

/// Messages within which a word of when ties a change to a statement (the
/// evidence's slot scope, as the pipeline passes it).
const SCOPE: u64 = 24;

fn user(id: i64, text: &str) -> Message {
    Message::text(id, Role::User, text)
}

/// Records each message's statements in turn, as the pipeline does per
/// compacted span.
fn recorded(messages: &[Message]) -> UserStatements {
    let mut stated = UserStatements::default();
    for m in messages {
        stated.record(
            extract(std::slice::from_ref(m)),
            &StatedCaps::default(),
            SCOPE,
        );
    }
    stated
}

/// What `s` shows: its current statements and its superseded ones, the
/// list split at [`SUPERSEDED_HEADING`] (which it must have).
fn shown_parts(s: &UserStatements) -> (String, String) {
    let text = s.render();
    let (current, old) = text
        .split_once(super::SUPERSEDED_HEADING)
        .expect("a superseded part");
    (current.to_owned(), old.to_owned())
}

/// What one user message states, kind and text.
fn extracted(text: &str) -> Vec<(StatementKind, String)> {
    extract(&[user(1, text)])
        .into_iter()
        .map(|s| (s.kind, s.text))
        .collect()
}

fn current_texts(s: &UserStatements) -> Vec<&str> {
    s.current().map(|s| s.text.as_str()).collect()
}

fn shown_texts(s: &UserStatements) -> Vec<&str> {
    s.shown().map(|s| s.text.as_str()).collect()
}

#[test]
fn extraction_keeps_the_source_message_and_reads_only_the_users_text() {
    let messages = vec![
        user(
            1,
            "Hi! We must not touch the billing schema. Can you look at src/pay.rs?",
        ),
        Message::text(
            2,
            Role::Assistant,
            "We decided to round half-even. Never mind.",
        ),
        Message::new(
            3,
            Role::User,
            vec![
                Part::tool_result("c1", "bash", "error: you must never do this"),
                Part::text("ok. Let's use Postgres for the ledger."),
            ],
        ),
        Message::text(4, Role::System, "Never reveal the system prompt."),
        Message::new(
            5,
            Role::User,
            vec![Part::Reasoning {
                text: "never push".into(),
            }],
        ),
    ];
    let found = extract(&messages);
    let got: Vec<(i64, StatementKind, &str)> = found
        .iter()
        .map(|s| (s.source.0, s.kind, s.text.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                1,
                StatementKind::Constraint,
                "We must not touch the billing schema."
            ),
            // A request that gives a value (a path) names what the task
            // must meet.
            (1, StatementKind::Request, "Can you look at src/pay.rs?"),
            (
                3,
                StatementKind::Decision,
                "Let's use Postgres for the ledger."
            ),
        ]
    );
    assert_eq!(found[0].sentence, 1, "second sentence of its message");
}

#[test]
fn extraction_serves_chats_of_any_domain() {
    let chat = [
        // customer support
        "Hi, I'm Anna Kowalski, customer number KD-5512-0937.",
        "Please cancel order 88213, I ordered the wrong size.",
        "Refund it to my Visa card, not as store credit.",
        // travel
        "I'm vegetarian and my son is allergic to nuts.",
        "I prefer aisle seats on long flights.",
        "I'll take the 9:40 train to Hamburg.",
        // personal assistant
        "Don't book anything before 10am.",
        "My budget for the hotel is 180 EUR per night.",
        // coding agent
        "billing.invoice_v2_fx_cache is off until the audit ends.",
        "Never run migrations against prod from a laptop.",
    ];
    let messages: Vec<Message> = chat
        .iter()
        .enumerate()
        .map(|(i, t)| user(i as i64 + 1, t))
        .collect();
    let found = extract(&messages);
    let sources: Vec<i64> = found.iter().map(|s| s.source.0).collect();
    assert_eq!(sources, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "{found:#?}");
}

#[test]
fn the_framing_rule_reads_a_value_or_a_rule_word_in_five_languages() {
    use crate::stated::classify;
    for (framed, kind) in [
        // A value given by its form, or a count in letters: a request.
        (
            "I need a cab for two people to 560 Waverley Street.",
            StatementKind::Request,
        ),
        ("On the 7th.", StatementKind::Request),
        (
            "Please find events in Portland, OR.",
            StatementKind::Request,
        ),
        ("Is there anything available in NY?", StatementKind::Request),
        ("Ich brauche 2 Tickets für Samstag.", StatementKind::Request),
        ("3月15日に予約したいです。", StatementKind::Request),
        (
            "Quiero una mesa para 4 a las 21:00.",
            StatementKind::Request,
        ),
        ("Je voudrais partir le 12 mars.", StatementKind::Request),
        // A rule or a condition, without a value.
        ("Never push to main.", StatementKind::Constraint),
        ("my son is allergic to nuts", StatementKind::Constraint),
        (
            "Bitte nie direkt auf den Hauptzweig pushen.",
            StatementKind::Constraint,
        ),
        ("必ずテストを実行してください。", StatementKind::Constraint),
        (
            "Nunca subas cambios sin pruebas.",
            StatementKind::Constraint,
        ),
        (
            "Il faut toujours lancer les tests.",
            StatementKind::Constraint,
        ),
        // A choice or a change.
        ("Let's use the cache for reads.", StatementKind::Decision),
        ("How about 5 pm instead?", StatementKind::Decision),
        ("Lass uns die Datei behalten.", StatementKind::Decision),
        ("Mejor en lugar de eso, el martes.", StatementKind::Decision),
        ("Prenons plutôt le train de 9h40.", StatementKind::Decision),
        ("代わりに金曜日にします。", StatementKind::Decision),
        // One thing set against another.
        (
            "To the original card, not store credit.",
            StatementKind::Decision,
        ),
        (
            "窓側ではなく通路側でお願いします。",
            StatementKind::Decision,
        ),
        ("En efectivo, no con tarjeta.", StatementKind::Decision),
        ("Par virement, pas par chèque.", StatementKind::Decision),
    ] {
        assert_eq!(classify(framed), Some(kind), "{framed}");
    }
    for not in [
        // A question that asks for something.
        "What's the address of Century Vallejo?",
        "Wann fährt der Zug nach Hamburg?",
        "¿Dónde está el Hotel Sol?",
        "Où se trouve la Gare de Lyon ?",
        "東京駅はどこですか？",
        // No value and no word of a rule.
        "I'd like to find a place to eat.",
        "We really need to do something about it.",
        // A closing, a guess, what someone else says.
        "Thank you so much, that is all I need for now.",
        "Danke, das ist alles.",
        "Maybe we should never cache the tokens.",
        "Vielleicht nie wieder.",
        "The docs say you must restart after an upgrade.",
        // A question gives no rule.
        "Do I always need a ticket?",
        // A German noun is capitalised, and names nothing.
        "Die Besprechung war lang und anstrengend.",
        "Mein Chef findet die Idee gut.",
    ] {
        assert_eq!(classify(not), None, "{not}");
    }
    // A German name still gives a value.
    assert_eq!(
        classify("Bitte buche den Flug nach München."),
        Some(StatementKind::Request)
    );
}

#[test]
fn the_name_of_the_one_spoken_to_gives_no_value_in_any_language() {
    for said in [
        "Thanks, Melanie!",
        "Hey Mel!",
        "Melanie!",
        "Hey Caroline, hope all's good!",
        "Wow, Mel, you're amazing!",
        "Thanks, Gina - really appreciate your words!",
        "What about you, Mel?",
        "That bowl is awesome, Mel!",
        "Danke, Anna!",
        "ありがとう、田中さん。",
        "¡Gracias, María!",
        "Merci, Julie !",
    ] {
        assert_eq!(classify(said), None, "{said}");
    }
    // A name set off the same way that is a place, a day or a choice.
    for framed in [
        "I'd like to fly to Paris.",
        "A table at Sakura, please.",
        "A cab to San Diego, please.",
        "This Saturday.",
        "Ich möchte nach Berlin.",
        "Reserva en Casa Lucio, por favor.",
    ] {
        assert_eq!(classify(framed), Some(StatementKind::Request), "{framed}");
    }
}

#[test]
fn a_rule_word_frames_a_sentence_without_a_value_only_at_the_head_of_its_clause() {
    for (said, kind) in [
        (
            "We never deploy without a review.",
            StatementKind::Constraint,
        ),
        ("Please never push to main.", StatementKind::Constraint),
        ("You must run the tests first.", StatementKind::Constraint),
        (
            "Ground rules: never run migrations by hand.",
            StatementKind::Constraint,
        ),
        ("It has to stay off in prod.", StatementKind::Constraint),
        (
            "And never share my number with couriers.",
            StatementKind::Constraint,
        ),
        ("Wir müssen immer testen.", StatementKind::Constraint),
        (
            "Nosotros nunca desplegamos sin revisión.",
            StatementKind::Constraint,
        ),
        ("Tu dois lancer les tests.", StatementKind::Constraint),
        ("Let's keep the old layout.", StatementKind::Decision),
        ("Fine, let's keep the old layout.", StatementKind::Decision),
    ] {
        assert_eq!(classify(said), Some(kind), "{said}");
    }
    // Inside a clause, the word qualifies what is said: chit-chat of two
    // friends (a published long-conversation benchmark), and the same in
    // other languages.
    for said in [
        "I've always had a love for horses!",
        "I'm always here for you!",
        "Sharing our experiences isn't always easy.",
        "I'll do my best to make sure these kids have a safe home.",
        "It's like a nudge to always stay true to myself.",
        "It really pushed me to keep fighting.",
        "Es ist nicht immer leicht.",
        "No siempre es fácil.",
        "Ce n'est pas toujours facile.",
    ] {
        assert_eq!(classify(said), None, "{said}");
    }
}

#[test]
fn what_happened_is_reported_not_asked_for_in_five_languages() {
    // A value said of the past tells what happened; it sets nothing the
    // work must meet.
    for told in [
        "I went to a support group yesterday and it was so powerful.",
        "Last Friday I went to a council meeting for adoption.",
        "I started playing guitar about five years ago.",
        "Gestern war ich mit Anna im Kino.",
        "先週、京都に行きました。",
        "Ayer fui al cine con Marta.",
        "Hier, je suis allé au musée avec Paul.",
    ] {
        assert_eq!(classify(told), None, "{told}");
    }
    // The same values asked for, or a choice said of the past, still are.
    for framed in [
        "Book it for Friday at 7 pm.",
        "Ich brauche 2 Tickets für Samstag.",
        "Yesterday we decided to use Postgres instead.",
    ] {
        assert!(classify(framed).is_some(), "{framed}");
    }
}

#[test]
fn a_time_stamp_before_a_sentence_is_no_value_of_its_speaker() {
    for stamped in [
        "[1:56 pm on 8 May, 2023] Hey Mel!",
        "[12/03/2023, 14:05] Hi Gina, hope you're doing ok!",
        "[2023-05-08 13:56] Thanks, that's all.",
    ] {
        assert_eq!(classify(stamped), None, "{stamped}");
    }
    assert_eq!(
        classify("[10:02] A table for 4 at Sakura, please."),
        Some(StatementKind::Request)
    );
    // Brackets that hold no stamp are the sentence's own.
    assert_eq!(
        classify("[urgent] Never push to main."),
        Some(StatementKind::Constraint)
    );
}

#[test]
fn casual_remarks_never_become_statements() {
    let messages: Vec<Message> = [
        "never mind, found it",
        "Don't worry about it, thanks!",
        "I never thought of that.",
        "Hmm, must be the cache.",
        "should we never cache the tokens?",
        "> never push to main\n(that's what the old README said)",
        "```\n// must not be null\nif x == null { never(); }\n```",
        "2024-06-01 10:00:03 ERROR config must not be empty",
        "If we moved to Kafka we would never lose events.",
        "The docs say you must restart after an upgrade.",
        "He told me we must not deploy on Fridays.",
        "It must have been the old build.",
        "No worries, always happy to chat.",
        "I must admit, I love that song.",
        "I have to say, your painting is amazing.",
        "Ich muss sagen, das ist toll.",
        "Tengo que decir que me encanta.",
        "Je dois dire que j'adore cette chanson.",
    ]
    .iter()
    .enumerate()
    .map(|(i, t)| user(i as i64 + 1, t))
    .collect();
    let found = extract(&messages);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn a_new_value_for_the_same_key_supersedes_the_old_one() {
    let stated = recorded(&[
        user(1, "Set the request timeout to 37s."),
        user(5, "Never log request bodies."),
        user(9, "make the timeout 45s"),
    ]);
    assert_eq!(
        current_texts(&stated),
        ["Never log request bodies.", "make the timeout 45s"]
    );
    let old: Vec<&Statement> = stated.superseded().collect();
    assert_eq!(old.len(), 1);
    assert_eq!(old[0].text, "Set the request timeout to 37s.");
    assert_eq!(old[0].superseded_by, Some(MessageId(9)));
}

#[test]
fn supersession_across_domains() {
    for (earlier, later) in [
        (
            "Use Postgres for the ledger.",
            "scrap Postgres, we'll go with SQLite instead",
        ),
        ("Ship on Friday.", "actually ship on Monday"),
        (
            "Please deliver to Kastanienallee 12.",
            "please deliver to my office at Friedrichstraße 5 instead",
        ),
        (
            "Please deliver to Kastanienallee 12.",
            "Change my delivery address to Hauptstraße 3.",
        ),
        (
            "billing.invoice_v2_fx_cache is off",
            "Turn billing.invoice_v2_fx_cache back on.",
        ),
        (
            "We'll use the Redis cache for sessions.",
            "We no longer need the Redis cache.",
        ),
        (
            "Let's use Postgres for the ledger.",
            "Use MySQL instead of Postgres.",
        ),
        (
            "Move the standup to 10:30.",
            "Move the standup to 11:00 instead.",
        ),
        ("Set the request timeout to 37s.", "Actually, make it 45s."),
        ("Ship the release on Friday.", "Monday instead."),
        (
            "Use Postgres for the ledger.",
            "Hmm, let's go with SQLite instead.",
        ),
        // The same value spelled anew ("rename … to …").
        (
            "Expose the snapshots read-only under /v2/fx-snapshots.",
            "Rename the route to /v2/fx/snapshots, it matches the other v2 routes.",
        ),
        // A date moved, on the same subject.
        (
            "We're moving house on 28 June.",
            "The move got pushed to 5 July, can you tell the movers?",
        ),
        (
            "Let's ship the release on 3 March.",
            "Actually the release moved to March 10.",
        ),
        // A value chosen in a fragment, changed with "actually make it".
        (
            "Can you ask for a window seat on the flight? 9A if possible.",
            "Actually make it an aisle seat, 13C: my knee.",
        ),
        // "From now on" the same act with another value.
        (
            "Deliveries go to 14 Harbour Street, Leith, only there, not to my office.",
            "From now on deliver everything to Flat 3, 39 Calton Road, Edinburgh EH8 8DL.",
        ),
    ] {
        let stated = recorded(&[user(1, earlier), user(2, later)]);
        let current = current_texts(&stated);
        assert_eq!(current, [later], "{earlier:?} → {later:?}: {stated:#?}");
        assert_eq!(
            stated.superseded().next().map(|s| s.superseded_by),
            Some(Some(MessageId(2)))
        );
    }
}

#[test]
fn unrelated_statements_never_supersede_each_other() {
    for (a, b) in [
        (
            "Set the request timeout to 37s.",
            "Set the connect timeout to 5s.",
        ),
        ("Use Postgres for the ledger.", "Use SQLite for the cache."),
        ("Use tabs.", "Use the EU region."),
        ("Ship on Friday.", "Ship to Berlin."),
        ("Never push to main.", "Never use emojis in commits."),
        ("I'm vegetarian.", "I prefer aisle seats."),
        (
            "Use Postgres for the ledger.",
            "Postgres must run in the EU region.",
        ),
        ("Cancel order 88213.", "Please ship order 99120 on Monday."),
        (
            "The cache must be under 512 MB.",
            "Keep the logs under 2 GB.",
        ),
        (
            "Never store secrets in Postgres.",
            "scrap Postgres, we'll go with SQLite instead",
        ),
        // Two dates on different subjects, even said as a change.
        (
            "We're moving house on 28 June.",
            "Actually book dinner for the 5 July.",
        ),
        // A value like another, without a change.
        (
            "Expose the snapshots under /v2/fx-snapshots.",
            "Serve the export under /v2/fx/snapshots.",
        ),
        // A change that shares only the act with an earlier statement.
        (
            "Could you book dinner for two on the 13th, 20:30 WET?",
            "Actually book the train at 09:15.",
        ),
        // "From now on" on another act.
        (
            "Deliveries go to 14 Harbour Street, only there, not to my office.",
            "From now on send invoices to Flat 3, 39 Calton Road.",
        ),
    ] {
        let stated = recorded(&[user(1, a), user(2, b)]);
        assert_eq!(current_texts(&stated), [a, b], "{a:?} / {b:?}");
    }
}

#[test]
fn a_keyless_change_refers_to_the_latest_statement_of_its_shape_only() {
    let stated = recorded(&[
        user(1, "Set the request timeout to 37s."),
        user(2, "Set the retry delay to 5s."),
        user(3, "Ship on Friday."),
        user(4, "Deliver to Kastanienallee 12."),
        user(5, "Actually, make it 10s."),
    ]);
    let old: Vec<(&str, Option<MessageId>)> = stated
        .superseded()
        .map(|s| (s.text.as_str(), s.superseded_by))
        .collect();
    assert_eq!(old, [("Set the retry delay to 5s.", Some(MessageId(5)))]);
    let unrelated = recorded(&[
        user(1, "Deliver to Kastanienallee 12."),
        user(2, "Use SQLite instead."),
    ]);
    assert_eq!(
        unrelated.superseded().count(),
        0,
        "a name replaces only a choice"
    );
}

#[test]
fn a_later_message_restating_the_same_value_does_not_supersede() {
    let stated = recorded(&[
        user(1, "Set the request timeout to 45s."),
        user(2, "The timeout must be 45s."),
    ]);
    assert_eq!(stated.current().count(), 2);
}

#[test]
fn statements_in_one_message_are_ordered_by_sentence() {
    let stated = recorded(&[user(
        3,
        "Use Postgres for the ledger. Actually no, scrap Postgres and go with SQLite.",
    )]);
    assert_eq!(
        current_texts(&stated),
        ["Actually no, scrap Postgres and go with SQLite."]
    );
    assert_eq!(
        stated.superseded().next().map(|s| s.superseded_by),
        Some(Some(MessageId(3)))
    );
}

#[test]
fn a_repetition_keeps_one_record_at_its_latest_position() {
    let stated = recorded(&[
        user(1, "Never push to main."),
        user(7, "never push to main"),
    ]);
    assert_eq!(stated.len(), 1);
    assert_eq!(stated.items()[0].source, MessageId(7));
}

#[test]
fn recording_the_same_batch_twice_changes_nothing() {
    let batch = extract(&[
        user(1, "Set the request timeout to 37s."),
        user(2, "Use Postgres for the ledger. Never push to main."),
        user(3, "make the timeout 45s"),
        user(4, "scrap Postgres, we'll go with SQLite instead"),
        user(5, "never push to main"),
        user(6, "Ship on Friday. Set the retry delay to 5s."),
        user(7, "Actually, make it 60s. Monday instead."),
    ]);
    assert_eq!(batch.len(), 10);
    for caps in [
        StatedCaps::default(),
        StatedCaps {
            current: 2,
            superseded: 1,
        },
    ] {
        let mut stated = UserStatements::default();
        stated.record(batch.clone(), &caps, SCOPE);
        let once = stated.clone();
        stated.record(batch.clone(), &caps, SCOPE);
        assert_eq!(stated, once, "caps {caps:?}");
        // Order of the calls does not matter either.
        let mut reversed = UserStatements::default();
        reversed.record(batch.iter().rev().cloned(), &caps, SCOPE);
        assert_eq!(reversed, once, "caps {caps:?}");
    }
}

#[test]
fn caps_drop_superseded_first_then_old_decisions_then_old_constraints() {
    let mut stated = UserStatements::default();
    let caps = StatedCaps {
        current: 3,
        superseded: 1,
    };
    stated.record(
        extract(&[
            user(1, "Never push to main."),
            user(2, "Ship on Friday."),
            user(3, "Ship on Monday instead."),
            user(4, "Ship on Tuesday instead."),
            user(5, "Use tabs."),
            user(6, "Always run the tests first."),
        ]),
        &caps,
        SCOPE,
    );
    assert_eq!(
        shown_texts(&stated),
        [
            "Never push to main.",
            "Use tabs.",
            "Always run the tests first."
        ],
        "the oldest current decision goes first"
    );
    // It is still kept, dormant, so that a later statement can replace it.
    assert_eq!(
        current_texts(&stated),
        [
            "Never push to main.",
            "Ship on Tuesday instead.",
            "Use tabs.",
            "Always run the tests first."
        ],
    );
    assert!(!stated.render().contains("Tuesday"));
    let history: Vec<&str> = stated.superseded().map(|s| s.text.as_str()).collect();
    assert_eq!(history, ["Ship on Monday instead."]);
}

#[test]
fn an_oversized_batch_keeps_its_newest_statements_within_the_caps() {
    // A thousand different rules (not one sentence with a thousand
    // values, which would be a template: see the next test).
    let name = |i: i64| -> String {
        (0..3)
            .map(|k| char::from(b'a' + ((i / 26_i64.pow(k)) % 26) as u8))
            .collect()
    };
    let rule = |i: i64| format!("Never use the {} library.", name(i));
    let messages: Vec<Message> = (0..1_000).map(|i| user(i, &rule(i))).collect();
    let batch = extract(&messages);
    assert_eq!(batch.len(), 1_000);
    let mut stated = UserStatements::default();
    stated.record(batch.clone(), &StatedCaps::default(), SCOPE);
    // The list shows 16; the store keeps four times as many, dormant.
    assert_eq!(stated.len(), 16 * STORED_PER_SHOWN);
    assert_eq!(stated.items()[63].text, rule(999));
    assert_eq!(stated.items()[0].text, rule(936));
    let shown = shown_texts(&stated);
    assert_eq!(shown.len(), 16);
    assert_eq!(shown[0], rule(984));
    let once = stated.clone();
    stated.record(batch, &StatedCaps::default(), SCOPE);
    assert_eq!(stated, once);
}

#[test]
fn a_sentence_said_again_and_again_with_new_values_keeps_only_its_newest() {
    let mut messages = vec![user(1, "Never push to main.")];
    messages.extend((0..40).map(|i| {
        user(
            i + 2,
            &format!("Step {i}: can you check the status of ticket {}?", 4100 + i),
        )
    }));
    messages.push(user(50, "Let's ship on Friday."));
    let stated = recorded(&messages);
    assert_eq!(
        current_texts(&stated),
        [
            "Never push to main.",
            "Step 39: can you check the status of ticket 4139?",
            "Let's ship on Friday.",
        ]
    );
    // Sayings the subject rules read as replacing each other are folded
    // too, and leave no history behind.
    let turns: Vec<Message> = (0..12)
        .map(|i| {
            user(
                i + 1,
                &format!("Turn {i}: please look at src/module_{i}.rs and explain why test_case_{i} fails."),
            )
        })
        .collect();
    let stated = recorded(&turns);
    assert_eq!(
        current_texts(&stated),
        ["Turn 11: please look at src/module_11.rs and explain why test_case_11 fails."]
    );
    assert_eq!(stated.superseded().count(), 0);
    // Said twice, a sentence is no template yet: both stay.
    let twice = recorded(&[
        user(1, "Book a table at Luigi's."),
        user(2, "Book a table at Hanami."),
    ]);
    assert_eq!(twice.current().count() + twice.superseded().count(), 2);
}

#[test]
fn serde_omits_defaults_and_old_records_read_back() {
    let stated = recorded_at(
        &[
            user(1, "Ship on Friday."),
            user(2, "Ship on Monday instead."),
        ],
        SCOPE,
    );
    let json = serde_json::to_string(&stated).unwrap();
    assert_eq!(
        json,
        r#"[{"kind":"request","text":"Ship on Friday.","source":1,"superseded_by":2,"seq":1},{"kind":"decision","text":"Ship on Monday instead.","source":2,"seq":2}]"#
    );
    assert_eq!(
        serde_json::from_str::<UserStatements>(&json).unwrap(),
        stated
    );
    // A record written before statements kept their place reads back
    // without one.
    let old = r#"[{"kind":"request","text":"Ship on Friday.","source":1}]"#;
    let read: UserStatements = serde_json::from_str(old).unwrap();
    assert_eq!(read.items()[0].seq, None);
}

#[test]
fn render_lists_current_statements_and_marks_every_superseded_line() {
    let stated = recorded(&[
        user(1, "Set the request timeout to 37s."),
        user(4, "Never push to main."),
        user(9, "make the timeout 45s"),
    ]);
    let text = stated.render();
    assert_eq!(
        text,
        format!(
            "{CURRENT_HEADING}\n- #4 constraint: Never push to main.\n- #9 request: make the timeout 45s\n\
{SUPERSEDED_HEADING}\n- #1 request, superseded by #9: Set the request timeout to 37s.\n"
        )
    );
    for line in text.lines().filter(|l| l.contains("37s")) {
        assert!(line.contains("superseded"), "{line}");
    }
    assert_eq!(UserStatements::default().render(), "");
}

#[test]
fn outdated_lines_are_found_by_sentence_or_by_old_value_on_the_same_subject() {
    let stated = recorded(&[
        user(1, "Set the request timeout to 37s."),
        user(2, "Use Postgres for the ledger."),
        user(3, "Please deliver to Kastanienallee 12."),
        user(4, "Expose the snapshots under /v2/fx-snapshots."),
        user(7, "make the timeout 45s"),
        user(8, "scrap Postgres, we'll go with SQLite instead"),
        user(
            9,
            "please deliver to my office at Friedrichstraße 5 instead",
        ),
        user(10, "Rename the route to /v2/fx/snapshots."),
        user(
            11,
            "Can you ask for a window seat on the flight? 14A if possible.",
        ),
        user(12, "Actually make it an aisle seat, 18C: my knee."),
    ]);
    let outdated = stated.outdated();
    for (line, by) in [
        (
            "#1 user: Set the request timeout to 37s. → assistant: Done.",
            7,
        ),
        ("Request timeout is 37s", 7),
        ("The ledger is stored in Postgres.", 8),
        ("Deliveries go to Kastanienallee 12", 9),
        // A list item that is only a value the superseded statement named.
        ("- /v2/fx-snapshots", 10),
        // A line quoting part of a superseded statement.
        ("- User: 14A if possible.", 12),
    ] {
        assert_eq!(outdated.superseded_by(line), Some(MessageId(by)), "{line}");
    }
    for line in [
        "The build took 37s.",
        "Timeout raised from 37s to 45s.",
        "Switched the ledger from Postgres to SQLite.",
        "Postgres 16 is installed on the build host.",
        "Request timeout 37s [superseded by the user at #7]",
        "make the timeout 45s",
        "- /v2/fx/snapshots",
        "- Postgres",
        "- User: Actually make it an aisle seat, 18C: my knee.",
    ] {
        assert_eq!(outdated.superseded_by(line), None, "{line}");
    }
    assert_eq!(
        outdated.mark("Request timeout is 37s").as_deref(),
        Some("Request timeout is 37s [superseded by the user at #7]")
    );
}

proptest::proptest! {
    #[test]
    fn extraction_and_recording_never_panic_and_recording_is_idempotent(
        texts in proptest::collection::vec("[ -~\u{e9}\u{2019}\u{201c}\u{201d}\u{6771}\n?.!,;:`\"]{0,160}", 0..12),
        cues in proptest::collection::vec(0usize..12, 0..12),
    ) {
        const CUES: [&str; 12] = [
            "never ", "we'll go with ", "set the timeout to 3", "scrap ", " instead", "don't ",
            "must ", " is off", "I'm allergic to ", "only ", "ship on Friday", "no longer need ",
        ];
        let messages: Vec<Message> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let cue = cues.get(i).map_or("", |&c| CUES[c]);
                user(i as i64, &format!("{cue}{t}"))
            })
            .collect();
        let batch = extract(&messages);
        let caps = StatedCaps { current: 5, superseded: 2 };
        let mut stated = UserStatements::default();
        stated.record(batch.clone(), &caps, SCOPE);
        let once = stated.clone();
        stated.record(batch, &caps, SCOPE);
        proptest::prop_assert_eq!(&stated, &once);
        proptest::prop_assert!(stated.shown().count() <= 5);
        proptest::prop_assert!(stated.current().count() <= 5 * STORED_PER_SHOWN);
        proptest::prop_assert!(stated.superseded().count() <= 2);
        let _ = stated.render();
        let outdated = stated.outdated();
        for t in &texts {
            let _ = outdated.superseded_by(t);
        }
    }
}

proptest::proptest! {
    #[test]
    fn arbitrary_unicode_never_panics(text in "\\PC{0,400}", cue in 0usize..4) {
        let text = format!("{}{text}", ["", "never ", "set the ", "scrap "][cue]);
        let found = extract(&[user(1, &text), user(2, &text)]);
        let mut stated = UserStatements::default();
        stated.record(found, &StatedCaps::default(), SCOPE);
        let _ = classify(&text);
        let _ = stated.outdated().superseded_by(&text);
    }
}

#[test]
fn a_new_email_from_now_on_supersedes_the_old_one() {
    let s = recorded(&[
        user(1, "Please send confirmations to noor.a@proton.me."),
        user(
            9,
            "From now on use noor@studio.example for everything; I'm closing the old account.",
        ),
    ]);
    let old = s.items().iter().find(|x| x.source == MessageId(1)).unwrap();
    assert_eq!(old.superseded_by, Some(MessageId(9)), "{:?}", s.items());
}

#[test]
fn a_choice_beside_a_detail_of_someone_else_is_read() {
    let s = recorded(&[user(
        9,
        "A friend swears by Lothian Removals, let's go with them instead. The deposit goes to the new landlord, her number is 0131 496 0744.",
    )]);
    assert!(
        s.current().any(|x| x.source == MessageId(9)),
        "the choice is read: {:?}",
        s.items()
    );
}

#[test]
fn statements_after_a_framing_phrase_are_read_and_a_name_set_again_supersedes() {
    let s = recorded(&[
        user(
            1,
            "For the local job store let's go with SQLite: one file, nothing to run.",
        ),
        user(
            2,
            "For the backfill job use INVOICE_BATCH_SIZE=300; we can tune it later.",
        ),
        user(3, "Expose the snapshots read-only under /v2/fx-snapshots."),
        user(9, "The backfill is too slow, set INVOICE_BATCH_SIZE=1200."),
        user(
            10,
            "Scrap SQLite, use Postgres instead: the reconcile job needs concurrent writers.",
        ),
    ]);
    let by = |id: i64| superseded_by(&s, id);
    assert_eq!(by(1), Some(MessageId(10)));
    assert_eq!(by(2), Some(MessageId(9)));
    assert_eq!(by(3), None);
    assert_eq!(by(9), None);
}

#[test]
fn a_change_to_a_time_or_a_count_of_the_same_unit_supersedes() {
    let s = recorded(&[
        user(
            1,
            "And book the 07:40 train to London King's Cross on the 11th.",
        ),
        user(2, "Yes, 2 nights, and keep it under €900 in total."),
        user(3, "Could you book dinner for two on the 13th, 20:30 WET?"),
        user(7, "No wait, book the 09:15 one, the 07:40 is too early."),
        user(8, "We're staying longer: make the hotel 3 nights."),
    ]);
    let by = |id: i64| superseded_by(&s, id);
    assert_eq!(by(1), Some(MessageId(7)));
    assert_eq!(by(2), Some(MessageId(8)), "{:?}", s.items());
    assert_eq!(by(3), None, "another time, not named by the change");
}

/// What superseded the statement of message `id` (it must have been read).
fn superseded_by(s: &UserStatements, id: i64) -> Option<MessageId> {
    s.items()
        .iter()
        .find(|x| x.source == MessageId(id))
        .unwrap_or_else(|| panic!("#{id} not read: {:?}", s.items()))
        .superseded_by
}

#[test]
fn the_same_subject_set_to_another_value_supersedes() {
    let s = recorded(&[
        user(
            1,
            "Keep the MSRV at 1.72: the on-prem customers build with an old toolchain.",
        ),
        user(2, "Keep the pool size at 10."),
        user(
            8,
            "Good news: the build box was upgraded, so we can bump the MSRV to 1.74.",
        ),
        user(9, "Bump the batch size to 50."),
    ]);
    assert_eq!(superseded_by(&s, 1), Some(MessageId(8)), "{:?}", s.items());
    assert_eq!(
        superseded_by(&s, 2),
        None,
        "another subject: {:?}",
        s.items()
    );
}

#[test]
fn current_texts_answer_as_is_current_text_does() {
    let stated = recorded(&[
        user(1, "Set the request timeout to 37s."),
        user(5, "Never deploy on Fridays."),
        user(9, "make the timeout 45s"),
    ]);
    assert!(
        stated.superseded().count() > 0,
        "one statement is superseded"
    );
    let set = stated.current_texts();
    for text in [
        "make the timeout 45s",
        "  Make the TIMEOUT 45s. ",
        "Never deploy on Fridays.",
        "Set the request timeout to 37s.",
        "Something else entirely.",
        "",
        "  ",
    ] {
        assert_eq!(set.contains(text), stated.is_current_text(text), "{text:?}");
    }
    assert!(set.contains("never deploy on fridays"));
    assert!(!set.contains("Set the request timeout to 37s."));
}

#[test]
fn a_replacement_outdates_the_values_of_the_forms_it_names() {
    let s = recorded(&[
        user(
            1,
            "Yes, 2 nights, and keep it under €900 in total. Something like https://stays.example/listing/96242 but a proper hotel.",
        ),
        user(2, "We're staying longer: make the hotel 3 nights."),
    ]);
    assert_eq!(superseded_by(&s, 1), Some(MessageId(2)), "{:?}", s.items());
    let outdated = s.outdated();
    // The sentence that said "2 nights" is outdated as a whole ...
    assert_eq!(
        outdated.superseded_by("- #1 user: Yes, 2 nights, and keep it under €900 in total."),
        Some(MessageId(2))
    );
    // ... but the budget beside it was not replaced.
    assert_eq!(outdated.superseded_by("- €900"), None);
    // A replacement that names none of the old statement's forms
    // replaced it whole.
    let s = recorded(&[
        user(1, "Move the standup to 7pm."),
        user(2, "Move the standup to 19:30 instead."),
    ]);
    assert_eq!(superseded_by(&s, 1), Some(MessageId(2)), "{:?}", s.items());
}

#[test]
fn a_statement_changed_in_part_is_shown_current_without_the_changed_value() {
    let s = recorded(&[
        user(1, "Yes, 2 nights, and keep it under €900 in total."),
        user(2, "We're staying longer: make the hotel 3 nights."),
    ]);
    assert_eq!(superseded_by(&s, 1), Some(MessageId(2)), "{:?}", s.items());
    let (current, old) = shown_parts(&s);
    let text = s.render();
    // The budget still holds, as the user said it; the nights are cut.
    assert!(
        current.contains("keep it under €900 in total") && current.contains("… nights"),
        "{text}"
    );
    assert!(!current.contains("2 nights"), "{text}");
    // Only the changed value is shown superseded.
    assert!(old.contains("superseded by #2: 2\n"), "{text}");
    assert!(!old.contains("€900"), "{text}");
    // Replaced whole, a statement is shown whole among the superseded.
    let s = recorded(&[
        user(1, "Move the standup to 7pm."),
        user(2, "Move the standup to 19:30 instead."),
    ]);
    let (_, old) = shown_parts(&s);
    let text = s.render();
    assert!(old.contains("Move the standup to 7pm."), "{text}");
}

/// Where the old statement has several values of the changed form, the
/// change takes the one said between the same words: a new amount before
/// `€` changes the amount, not the groups of an IBAN nor the number of a
/// reference, which stay current as the user said them.
#[test]
fn a_change_takes_the_value_said_in_its_place_not_every_number() {
    let s = recorded(&[
        user(
            1,
            "Send 158,76 € to ES83 7888 7182 3310 6443 28, reference \"Rent 2970\".",
        ),
        user(2, "Sorry, I meant to send 1.182,45 € instead."),
    ]);
    assert_eq!(superseded_by(&s, 1), Some(MessageId(2)), "{:?}", s.items());
    let (current, old) = shown_parts(&s);
    let text = s.render();
    assert!(
        current.contains("ES83 7888 7182 3310 6443 28") && current.contains("Rent 2970"),
        "{text}"
    );
    assert!(old.contains("superseded by #2: 158,76\n"), "{text}");
}

#[test]
fn a_value_form_folds_runs_and_a_numbers_separators() {
    use super::skeleton;
    assert_eq!(skeleton("3"), skeleton("1,100"));
    assert_ne!(skeleton("3"), skeleton("10:30"));
    assert_eq!(skeleton("14a"), skeleton("18c"));
    assert_eq!(skeleton("/v2/fx-snapshots"), skeleton("/v2/fx/snapshots"));
    assert_eq!(skeleton("€900"), skeleton("€1,100.50"));
    assert_ne!(skeleton("€900"), skeleton("3"));
    assert_ne!(skeleton("14a"), skeleton("14"));
}

#[test]
fn a_statement_restated_whole_by_a_later_one_is_listed_once() {
    let stated = recorded(&[user(
        3,
        "Please keep the staging cluster on version 1.29 until the audit ends. \
         Please keep the staging cluster on version 1.29 until the audit is over.",
    )]);
    assert_eq!(stated.shown().count(), 2, "both are recorded");
    let text = stated.render();
    assert!(!text.contains("audit ends"), "{text}");
    assert!(text.contains("audit is over"), "{text}");
    // A later sentence that drops a value restates nothing: both stay.
    let stated = recorded(&[user(
        4,
        "Please keep the staging cluster on version 1.29 until the audit ends in May. \
         Please keep the staging cluster on version 1.29 until the audit ends soon.",
    )]);
    assert!(stated.render().contains("in May"));
}

#[test]
fn a_change_replaces_only_values_of_its_own_form() {
    let s = recorded(&[
        user(704, "Other big news: we're moving house on 28 June."),
        user(
            744,
            "The deposit of £1,380.00 goes to the new landlord, Grace Okafor, her number is 0131 496 0744.",
        ),
        user(
            816,
            "The contents insurance is policy POL-73693538, they need the new address later.",
        ),
        user(1204, "This is also INC-44650 on the incident board."),
        user(1325, "Deploy the canary to eu-west-1 first."),
        user(
            1522,
            "Change of plan: canary in eu-central-1 instead of eu-west-1, that's where the incident is.",
        ),
    ]);
    let by = |id: i64| superseded_by(&s, id);
    // A policy number is no new deposit, a region no new ticket.
    assert_eq!(by(704), None);
    assert_eq!(by(744), None);
    assert_eq!(by(1204), None);
    // The region it names instead is replaced.
    assert_eq!(by(1325), Some(MessageId(1522)));
}

#[test]
fn a_pasted_record_gives_the_records_values_not_the_users_requests() {
    let text = "Bitte prüfe diese Rechnung von Elbtal Logistik AG.\n\n\
Rechnung Nr. RE-987235\n\
Anschrift: Hauptstraße 62, 99613 Leipzig\n\
Gesamtbetrag: 34.340,36 €\n\
Hinweis: nie an die alte Adresse liefern\n\
Zahlbar innerhalb von 14 Tagen ohne Abzug.";
    assert_eq!(
        extracted(text),
        [
            (
                StatementKind::Request,
                "Bitte prüfe diese Rechnung von Elbtal Logistik AG.".to_owned()
            ),
            // A rule stays a rule wherever the user wrote it.
            (
                StatementKind::Constraint,
                "Hinweis: nie an die alte Adresse liefern".to_owned()
            ),
        ]
    );
}

#[test]
fn a_pasted_document_states_what_its_author_states_not_the_users_requests() {
    let text = "Here is the audit report. Never forward it outside the team.\n\n\
The audit was led by Ingrid Halvorsen and covered the site in Graz. \
Employees must not share their badges with visitors under any circumstances. \
The committee discussed the broader context at some length before moving on.\n\n\
The contract XX-8737 was signed on July 21, 2026 for a total of EUR 99,418.62. \
Costs rose by 14.5% compared with the previous period, and the board noted it. \
The final report is due on April 26, 2026, according to Amara Ferreira.\n\n\
Let's go with the shorter summary.";
    assert_eq!(
        extracted(text),
        [
            (
                StatementKind::Constraint,
                "Never forward it outside the team.".to_owned()
            ),
            (
                StatementKind::Decision,
                "Let's go with the shorter summary.".to_owned()
            ),
        ]
    );
}

#[test]
fn a_change_of_mind_supersedes_what_was_just_said_in_five_languages() {
    for (said, changed) in [
        (
            "Send it to 50 Maple Avenue, Springfield.",
            "Actually, please send it to my office instead: 12 Harbor Road, Portland.",
        ),
        (
            "Schicken Sie ihn an Lindenstraße 82, 04109 Leipzig.",
            "Schicken Sie ihn doch lieber an mein Büro: Am Markt 75, 80331 München.",
        ),
        (
            "Envíelo a Calle Mayor 76, 28013 Madrid.",
            "Mejor envíelo a mi oficina: Avenida del Puerto 56, 46011 Valencia.",
        ),
        (
            "Envoyez-le au 38 rue des Lilas, 69003 Lyon.",
            "Envoyez-le plutôt à mon bureau : 86 boulevard Voltaire, 75011 Paris.",
        ),
        (
            "東京都渋谷区神南1-44-3に送ってください。",
            "やっぱり会社に送ってください：大阪府大阪市北区梅田2-64-1。",
        ),
    ] {
        let s = recorded(&[user(1, said), user(3, changed)]);
        assert_eq!(superseded_by(&s, 1), Some(MessageId(3)), "{changed}");
        assert_eq!(superseded_by(&s, 3), None, "{changed}");
        // Without the cue nothing changed (but in English, where sending
        // to a place sets the address by its own words: see
        // `the_same_subject_set_to_another_value_supersedes`).
        if said.starts_with("Send") {
            continue;
        }
        let plain = changed
            .replace("Actually, ", "")
            .replace(" instead", "")
            .replace(" doch lieber", "")
            .replace("Mejor e", "E")
            .replace(" plutôt", "")
            .replace("やっぱり", "");
        let s = recorded(&[user(1, said), user(3, &plain)]);
        assert_eq!(superseded_by(&s, 1), None, "{plain}");
    }
}

/// Records each message's statements at its place: message `id` is said
/// `id` messages into the workstream.
fn recorded_at(messages: &[Message], scope: u64) -> UserStatements {
    let mut stated = UserStatements::default();
    for m in messages {
        let seq = m.id.0 as u64;
        let found = extract(std::slice::from_ref(m))
            .into_iter()
            .map(|s| s.at(seq));
        stated.record(found, &StatedCaps::default(), scope);
    }
    stated
}

/// SGD, two dialogues 116 messages apart: the second's "make it half past
/// 12 in the afternoon" changed its own booking's time, not the first's
/// (only "afternoon" ties them). Said a few messages after it, it changes
/// it; a key named again reaches back any distance.
#[test]
fn a_word_of_when_ties_a_change_to_what_was_said_near_only() {
    let first = "I would like to go on the 8th of March at a quarter to 4 in the afternoon.";
    let change = "Make it half past 12 in the afternoon.";
    let far = recorded_at(
        &[
            user(1009, first),
            user(1011, "That is correct."),
            user(1121, "I want it in SFO. Japanese food would be great."),
            user(1125, change),
        ],
        SCOPE,
    );
    assert!(far.superseded().next().is_none(), "{far:?}");
    assert!(shown_texts(&far).contains(&first), "{far:?}");
    let near = recorded_at(&[user(1009, first), user(1013, change)], SCOPE);
    assert_eq!(shown_texts(&near), [change], "{near:?}");
    let keyed = recorded_at(
        &[
            user(3, "Use INVOICE_BATCH_SIZE=300 for the import."),
            user(400, "Set INVOICE_BATCH_SIZE=1200 from now on."),
        ],
        SCOPE,
    );
    assert_eq!(
        shown_texts(&keyed),
        ["Set INVOICE_BATCH_SIZE=1200 from now on."],
        "{keyed:?}"
    );
}

/// A pasted transcript is what its speakers said: none of its turns is
/// the user's decision ("Lena: Let's keep this short" was one), whatever
/// the language.
#[test]
fn a_pasted_transcripts_turns_are_not_the_users_statements() {
    for paste in [
        "Here are the notes from the Atlas sync, can you summarise the decisions?\n\n\
         Lena: Let's keep this short, I have another call.\n\
         Noor: We go with IONOS for hosting, contract C-45739.\n\
         Lena: Good point.\n\
         Declan: Let's ship Atlas v2.3.1 on 4 March.",
        "Hier die Notizen vom Ember-Sync:\n\n\
         Henrik: Lasst uns das kurz halten.\n\
         Declan: Wir nehmen IONOS fürs Hosting, Vertrag C-90232.\n\
         Henrik: Nächster Punkt.",
    ] {
        let got = extracted(paste);
        assert!(
            got.iter().all(|(_, text)| !text.contains(':')),
            "a turn framed: {got:?}"
        );
    }
}

/// "Actually, make it 10s" refers to what was said just before it: a
/// correction a hundred messages on, in another task, leaves the last
/// statement of its shape as it was.
#[test]
fn a_keyless_change_refers_only_to_what_was_said_near() {
    let near = recorded_at(
        &[
            user(1, "Set the retry delay to 5s."),
            user(5, "Actually, make it 10s."),
        ],
        SCOPE,
    );
    assert_eq!(shown_texts(&near), ["Actually, make it 10s."], "{near:?}");
    let far = recorded_at(
        &[
            user(1, "Set the retry delay to 5s."),
            user(160, "Actually, make it 10s."),
        ],
        SCOPE,
    );
    assert!(far.superseded().next().is_none(), "{far:?}");
}

/// The next record of a series is no change of the last one: a statement
/// that gives two values or more, none of the old one's, and says no
/// change, leaves it current; a change keeps what it does not change.
#[test]
fn the_next_record_of_a_series_supersedes_nothing() {
    let series = recorded(&[
        user(
            1,
            "New character: Tari Mardor, 36, a ferryman from Sarigor.",
        ),
        user(
            3,
            "New character: Ysze Robremar, 52, a blacksmith from Velgorha.",
        ),
    ]);
    assert!(series.superseded().next().is_none(), "{series:?}");
    // (One value set anew is a change: a_new_value_for_the_same_key_…)
}
