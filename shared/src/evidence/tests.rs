use super::*;
use crate::tokens::CharEstimator;

fn msg(id: i64, role: Role, text: &str) -> Message {
    Message::text(id, role, text)
}

/// The lines one message of `role` is read into, as text.
fn read_texts(role: Role, text: &str) -> Vec<String> {
    read(&[msg(1, role, text)], 280)
        .lines
        .into_iter()
        .map(|c| c.line.text)
        .collect()
}

fn choose(messages: &[Message], previous: &Evidence, budget: u64) -> Chosen {
    let config = EvidenceConfig::default();
    let mut g = Gathering::default();
    g.add(read(messages, config.max_line_chars), previous.seen);
    g.choose(previous, &[], "", budget, &config, &CharEstimator::new(3))
}

/// A support chat: a greeting and a menu in every answer, and one order
/// reference, one amount and one name said once each.
fn support_chat() -> Vec<Message> {
    let mut m = Vec::new();
    let mut id = 1;
    for i in 0..30 {
        let user = match i {
            4 => "My order is #A-448213 and it never arrived.".to_owned(),
            9 => "I paid EUR 1,249.90 for it.".to_owned(),
            14 => "Please send it to Hotel Adlon instead of my home.".to_owned(),
            _ => format!("ok, and what about the other thing number {}", i % 3),
        };
        m.push(msg(id, Role::User, &user));
        id += 1;
        m.push(msg(
            id,
            Role::Assistant,
            "Thank you for contacting support! How can I help you today? Options: track, refund, change address.",
        ));
        id += 1;
    }
    m
}

#[test]
fn rare_values_are_kept_and_boilerplate_is_not() {
    let chosen = choose(&support_chat(), &Evidence::default(), 200);
    let text = chosen.evidence.render();
    for value in ["#A-448213", "EUR 1,249.90", "Hotel Adlon"] {
        assert!(text.contains(value), "{value} missing from\n{text}");
    }
    assert!(
        text.matches("Thank you for contacting support").count() <= 1,
        "{text}"
    );
    assert!(chosen.kept >= 3 && chosen.dropped > 0, "{chosen:?}");
}

#[test]
fn the_budget_is_respected() {
    let chosen = choose(&support_chat(), &Evidence::default(), 40);
    let estimator = CharEstimator::new(3);
    let tokens = estimator.count(&chosen.evidence.render());
    assert!(tokens <= 40, "{tokens}");
    assert!(!chosen.evidence.is_empty());
}

#[test]
fn a_message_kept_over_several_lines_cites_itself_once() {
    let output = "pod api-7f9c CrashLoopBackOff restarts=14\n\
pod worker-2b81 OOMKilled limit=512Mi\n\
pod cron-91ad ImagePullBackOff tag=v2.31.4\n\
pod web-5d2e Pending node=ip-10-0-3-17";
    let messages = vec![
        msg(1, Role::User, "What is wrong with the cluster?"),
        msg(2, Role::Assistant, output),
        msg(3, Role::User, "Fix the worker first."),
    ];
    let chosen = choose(&messages, &Evidence::default(), 500);
    let text = chosen.evidence.render();
    for value in ["api-7f9c", "worker-2b81", "cron-91ad", "ip-10-0-3-17"] {
        assert!(text.contains(value), "{value} missing:\n{text}");
    }
    // One citation, the other lines under it.
    assert_eq!(text.matches("#2 a: ").count(), 1, "{text}");
    let under: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(CONTINUATION))
        .collect();
    assert_eq!(under.len(), 3, "{text}");
    // And the choice counted them so: what a budget that fits the lines
    // with one citation keeps is all of them.
    let e = CharEstimator::new(3);
    let fits: u64 = text.lines().map(|l| e.count(&format!("{l}\n"))).sum();
    let again = choose(&messages, &Evidence::default(), fits);
    assert_eq!(again.evidence.render(), text);
}

#[test]
fn no_two_kept_lines_nearly_repeat_each_other() {
    let messages: Vec<Message> = (1..=40)
        .map(|i| {
            msg(
                i,
                Role::Assistant,
                &format!("Step {i}: ran the migration job on db-eu-1 and it finished with status OK after a while"),
            )
        })
        .collect();
    let chosen = choose(&messages, &Evidence::default(), 5_000);
    let lines = &chosen.evidence.lines;
    for (i, a) in lines.iter().enumerate() {
        for b in &lines[i + 1..] {
            let j = select::jaccard(&select::shingles(&a.text), &select::shingles(&b.text));
            assert!(j < select::NEAR_DUPLICATE, "{} ~ {} ({j})", a.text, b.text);
        }
    }
}

#[test]
fn kept_lines_carry_forward_and_compete_with_new_ones() {
    let first = choose(&support_chat(), &Evidence::default(), 200);
    assert_eq!(first.evidence.seen, 60);
    let later: Vec<Message> = (100..140)
        .map(|i| msg(i, Role::User, "fine, thanks, nothing else for now"))
        .collect();
    let second = choose(&later, &first.evidence, 200);
    let text = second.evidence.render();
    assert!(text.contains("#A-448213"), "{text}");
    assert_eq!(second.evidence.seen, 100);
    assert!(second.evidence.lines.iter().all(|l| l.seq < 100));
}

#[test]
fn a_superseded_value_is_marked_on_its_line() {
    let messages = vec![
        msg(1, Role::User, "Book a table for 4 at 7 pm, please."),
        msg(2, Role::Assistant, "Sure, which restaurant?"),
        msg(3, Role::User, "Actually, make it at 8 pm instead."),
    ];
    let chosen = choose(&messages, &Evidence::default(), 500);
    let text = chosen.evidence.render();
    // The replaced value is cut out of its line and marked on a line of
    // its own; the rest of its line is still current.
    assert!(text.contains("#1 u: 7 [superseded by #3]\n"), "{text}");
    let old = text
        .lines()
        .find(|l| l.contains("table for 4"))
        .unwrap_or_else(|| panic!("the rest of the line is kept: {text}"));
    assert!(!old.contains("superseded") && !old.contains(" 7 "), "{old}");
    let new = text.lines().find(|l| l.contains("8 pm")).unwrap();
    assert!(!new.contains("superseded"), "{new}");
}

#[test]
fn the_same_words_around_another_date_far_on_tell_of_another_event() {
    // A chat: the user names a day twice, the second time weeks of talk
    // later and with no word of change. Two events, both current.
    let mut messages = vec![msg(
        1,
        Role::User,
        "We went hiking on 9 June with the kids.",
    )];
    let talk = [
        "lovely",
        "wonderful",
        "great",
        "amazing",
        "nice",
        "brilliant",
    ];
    for (i, word) in talk.iter().enumerate() {
        let id = 2 + 2 * i as i64;
        messages.push(msg(
            id,
            Role::Assistant,
            &format!("That sounds {word}, tell me more."),
        ));
        messages.push(msg(id + 1, Role::User, &format!("It was {word} indeed.")));
    }
    messages.push(msg(
        30,
        Role::User,
        "Then on 27 June we baked bread at home.",
    ));
    let chosen = choose(&messages, &Evidence::default(), 2_000);
    let text = chosen.evidence.render();
    assert!(chosen.evidence.replaced.is_empty(), "{text}");
    assert!(!text.contains("superseded"), "{text}");
    assert!(
        text.contains("9 June") && text.contains("27 June"),
        "{text}"
    );

    // Said right after, the same words around another day correct it.
    let messages = vec![
        msg(1, Role::User, "Book the visit on 9 June with the agent."),
        msg(2, Role::Assistant, "Booked for the 9th."),
        msg(3, Role::User, "Book the visit on 12 June with the agent."),
    ];
    let replaced = choose(&messages, &Evidence::default(), 2_000)
        .evidence
        .replaced;
    assert!(
        replaced
            .iter()
            .any(|r| r.value == "9 june" && r.by == MessageId(3)),
        "{replaced:?}"
    );
}

#[test]
fn reading_cuts_long_lines_and_skips_reasoning() {
    let long =
        "word ".repeat(200) + "and finally the code ZX-9931 appears. " + &"more ".repeat(100);
    let m = Message::new(
        1,
        Role::Assistant,
        vec![
            Part::Reasoning {
                text: "secret plan R-1234".into(),
            },
            Part::text(long),
        ],
    );
    let r = read(&[m], 280);
    assert!(r.lines.iter().all(|c| c.line.text.chars().count() <= 280));
    assert!(r.lines.iter().any(|c| c.line.text.contains("ZX-9931")));
    assert!(r.lines.iter().all(|c| !c.line.text.contains("R-1234")));
}

#[test]
fn tool_output_values_the_assistant_used_rank_above_unused_ones() {
    let messages = vec![
        msg(1, Role::User, "what is the build id?"),
        Message::new(
            2,
            Role::Assistant,
            vec![Part::tool_call(
                "c1",
                "bash",
                serde_json::json!({"cmd": "ci status"}),
            )],
        ),
        Message::new(
            3,
            Role::Tool,
            vec![Part::tool_result(
                "c1",
                "bash",
                "build b-77123 passed\nrunner r-55512 idle",
            )],
        ),
        msg(4, Role::Assistant, "The build b-77123 passed."),
    ];
    let chosen = choose(&messages, &Evidence::default(), 20);
    let text = chosen.evidence.render();
    assert!(text.contains("b-77123"), "{text}");
    assert!(!text.contains("r-55512"), "{text}");
}

#[test]
fn an_assistants_line_is_squeezed_to_its_values_and_the_words_that_join_them() {
    // The workstream's every-day words: said in every other message.
    let mut messages: Vec<Message> = (1..=60)
        .map(|i| {
            msg(
                i,
                Role::Assistant,
                &format!(
                    "Well, after thinking about it for a while I can book a seat for you to leave and return, and any of it is fine, step {i}."
                ),
            )
        })
        .collect();
    let line = "Well, after thinking about it for a while I can book you to leave on March 5th with a return on the 13th of March, and any seat is fine.";
    messages.push(msg(61, Role::Assistant, line));
    let chosen = choose(&messages, &Evidence::default(), 500);
    let kept = chosen
        .evidence
        .lines
        .iter()
        .find(|l| l.at == MessageId(61))
        .unwrap_or_else(|| panic!("{:?}", chosen.evidence.lines));
    let text = &kept.text;
    assert!(
        text.contains("March 5th") && text.contains("13th of March"),
        "{text}"
    );
    assert!(
        !text.contains("thinking") && text.len() < line.len() / 2,
        "{text}"
    );
}

#[test]
fn replaced_values_are_remembered_and_marked_where_still_stated() {
    let messages = vec![
        msg(1, Role::User, "deadline: 2026-03-01"),
        msg(2, Role::Assistant, "Noted, I will plan for it."),
        msg(3, Role::User, "deadline: 2026-04-01"),
    ];
    let chosen = choose(&messages, &Evidence::default(), 500);
    let e = &chosen.evidence;
    assert_eq!(e.replaced.len(), 1, "{e:?}");
    assert_eq!(e.replaced[0].value, "2026-03-01");
    let mut summary = crate::summary::Summary::empty(crate::summary::SummaryFormat::Sections);
    summary.key_facts = vec![
        "The deadline is 2026-03-01.".into(),
        "Ship on 2026-04-01.".into(),
    ];
    assert_eq!(e.mark_summary(&mut summary), 1);
    assert_eq!(
        summary.key_facts[0],
        "The deadline is 2026-03-01. [superseded by #3: 2026-03-01]"
    );
    // Said again as the slot's value, it is current again.
    let again = vec![msg(10, Role::User, "deadline: 2026-03-01 after all")];
    let third = choose(&again, e, 500);
    assert!(
        third
            .evidence
            .replaced
            .iter()
            .all(|r| r.value != "2026-03-01"),
        "{:?}",
        third.evidence.replaced
    );
}

#[test]
fn values_only_a_superseded_statement_held_are_replaced_and_marked() {
    let stated: crate::stated::UserStatements = serde_json::from_value(serde_json::json!([
        {"kind": "decision", "text": "And book the 07:40 train to London on the 11th.",
         "source": 5, "superseded_by": 9},
        {"kind": "decision", "text": "No wait, book the 09:15 one, the 07:40 is too early.",
         "source": 9}
    ]))
    .unwrap();
    let mut e = Evidence {
        lines: vec![
            Line {
                at: MessageId(6),
                seq: 6,
                speaker: Speaker::Tool,
                text: r#"book_train {"departure":"07:40","day":"11 Nov"}"#.into(),
                superseded: Vec::new(),
                of: 0,
                record: false,
                read: String::new(),
            },
            Line {
                at: MessageId(5),
                seq: 5,
                speaker: Speaker::User,
                text: "… book the 07:40 train to London …".into(),
                superseded: Vec::new(),
                of: 0,
                record: false,
                read: String::new(),
            },
        ],
        seen: 10,
        replaced: Vec::new(),
        ..Evidence::default()
    };
    e.mark_statements(&stated, 24);
    // 07:40 is only named beside 09:15 by the current statement: replaced.
    assert!(
        e.replaced
            .iter()
            .any(|r| r.value == "07:40" && r.by == MessageId(9)),
        "{e:?}"
    );
    assert!(
        e.lines[0].superseded.iter().any(|r| r.value == "07:40"),
        "{e:?}"
    );
    // The clip of the superseded statement is marked as a whole.
    assert!(
        e.lines[1].superseded.iter().any(|r| r.value.is_empty()),
        "{e:?}"
    );
    let at = |n| Some((MessageId(n), MessageId(n)));
    assert!(e.replaced_in("- 07:40 (#5)", at(5)).is_some());
    assert!(e.replaced_in("- 07:40 (#12)", at(12)).is_none());
}

/// A value a later dialogue replaced is not replaced where an earlier,
/// unrelated dialogue said it: "the 11th" of a house visit (#1029),
/// changed at #1109, leaves the "March 11th" of a football match (#156)
/// and of a flight (#255) current.
#[test]
fn a_replacement_does_not_reach_back_past_the_mention_it_replaced() {
    let stated: crate::stated::UserStatements = serde_json::from_value(serde_json::json!([
        {"kind": "constraint", "text": "I would like to visit it on the 11th of this month.",
         "source": 1029, "superseded_by": 1109},
        {"kind": "constraint", "text": "Reserve the table for the 2nd of this month.",
         "source": 1109}
    ]))
    .unwrap();
    let line = |at: i64, speaker, text: &str| Line {
        at: MessageId(at),
        seq: at as u64,
        speaker,
        text: text.into(),
        superseded: Vec::new(),
        of: 0,
        record: false,
        read: String::new(),
    };
    let mut e = Evidence {
        lines: vec![
            line(
                156,
                Speaker::Assistant,
                "There's a Timbers Vs Earthquakes game on March 11th.",
            ),
            line(
                1031,
                Speaker::Assistant,
                "Your visit on the 11th is booked.",
            ),
        ],
        seen: 1200,
        replaced: Vec::new(),
        ..Evidence::default()
    };
    e.mark_statements(&stated, 24);
    assert!(
        e.replaced
            .iter()
            .any(|r| r.value == "11th" && r.from == MessageId(1029)),
        "{e:?}"
    );
    assert!(e.lines[0].superseded.is_empty(), "{e:?}");
    assert!(!e.lines[1].superseded.is_empty(), "{e:?}");
    // An exact value recorded from #156 and #255 only is left current; one
    // said again after the replaced mention is not.
    let seen = |first, last| Some((MessageId(first), MessageId(last)));
    assert!(e
        .replaced_in("- March 11th (#156)", seen(156, 255))
        .is_none());
    assert!(e
        .replaced_in("- March 11th (#156)", seen(156, 1031))
        .is_some());
    assert!(e
        .replaced_in("- the 11th (#1029)", seen(1029, 1029))
        .is_some());
}

#[test]
fn a_sentence_that_only_greets_or_closes_the_talk_is_told_in_five_languages() {
    for closing in [
        "No that's it, thanks again.",
        "No, Thanks",
        "Nope, I'm all set.",
        "Danke, das ist alles.",
        "以上です。ありがとうございました。",
        "No, gracias, eso es todo.",
        "Merci, c'est tout.",
        "Hey Mel!",
        "Cool, thanks Gina!",
        "Hallo Anna!",
        "Hola, Marta.",
        "Bonjour Paul !",
    ] {
        assert!(only_closes(closing), "{closing}");
    }
    // A closing that still gives a value is more than a closing.
    for not in [
        "Thanks, make it 7 pm then.",
        "Danke, bitte um 19:30.",
        "ありがとう、3月15日でお願いします。",
        "Gracias, para el 15 de marzo.",
        "Merci, pour 4 personnes.",
        "Use Postgres from now on.",
        "Hi, book it under Smith for Friday please.",
        "Hey, can you move it to 5 pm?",
    ] {
        assert!(!only_closes(not), "{not}");
    }
}

#[test]
fn a_line_the_summary_states_already_is_not_kept_again_markers_and_all() {
    let messages = vec![
        msg(
            1,
            Role::User,
            "what's the weather like in London this week?",
        ),
        msg(2, Role::Assistant, "Sunny in London, 21 degrees."),
    ];
    let config = EvidenceConfig::default();
    let mut g = Gathering::default();
    g.add(read(&messages, config.max_line_chars), 0);
    // The summary's bullet carries a marker: its shingles are more than
    // the line's, which still stands whole within it.
    let shown = "KEY FACTS:\n- User: what's the weather like in London this week? [superseded by #111: london]\n";
    let c = g.choose(
        &Evidence::default(),
        &[],
        shown,
        500,
        &config,
        &CharEstimator::new(3),
    );
    let texts: Vec<&str> = c.evidence.lines.iter().map(|l| l.text.as_str()).collect();
    // (A word no other message said stays, "Sunny" too: the line is
    // nearly whole, and kept so.)
    assert_eq!(texts, ["Sunny in London, 21 degrees."]);
}

#[test]
fn a_tool_line_nobody_took_up_ranks_below_a_name_the_assistant_said() {
    // A file read whole: every markup line is rare, none is what the work
    // used; the assistant then names one function of it.
    let markup: String = (0..12)
        .map(|i| format!("{i}→ <div class=\"pane-{i}\"><span class=\"row-{i}\">"))
        .collect::<Vec<_>>()
        .join("\n");
    let messages = vec![
        msg(1, Role::User, "why is the transcript empty?"),
        Message::new(
            2,
            Role::Assistant,
            vec![Part::tool_call(
                "c1",
                "read",
                serde_json::json!({"path": "session_live.ex"}),
            )],
        ),
        Message::new(3, Role::Tool, vec![Part::tool_result("c1", "read", markup)]),
        msg(
            4,
            Role::Assistant,
            "It never calls `load_session_messages` on mount.",
        ),
    ];
    // (Room for the call and the answer, not for a line of the markup.)
    let chosen = choose(&messages, &Evidence::default(), 32);
    let text = chosen.evidence.render();
    assert!(text.contains("load_session_messages"), "{text}");
    assert!(!text.contains("pane-"), "{text}");
}

#[test]
fn values_of_one_shape_down_one_message_are_a_list_not_a_change() {
    let messages = vec![
        msg(
            1,
            Role::User,
            "The epic has 3 subtasks.\n4. Errors and fixes\n5. Pending tasks",
        ),
        msg(2, Role::Assistant, "Understood."),
    ];
    let chosen = choose(&messages, &Evidence::default(), 500);
    let e = &chosen.evidence;
    assert!(replaces_nothing(e), "{e:?}");
    // Lines of code alike but for a name, down one message, are a list
    // too, their neighbours the same.
    let messages = vec![
        msg(
            1,
            Role::User,
            "The computer:\n```elixir\ninput :messages do\ninput :session_cwd do\ninput :show_debug do\n```",
        ),
        msg(2, Role::Assistant, "Understood."),
    ];
    let chosen = choose(&messages, &Evidence::default(), 500);
    let e = &chosen.evidence;
    assert!(replaces_nothing(e), "{e:?}");
    // The same values in two messages are a change.
    let messages = vec![
        msg(1, Role::User, "The epic has 3 subtasks."),
        msg(2, Role::Assistant, "Understood."),
        msg(3, Role::User, "Sorry, it has 4 subtasks."),
    ];
    let chosen = choose(&messages, &Evidence::default(), 500);
    assert!(
        chosen.evidence.replaced.iter().any(|r| r.value == "3"),
        "{:?}",
        chosen.evidence
    );
}

#[test]
fn a_name_the_user_replaces_is_marked_where_it_stands() {
    let stated: crate::stated::UserStatements = serde_json::from_value(serde_json::json!([
        {"kind": "decision", "text": "Use SQLite for the cache.",
         "source": 3, "superseded_by": 7},
        {"kind": "decision", "text": "Scrap SQLite, use Postgres instead.",
         "source": 7}
    ]))
    .unwrap();
    let mut e = Evidence {
        lines: vec![Line {
            at: MessageId(4),
            seq: 4,
            speaker: Speaker::Assistant,
            text: "The cache now runs on SQLite.".into(),
            superseded: Vec::new(),
            of: 0,
            record: false,
            read: String::new(),
        }],
        seen: 8,
        replaced: Vec::new(),
        ..Evidence::default()
    };
    e.mark_statements(&stated, 24);
    assert!(
        e.replaced
            .iter()
            .any(|r| r.value == "sqlite" && r.by == MessageId(7)),
        "{e:?}"
    );
    assert!(
        e.lines[0].superseded.iter().any(|r| r.value == "sqlite"),
        "{e:?}"
    );
    // Postgres, which the replacing statement brings, is current.
    assert!(e.replaced.iter().all(|r| r.value != "postgres"), "{e:?}");
    // A current statement that still names it keeps it current.
    let still: crate::stated::UserStatements = serde_json::from_value(serde_json::json!([
        {"kind": "decision", "text": "Use SQLite for the cache.",
         "source": 3, "superseded_by": 7},
        {"kind": "decision", "text": "Scrap SQLite, use Postgres instead.",
         "source": 7},
        {"kind": "constraint", "text": "Keep SQLite for the tests.",
         "source": 9}
    ]))
    .unwrap();
    let mut e2 = Evidence {
        seen: 10,
        ..Evidence::default()
    };
    e2.mark_statements(&still, 24);
    assert!(e2.replaced.iter().all(|r| r.value != "sqlite"), "{e2:?}");
}

#[test]
fn what_is_common_is_counted_over_the_whole_workstream() {
    // The first compaction reads 60 answers that all say the same words.
    let first: Vec<Message> = (1..=60)
        .map(|i| {
            msg(
                i,
                Role::Assistant,
                &format!("Let me check the schedule for you, that works fine, ticket {i}."),
            )
        })
        .collect();
    let one = choose(&first, &Evidence::default(), 2_000);
    assert_eq!(one.evidence.vocabulary.get("schedule"), Some(&60));
    // The second reads five messages only: those words are still common.
    let second = vec![msg(
        61,
        Role::Assistant,
        "Let me check the schedule for you: the Caltrain leaves Palo Alto at 7:15 pm.",
    )];
    let two = choose(&second, &one.evidence, 2_000);
    let line = two
        .evidence
        .lines
        .iter()
        .find(|l| l.at == MessageId(61))
        .unwrap_or_else(|| panic!("{:?}", two.evidence.lines));
    assert!(
        !line.text.contains("schedule")
            && line.text.contains("Caltrain leaves Palo Alto at 7:15 pm"),
        "{}",
        line.text
    );
    assert_eq!(two.evidence.vocabulary.get("schedule"), Some(&61));
}

#[test]
fn each_sentence_is_a_line_of_its_own() {
    let texts = read_texts(
        Role::User,
        "Deliveries go to 14 Harbour Street. And never share my phone number with couriers! Is J. Smith in?",
    );
    assert_eq!(
        texts,
        [
            "Deliveries go to 14 Harbour Street.",
            "And never share my phone number with couriers!",
            "Is J. Smith in?"
        ]
    );
}

#[test]
fn a_days_ordinal_point_ends_no_sentence() {
    // German writes a date's day with a point: cut there, the date would
    // be split in two lines, its day in one and its month in the next.
    let texts = read_texts(
        Role::Assistant,
        // (And a no-break space before a day: `from` is a char boundary.)
        "Lieferung am\u{a0}21. März nach Köln. Ich bestelle 2. Danach nichts mehr.",
    );
    assert_eq!(
        texts,
        [
            "Lieferung am\u{a0}21. März nach Köln.",
            "Ich bestelle 2.",
            "Danach nichts mehr."
        ]
    );
}

#[test]
fn a_short_answer_outranks_a_line_of_a_long_listing() {
    // 40 lines read whole, each of its own shape and with a code of its
    // own, then a short answer to a command.
    let listing: String = (0..40)
        .map(|i| format!("ref{}\n", "-q7".repeat(i + 1)))
        .collect();
    let messages = vec![
        msg(1, Role::User, "what runs, and what was the commit?"),
        Message::new(
            2,
            Role::Tool,
            vec![Part::tool_result("c1", "kubectl", listing)],
        ),
        Message::new(
            3,
            Role::Tool,
            vec![Part::tool_result(
                "c2",
                "bash",
                "[fix/fx-stale-rate f328078] fx: refresh stale rates\n",
            )],
        ),
    ];
    let chosen = choose(&messages, &Evidence::default(), 24);
    let text = chosen.evidence.render();
    assert!(text.contains("f328078"), "{text}");
}

#[test]
fn a_rare_word_alone_is_kept_in_a_long_workstream_and_not_in_a_short_one() {
    // A chat's facts are words: "mountains" is said once, the rest of its
    // sentence in every message.
    let chat = |filler: i64| -> Vec<Message> {
        let mut m: Vec<Message> = (1..=filler)
            .map(|i| msg(i, Role::User, "we chose the plan"))
            .collect();
        m.push(msg(filler + 1, Role::User, "we chose the mountains"));
        m
    };
    let long = choose(&chat(400), &Evidence::default(), 400);
    assert!(long.evidence.render().contains("mountains"), "{long:?}");
    // In three messages every word is said once or twice: rarity says
    // nothing, and one word does not make a line worth its tokens.
    let short = choose(&chat(2), &Evidence::default(), 400);
    assert!(!short.evidence.render().contains("mountains"), "{short:?}");
}

#[test]
fn a_failure_in_a_long_output_stands_on_its_own() {
    // Thirty passing tests and one panic, in one output: the panic's line
    // is not one thirtieth of the output's worth.
    let mut output: String = (0..30)
        .map(|i| format!("test suite::case_{i} ... ok\n"))
        .collect();
    output.push_str("thread 'suite::case_7' panicked at src/money/round.rs:197:9:\n");
    let r = read(
        &[Message::new(
            1,
            Role::Tool,
            vec![Part::tool_result("c1", "bash", output)],
        )],
        280,
    );
    let panic = r
        .lines
        .iter()
        .find(|c| c.line.text.contains("panicked"))
        .expect("the panic's line");
    assert!(panic.line.of <= 1, "{:?}", panic.line);
    let passing = r
        .lines
        .iter()
        .find(|c| c.line.text.contains("case_3 "))
        .expect("a passing test's line");
    assert!(passing.line.of > 1, "{:?}", passing.line);
    // The same in another language's tool.
    let r = read(
        &[Message::new(
            2,
            Role::Tool,
            vec![Part::tool_result(
                "c2",
                "make",
                "Schritt 1 ok\nSchritt 2 ok\nSchritt 3: Fehler in build/config.mk",
            )],
        )],
        280,
    );
    let failed = r
        .lines
        .iter()
        .find(|c| c.line.text.contains("config.mk"))
        .expect("the failing step");
    assert!(failed.line.of <= 1, "{:?}", failed.line);
}

#[test]
fn a_quoted_command_is_kept_whole_however_common_its_words() {
    // "rollout restart deployment" is said in every other message; the
    // command the assistant ran is one value and keeps those words.
    let mut messages = Vec::new();
    for i in 0..20 {
        messages.push(msg(
            2 * i + 1,
            Role::User,
            &format!("rollout restart deployment status number {i}, please"),
        ));
        messages.push(msg(
            2 * i + 2,
            Role::Assistant,
            "The rollout restart deployment is fine.",
        ));
    }
    let command = "kubectl rollout restart deployment invoice-worker -n billing-staging";
    messages.push(Message::new(
        41,
        Role::Assistant,
        vec![Part::tool_call(
            "c1",
            "bash",
            serde_json::json!({ "command": command }),
        )],
    ));
    let chosen = choose(&messages, &Evidence::default(), 400);
    let text = chosen.evidence.render();
    assert!(text.contains(command), "{text}");
}

#[test]
fn commit_hashes_of_one_log_are_one_template() {
    // Twenty short logs of two commits each, every line a hash and a
    // scope, and one short answer naming a ticket: the logs' lines share
    // their worth as one template's instances, whatever letters and
    // digits their hashes hold.
    let mut messages = vec![msg(1, Role::User, "show me the logs, and the ticket?")];
    for i in 0..20u32 {
        let log = format!(
            "{:07x} fx:\n{:07x} fx:\n",
            0x1a2b3c4u32.wrapping_mul(2 * i + 7),
            0x5d6e7f1u32.wrapping_mul(2 * i + 11)
        );
        messages.push(Message::new(
            i64::from(i) + 2,
            Role::Tool,
            vec![Part::tool_result(format!("c{i}"), "git", log)],
        ));
    }
    messages.push(Message::new(
        30,
        Role::Tool,
        vec![Part::tool_result(
            "t",
            "jira",
            "ticket PAY-4471 open\nassignee kim",
        )],
    ));
    let chosen = choose(&messages, &Evidence::default(), 8);
    let text = chosen.evidence.render();
    assert!(text.contains("PAY-4471"), "{text}");
}

#[test]
fn the_same_answer_with_another_distinctive_value_is_a_fact_each_time() {
    // Twelve places' phone numbers, each asked for and given in the same
    // words, in English and in Chinese, among as many remarks of rare
    // words: the numbers are twelve facts, not one template's instances,
    // and the room goes to them.
    let remarks = [
        "Honestly my grandmother adored violins and marmalade",
        "Yesterday seagulls stole sandwiches near lighthouses",
        "Somehow penguins remind everybody about accordions",
        "Whenever thunderstorms arrive neighbours bake cinnamon",
        "Apparently giraffes dislike trampolines entirely",
        "Frankly umbrellas confuse toddlers every autumn",
    ];
    let english = |i: usize| {
        let number = format!("408-555-01{:02}", 10 + i);
        (format!("The phone number is {number}."), number)
    };
    let chinese = |i: usize| {
        let number = format!("010-6412{:04}", 1000 + 37 * i);
        (format!("电话是{number}。"), number)
    };
    for say in [&english as &dyn Fn(usize) -> (String, String), &chinese] {
        let mut messages = Vec::new();
        let mut numbers = Vec::new();
        let mut id = 1;
        for i in 0..12 {
            let (said, number) = say(i);
            messages.push(msg(id, Role::User, "And their phone number?"));
            messages.push(msg(id + 1, Role::Assistant, &said));
            messages.push(msg(id + 2, Role::User, remarks[i % remarks.len()]));
            numbers.push(number);
            id += 3;
        }
        let chosen = choose(&messages, &Evidence::default(), 200);
        let text = chosen.evidence.render();
        let kept = numbers.iter().filter(|n| text.contains(n.as_str())).count();
        assert_eq!(kept, 12, "{text}");
    }
}

#[test]
fn a_name_written_without_spaces_outweighs_a_remark_of_common_characters() {
    // Every character of the remark is said in many words (`欢迎`, `光临`,
    // `下次`…), and every pair of it stands across two of them: rare as
    // pairs, each said once, yet their characters stand apart. The name's
    // characters (`鲸蓬轩`) stand together. With room for one of the two
    // lines, the name is kept, though the remark has more rare pairs.
    let words = [
        "欢迎", "光临", "下次", "再见", "来电", "咨询", "高兴", "帮助",
    ];
    let mut messages = Vec::new();
    let mut id = 1;
    for i in 0..400 {
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        let said = format!("{}{}", words[i % 8], words[(i / 8) % 8]);
        messages.push(msg(id, role, &said));
        id += 1;
    }
    let remark = "迎光次再电咨兴帮临下见来询高助欢";
    messages.push(msg(id, Role::Assistant, remark));
    messages.push(msg(id + 1, Role::Assistant, "推荐鲸蓬轩"));
    let chosen = choose(&messages, &Evidence::default(), 22);
    let text = chosen.evidence.render();
    assert!(text.contains("鲸蓬轩"), "{text}");
    assert!(!text.contains(remark), "{text}");
}

#[test]
fn a_line_of_a_fenced_code_block_is_one_line_of_code() {
    let text = "Reproduce it with:\n```bash\ncargo test -p billing --test roundtrip_0 -- --nocapture\n```\nThen tell me. It fails.";
    let r = read(&[msg(1, Role::User, text)], 280);
    let lines: Vec<&str> = r.lines.iter().map(|c| c.line.text.as_str()).collect();
    assert!(
        lines.contains(&"`cargo test -p billing --test roundtrip_0 -- --nocapture`"),
        "{lines:?}"
    );
    assert!(lines.iter().all(|l| !l.contains("```")), "{lines:?}");
    assert!(lines.contains(&"It fails."), "{lines:?}");
}

#[test]
fn a_line_that_brings_a_new_value_is_no_repeat_of_one_like_it() {
    // Six dashboards named in the same words, further apart than a slot's
    // scope (not one changed value): each is kept, though their lines
    // share most of their words.
    let mut messages = Vec::new();
    for i in 0..6 {
        for k in 0..59 {
            messages.push(msg(
                i * 60 + k + 1,
                Role::Assistant,
                &format!("checked file number {k} again, all good"),
            ));
        }
        messages.push(msg(
            i * 60 + 60,
            Role::User,
            &format!("The dashboard is at https://grafana.internal.example.com/d/billing-{i}/latency if you need it."),
        ));
    }
    let chosen = choose(&messages, &Evidence::default(), 400);
    let text = chosen.evidence.render();
    for i in 0..6 {
        assert!(
            text.contains(&format!("billing-{i}/latency")),
            "{i}: {text}"
        );
    }
}

#[test]
fn a_line_a_listed_statement_says_costs_nothing_and_is_shown_once() {
    let chat = support_chat();
    let order = MessageId(9);
    let said = chat
        .iter()
        .find(|m| m.id == order)
        .cloned()
        .expect("the order message");
    let mut stated = crate::stated::UserStatements::default();
    stated.record(
        crate::stated::extract(&[said]),
        &crate::stated::StatedCaps::default(),
        crate::evidence::EvidenceConfig::default().scope_messages,
    );
    assert_eq!(stated.shown().count(), 1, "{stated:?}");
    let config = EvidenceConfig::default();
    let gather = |beside: Option<&crate::stated::UserStatements>| {
        let mut g = Gathering::default();
        g.add(read(&chat, config.max_line_chars), 0);
        if let Some(stated) = beside {
            g.beside(stated);
        }
        // A budget of one token: only a line that costs nothing fits.
        g.choose(
            &Evidence::default(),
            &[],
            "",
            1,
            &config,
            &CharEstimator::new(3),
        )
        .evidence
    };
    // Beside the list, the order's line is kept at no cost...
    let kept = gather(Some(&stated));
    assert!(kept.lines.iter().any(|l| l.at == order), "{kept:?}");
    // ...and shown once, as the statement: not among the evidence's lines,
    // until the statement is no longer listed.
    assert!(!kept.render_beside(&stated).contains("#9 "));
    assert!(kept
        .render_beside(&crate::stated::UserStatements::default())
        .contains("#A-448213"));
    // Chosen against nothing, the same line does not fit the budget.
    assert!(gather(None).lines.is_empty());
}

#[test]
fn chinese_is_ranked_by_its_pairs_of_characters_so_a_name_in_a_clause_is_rare() {
    // Chinese writes a clause as one run: counted whole, every clause is
    // a word said once. Counted by pairs, the clause made of the chat's
    // every-day words ("帮我找一家酒店餐馆") is common, and the one naming a
    // place ("鲜鱼口老字号美食街") is rare.
    let asks = [
        "我想找一家酒店",
        "我想找一家餐馆",
        "帮我找一家酒店",
        "帮我找一家餐馆",
    ];
    let mut messages = Vec::new();
    for i in 0..40 {
        messages.push(msg(
            2 * i + 1,
            Role::User,
            &format!("{}？", asks[i as usize % 4]),
        ));
        messages.push(msg(2 * i + 2, Role::Assistant, "好的。"));
    }
    messages.push(msg(81, Role::User, "好的，帮我找一家酒店餐馆。"));
    messages.push(msg(82, Role::User, "好的，最好在鲜鱼口老字号美食街附近。"));
    let chosen = choose(&messages, &Evidence::default(), 24);
    let text = chosen.evidence.render();
    assert!(text.contains("鲜鱼口老字号美食街"), "{text}");
    assert!(!text.contains("酒店餐馆"), "{text}");
}

#[test]
fn two_pasted_records_are_two_records_not_a_changed_value() {
    let invoice = |no: &str, total: &str, due: &str| {
        format!(
            "Here is the next invoice, can you check it?\n\n\
INVOICE {no}\nIssued by: Northwind Ltd\nTotal due: {total}\nPayment due: {due}"
        )
    };
    let messages = vec![
        msg(
            1,
            Role::User,
            &invoice("INV-2026-5552", "$18,938.65", "May 23, 2026"),
        ),
        msg(2, Role::Assistant, "It asks for $18,938.65."),
        msg(
            3,
            Role::User,
            &invoice("INV-2026-7710", "$2,310.00", "June 2, 2026"),
        ),
        msg(4, Role::Assistant, "It asks for $2,310.00."),
    ];
    let chosen = choose(&messages, &Evidence::default(), 500);
    let text = chosen.evidence.render();
    assert!(replaces_nothing(&chosen.evidence), "{text}");
    for value in ["$18,938.65", "May 23, 2026", "$2,310.00", "June 2, 2026"] {
        assert!(text.contains(value), "{value} missing:\n{text}");
    }
    // Said by the user in their own words, the later total replaces the
    // earlier one.
    let messages = vec![
        msg(1, Role::User, "The total due is $18,938.65 for the order."),
        msg(
            2,
            Role::User,
            "Sorry, the total due is $2,310.00 for the order.",
        ),
    ];
    let chosen = choose(&messages, &Evidence::default(), 500);
    assert!(
        chosen
            .evidence
            .replaced
            .iter()
            .any(|r| r.value == "$18,938.65"),
        "{:?}",
        chosen.evidence.replaced
    );
}

#[test]
fn a_value_is_a_whole_token_not_a_piece_of_a_longer_value() {
    assert!(has_token("due on 21.11.2026", "21.11.2026"));
    assert!(!has_token("due on 21.11.2026", "21"));
    assert!(!has_token("kd-5512-0937", "kd-5512"));
    assert!(has_token("it was 21, then 22.", "21"));
    assert!(has_token("call 408-555-0199.", "408-555-0199"));
}

#[test]
fn the_budget_is_counted_on_the_lines_as_they_render_not_on_each_rounded_up() {
    // Lines of 13 characters, newline included: 4.33 tokens each,
    // counted 5 on their own. Summed one by one, 60 tokens hold 12 of
    // them; rendered together, 13 take 57 (and 14 would take 61).
    let messages: Vec<Message> = (10..40)
        .map(|i| msg(i, Role::User, &format!("Q-{i}X")))
        .collect();
    let one = estimator_count(&render_line(&read(&messages[..1], 280).lines[0].line));
    assert_eq!(one, 5);
    let chosen = choose(&messages, &Evidence::default(), 60);
    let used = estimator_count(&chosen.evidence.render());
    assert_eq!(used, 57);
    assert_eq!(
        chosen.evidence.lines.len(),
        13,
        "{}",
        chosen.evidence.render()
    );
}

/// Nothing was replaced: no value in the list, none marked on a line.
fn replaces_nothing(e: &Evidence) -> bool {
    e.replaced.is_empty() && e.lines.iter().all(|l| l.superseded.is_empty())
}

fn estimator_count(text: &str) -> u64 {
    CharEstimator::new(3).count(text)
}

#[test]
fn a_question_without_a_value_asks_and_is_not_kept_for_its_words() {
    // A workstream long enough for rarity to tell (a rare word alone is
    // kept), the same words asked and then said.
    let mut messages: Vec<Message> = (10..90)
        .map(|i| msg(i, Role::User, "ok, thanks, that works for me"))
        .collect();
    messages.push(msg(
        1,
        Role::User,
        "Is the cottage furnished, and are dogs welcome?",
    ));
    messages.push(msg(
        2,
        Role::User,
        "The cottage is furnished, and dogs are welcome.",
    ));
    messages.push(msg(3, Role::User, "¿Tiene aparcamiento privado la casa?"));
    messages.push(msg(4, Role::User, "Is there anything in Oakland?"));
    let chosen = choose(&messages, &Evidence::default(), 500);
    let text = chosen.evidence.render();
    assert!(!text.contains("#1 u:") && !text.contains("#3 u:"), "{text}");
    // What is said is kept; a question that gives a value gives it.
    assert!(text.contains("#2 u:") && text.contains("Oakland"), "{text}");
}

#[test]
fn two_pasted_reports_are_two_reports_not_a_changed_value() {
    let report = |lead: &str, rise: &str, city: &str| {
        format!(
            "{lead}\n\n\
The committee discussed the broader context at some length before moving on. \
The audit covered the site in {city} and found the books in good order overall. \
Several participants noted that the situation remains fluid and deserves attention.\n\n\
It was agreed that communication with stakeholders should improve this year. \
Costs rose by {rise} compared with the previous period, as the board noted. \
Further analysis will be needed before any final conclusions can be drawn.\n\n\
What do you make of it?"
        )
    };
    let messages = vec![
        msg(
            1,
            Role::User,
            &report("Here is the first report.", "14.5%", "Graz"),
        ),
        msg(2, Role::Assistant, "It reads as cautious."),
        msg(
            3,
            Role::User,
            &report("And the second one.", "68.5%", "Lyon"),
        ),
        msg(4, Role::Assistant, "The same caution."),
    ];
    let chosen = choose(&messages, &Evidence::default(), 800);
    let text = chosen.evidence.render();
    // The same sentence of two documents with another number is two
    // documents' figures: nothing is replaced, both stay.
    assert!(replaces_nothing(&chosen.evidence), "{text}");
    for value in ["14.5%", "68.5%", "Graz", "Lyon"] {
        assert!(text.contains(value), "{value} missing:\n{text}");
    }
}

#[test]
fn a_line_that_only_thanks_or_takes_leave_is_not_kept_for_its_words() {
    // Rare words in a long workstream: each closing below is said once.
    let mut messages: Vec<Message> = (10..90)
        .map(|i| msg(i, Role::User, "ok, that works for me"))
        .collect();
    messages.push(msg(
        1,
        Role::User,
        "Wonderful, thanks so much for your patience!",
    ));
    messages.push(msg(2, Role::User, "Vielen Dank, das ist wirklich alles."));
    messages.push(msg(3, Role::User, "收到，谢谢您耐心解答。"));
    messages.push(msg(5, Role::User, "Thanks, book it for the 14th of March."));
    let chosen = choose(&messages, &Evidence::default(), 500);
    let text = chosen.evidence.render();
    for closing in ["#1 u:", "#2 u:", "#3 u:"] {
        assert!(!text.contains(closing), "{closing} kept:\n{text}");
    }
    // A thanks that gives a value gives it.
    assert!(text.contains("#5 u:") && text.contains("14th"), "{text}");
}

/// "Ich hätte doch lieber Zimmer 5179." after "Bitte reservieren Sie
/// Zimmer 2033 ab dem 4. Mai": the room changed. The `4` of the date is
/// no value of the room's size, and `Zimmer`, standing before the room's
/// number in both, names the slot: neither is replaced.
#[test]
fn a_superseded_statement_replaces_the_value_it_changed_not_its_label_or_a_date() {
    let messages = [
        msg(
            1,
            Role::User,
            "Bitte reservieren Sie Zimmer 2033 ab dem 4. Mai für drei Nächte.",
        ),
        msg(
            2,
            Role::Assistant,
            "Zimmer 2033 ist ab dem 4. Mai reserviert.",
        ),
        msg(3, Role::User, "Ich hätte doch lieber Zimmer 5179."),
    ];
    let mut stated = crate::stated::UserStatements::default();
    stated.record(
        crate::stated::extract(&messages),
        &crate::stated::StatedCaps::default(),
        EvidenceConfig::default().scope_messages,
    );
    assert_eq!(stated.superseded().count(), 1, "{stated:?}");
    let mut e = Evidence::default();
    e.mark_statements(&stated, EvidenceConfig::default().scope_messages);
    let replaced: Vec<&str> = e.replaced.iter().map(|r| r.value.as_str()).collect();
    assert_eq!(replaced, ["2033"]);
}

/// A kept line is read again, at the next compaction, as it was said: its
/// slot survives the squeeze. "C'est noté : taxi à 7:24" is kept as
/// "7:24, dossier JP-65848."; the "plutôt à 11:33" a compaction later
/// still changes that time, `à 7:24`.
#[test]
fn a_kept_line_keeps_its_slot_when_a_later_compaction_changes_it() {
    let messages = [
        msg(
            1,
            Role::User,
            "Je voudrais un taxi à 7:24 pour l'aéroport, dossier JP-65848.",
        ),
        msg(
            2,
            Role::Assistant,
            "C'est noté : taxi à 7:24, dossier JP-65848.",
        ),
        msg(3, Role::User, "Combien coûte la course environ ?"),
        msg(4, Role::Assistant, "Environ 45 € selon la circulation."),
        msg(
            5,
            Role::User,
            "Finalement, plutôt à 11:33, s'il vous plaît.",
        ),
        msg(6, Role::Assistant, "Très bien, le taxi passera à 11:33."),
    ];
    let config = EvidenceConfig::default();
    let estimator = CharEstimator::new(3);
    let mut g = Gathering::default();
    g.add(read(&messages[..2], config.max_line_chars), 0);
    let first = g.choose(&Evidence::default(), &[], "", 500, &config, &estimator);
    let kept = first.evidence.render();
    assert!(
        kept.contains("7:24") && !kept.contains("superseded"),
        "{kept}"
    );
    let mut g = Gathering::default();
    g.add(
        read(&messages[2..], config.max_line_chars),
        first.evidence.seen,
    );
    let second = g.choose(&first.evidence, &[], "", 500, &config, &estimator);
    let text = second.evidence.render();
    assert!(
        text.lines()
            .filter(|l| l.contains("7:24"))
            .all(|l| l.contains("[superseded by #5]")),
        "{text}"
    );
    assert!(second.evidence.replaced.iter().any(|r| r.value == "7:24"));
}

/// The user changes each booking with the same sentence: "Finalement,
/// plutôt à …" is a template, said three times with new values, yet each
/// saying changes its own booking's time (said in another sentence); what
/// a template replaces of its own earlier sayings stays a report.
#[test]
fn a_change_said_in_the_same_words_each_time_still_changes_each_booking() {
    let mut messages = Vec::new();
    let times = [("7:24", "11:33"), ("13:32", "20:31"), ("9:05", "16:48")];
    for (k, (old, new)) in times.iter().enumerate() {
        let id = 20 * k as i64;
        messages.extend([
            msg(
                id + 1,
                Role::User,
                &format!("Je voudrais un taxi à {old} pour l'aéroport."),
            ),
            msg(
                id + 2,
                Role::Assistant,
                &format!("C'est noté : taxi à {old}."),
            ),
            msg(
                id + 3,
                Role::User,
                &format!("Finalement, plutôt à {new}, s'il vous plaît."),
            ),
            msg(id + 4, Role::Assistant, "Très bien."),
            msg(id + 5, Role::User, "Combien coûte la course ?"),
            msg(id + 6, Role::Assistant, "Environ 45 €."),
            msg(id + 7, Role::User, "Le chauffeur parle anglais ?"),
            msg(id + 8, Role::Assistant, "Oui, sans problème."),
            msg(id + 9, Role::User, "Merci, c'est tout."),
            msg(id + 10, Role::Assistant, "Bonne journée !"),
        ]);
    }
    let chosen = choose(&messages, &Evidence::default(), 2000);
    let replaced: Vec<&str> = chosen
        .evidence
        .replaced
        .iter()
        .map(|r| r.value.as_str())
        .collect();
    for (old, new) in times {
        assert!(replaced.contains(&old), "{old}: {replaced:?}");
        assert!(!replaced.contains(&new), "{new}: {replaced:?}");
    }
}

/// An honorific's point ends no sentence, in any language of the table:
/// "Dr." stays with the name it titles, so the name is read as a name (at
/// a sentence's start, "Castellanos on Elm Street." gave a plain word).
#[test]
fn an_honorifics_point_ends_no_sentence() {
    for line in [
        "My dentist is Dr. Castellanos on Elm Street.",
        "Mi dentista es la Dra. Ferreira, en la calle Olmo.",
        "Meine Zahnärztin ist Dr. Brandauer in der Lindenstraße.",
    ] {
        assert_eq!(read_texts(Role::User, line), [line]);
    }
    assert_eq!(
        read_texts(Role::User, "I saw the doctor. Castellanos was kind.").len(),
        2
    );
}
