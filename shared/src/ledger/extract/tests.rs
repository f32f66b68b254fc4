use super::*;
use crate::message::{Message, Part, Role};

fn said_by(role: Role, text: &str) -> Vec<Artifact> {
    extract(&[Message::text(1, role, text)])
}

fn values_of(text: &str, kind: ArtifactKind) -> Vec<String> {
    said_by(Role::User, text)
        .into_iter()
        .filter(|a| a.kind == kind)
        .map(|a| a.value)
        .collect()
}

/// `(key, value)` of every setting in `text`.
fn settings_of(text: &str) -> Vec<(String, String)> {
    said_by(Role::User, text)
        .into_iter()
        .filter(|a| a.kind == ArtifactKind::Setting)
        .map(|a| (a.key.unwrap_or_default(), a.value))
        .collect()
}

fn tool_result(id: i64, tool: &str, output: &str, is_error: bool) -> Message {
    Message::new(
        id,
        Role::Tool,
        vec![Part::ToolResult {
            call_id: format!("c{id}"),
            tool_name: tool.into(),
            output: output.into(),
            is_error,
            pruned: false,
        }],
    )
}

fn has(found: &[Artifact], kind: ArtifactKind, value: &str) -> bool {
    found.iter().any(|a| a.kind == kind && a.value == value)
}

#[test]
fn every_pattern_compiles() {
    use super::{code, people, settings};
    let all: Vec<&scan::Pattern> = vec![
        &code::URL,
        &code::UUID,
        &code::HEX_OR_TICKET,
        &code::CVE,
        &code::SYMBOL_PATH,
        &code::ISSUE_REF,
        &code::ERROR_CODE,
        &code::EXCEPTION,
        &code::EXIT_CODE,
        &code::PREFIXED_CODE,
        &code::SQLSTATE,
        &code::HTTP_STATUS,
        &code::HTTP_REASON,
        &code::HOST_PORT,
        &code::IPV4,
        &code::VERSION,
        &code::DURATION_COMPOUND,
        &code::DURATION,
        &code::QUANTITY,
        &code::COUNT,
        &code::CONFIG_NAME,
        &code::FENCE,
        &code::DOLLAR_LINE,
        &code::BACKTICK,
        &people::EMAIL,
        &people::NUMERIC_DATE_TIME,
        &people::TEXT_DATE,
        &people::AMPM_TIME,
        &people::AMOUNT_BEFORE,
        &people::AMOUNT_AFTER,
        &people::PHONE_INTL,
        &people::PHONE_US,
        &people::PHONE_CUE,
        &people::REFERENCE_SEGMENTS,
        &people::REFERENCE_HASH,
        &people::REFERENCE_CUE,
        &people::STREET_NUMBER_FIRST,
        &people::STREET_ROMANCE,
        &people::STREET_NAME_FIRST,
        &people::POSTCODE_CITY,
        &people::UK_POSTCODE,
        &people::US_CITY_ZIP,
        &people::ADDRESS_TAIL,
        &people::HONORIFIC,
        &people::NAME_CUE,
        &people::SELF_INTRO,
        &settings::ENV_ASSIGN,
        &settings::UPPER_ASSIGN,
        &settings::LOWER_ASSIGN,
        &settings::LINE_ASSIGN,
        &settings::PROSE_SET,
        &settings::PROSE_IS_NOW,
        &code::GATE_EXIT,
        &code::GATE_ERROR,
        &code::GATE_HTTP,
        &code::GATE_HTTP_REASON,
        &people::GATE_MONTH,
        &people::GATE_AMPM,
        &people::GATE_CURRENCY,
        &people::GATE_PHONE_CUE,
        &people::GATE_REFERENCE_CUE,
        &people::GATE_STREET,
        &people::GATE_NAME,
        &settings::GATE_SET_VERB,
        &settings::GATE_IS_NOW,
    ];
    for (i, re) in all.into_iter().enumerate() {
        assert!(re.is_some(), "pattern {i} does not compile");
    }
}

#[test]
fn paths_are_found_and_prose_is_not() {
    let text = "Edit src/main.rs, then ./run.sh and /etc/nginx/nginx.conf; also ~/.config/x.toml \
                and packages/core/src/index.ts:42:7 and Cargo.toml. C:\\Users\\me\\a.txt too.";
    assert_eq!(
        values_of(text, ArtifactKind::Path),
        [
            "src/main.rs",
            "./run.sh",
            "/etc/nginx/nginx.conf",
            "~/.config/x.toml",
            "packages/core/src/index.ts",
            "Cargo.toml",
            "C:\\Users\\me\\a.txt"
        ]
    );
    for prose in [
        "and/or",
        "w/o",
        "1/2 cup",
        "2024/01/02",
        "e.g. this",
        "v1.2.3",
        "client/server",
        "i.e.",
        "3.14",
    ] {
        assert!(values_of(prose, ArtifactKind::Path).is_empty(), "{prose}");
    }
    assert_eq!(
        values_of("dirs: services/billing/src and src/db/", ArtifactKind::Path),
        ["services/billing/src", "src/db/"]
    );
}

#[test]
fn urls_are_trimmed_and_not_also_paths_or_hosts() {
    let text = "See https://example.com/a/b.html). And (http://x.io:8080/path?q=1).";
    assert_eq!(
        values_of(text, ArtifactKind::Url),
        ["https://example.com/a/b.html", "http://x.io:8080/path?q=1"]
    );
    assert!(values_of(text, ArtifactKind::Path).is_empty());
    assert!(values_of(text, ArtifactKind::Host).is_empty());
}

#[test]
fn commands_from_dollar_lines_fences_and_backticks() {
    let text = "Run:\n$ cargo test -p shared\n```bash\n# comment\n$ make build\nls -la\n```\nthen `git push origin main` but not `foo bar` or `cargo`.";
    assert_eq!(
        values_of(text, ArtifactKind::Command),
        [
            "cargo test -p shared",
            "make build",
            "ls -la",
            "git push origin main"
        ]
    );
}

#[test]
fn commands_from_shell_tool_inputs_of_any_tool() {
    let m = Message::new(
        1,
        Role::Assistant,
        vec![
            Part::tool_call(
                "a",
                "bash",
                serde_json::json!({"command": "cargo build --release\necho done"}),
            ),
            Part::tool_call("b", "exec_sql", serde_json::json!("psql -c 'select 1'")),
            Part::tool_call(
                "c",
                "edit_file",
                serde_json::json!({"command": "view", "path": "src/lib.rs", "nested": [{"p": "docs/a.md"}]}),
            ),
        ],
    );
    let got = extract(&[m]);
    assert!(has(&got, ArtifactKind::Command, "cargo build --release"));
    assert!(has(&got, ArtifactKind::Command, "psql -c 'select 1'"));
    assert!(
        !has(&got, ArtifactKind::Command, "view"),
        "an edit tool's one-word sub-command is no shell command"
    );
    assert!(
        has(&got, ArtifactKind::Path, "src/lib.rs"),
        "disallowed tools still yield paths"
    );
    assert!(has(&got, ArtifactKind::Path, "docs/a.md"));
}

#[test]
fn identifiers() {
    let text = "Commit 9f3c2ab71e fixed ENG-1234 (see #4821) for 123e4567-e89b-12d3-a456-426614174000, CVE-2024-3094, \
                in invoice::fx::rounding. Not UTF-8, not deadbeef, not 1234567, not std::sync::Arc.";
    assert_eq!(
        values_of(text, ArtifactKind::Identifier),
        [
            "9f3c2ab71e",
            "ENG-1234",
            "#4821",
            "123e4567-e89b-12d3-a456-426614174000",
            "CVE-2024-3094",
            "invoice::fx::rounding"
        ]
    );
}

#[test]
fn error_codes_are_normalised() {
    let text = "error[E0502] then ENOENT, got HTTP 503 and status code: 429, a 502 Bad Gateway, ORA-00942, TS2345, SQLSTATE 23505.";
    assert_eq!(
        values_of(text, ArtifactKind::ErrorCode),
        [
            "E0502",
            "ENOENT",
            "HTTP 503",
            "HTTP 429",
            "HTTP 502",
            "ORA-00942",
            "TS2345",
            "SQLSTATE 23505"
        ]
    );
}

#[test]
fn error_codes_of_runtimes_and_orchestrators() {
    let text = "The pod was OOMKilled and went into CrashLoopBackOff; the worker got SIGKILL \
                (exit code 137), the build failed with error C2065, Python raised KeyError and \
                the JVM a NullPointerException. Node said ERR_MODULE_NOT_FOUND and the script \
                exited with status 2.";
    assert_eq!(
        values_of(text, ArtifactKind::ErrorCode),
        [
            "OOMKilled",
            "CrashLoopBackOff",
            "SIGKILL",
            "exit code 137",
            "C2065",
            "KeyError",
            "NullPointerException",
            "ERR_MODULE_NOT_FOUND",
            "exit code 2"
        ]
    );
    for prose in [
        "The error was mine, an Error in judgement.",
        "Exit the room, code review at 10.",
        "We killed the process.",
    ] {
        assert!(
            values_of(prose, ArtifactKind::ErrorCode).is_empty(),
            "{prose}: {:?}",
            values_of(prose, ArtifactKind::ErrorCode)
        );
    }
}

#[test]
fn quantities_with_units_that_are_not_time() {
    let text = "Use 512 MB, 1.5 GiB, 99.9% SLO, 80k tokens, 120,000 chars, 8 cores, 3 km. Not 42 apples or version 3.";
    assert_eq!(
        values_of(text, ArtifactKind::Quantity),
        [
            "512 MB",
            "1.5 GiB",
            "99.9%",
            "80k tokens",
            "120,000 chars",
            "8 cores",
            "3 km"
        ]
    );
}

#[test]
fn durations() {
    let text = "It took 37s, then 1h30m, p99 is 250 ms, the job ran 5 minutes and the trial lasts 2 weeks; retry after 2m30s or 1.5 hours.";
    assert_eq!(
        values_of(text, ArtifactKind::Duration),
        [
            "37s",
            "1h30m",
            "250 ms",
            "5 minutes",
            "2 weeks",
            "2m30s",
            "1.5 hours"
        ]
    );
    for prose in ["I have 3 sons.", "version v1.5s", "x2s", "Python 3"] {
        assert!(
            values_of(prose, ArtifactKind::Duration).is_empty(),
            "{prose}"
        );
    }
}

#[test]
fn counts_in_context() {
    let text = "The table has 48213 rows; 3 of 412 tests failed, then 412 tests passed. \
                Booked 2 nights for 3 adults. cargo says 42 passed; 0 failed.";
    assert_eq!(
        values_of(text, ArtifactKind::Count),
        [
            "48213 rows",
            "3 of 412 tests",
            "412 tests passed",
            "2 nights",
            "3 adults",
            "42 passed"
        ]
    );
    for prose in [
        "There are 2 options and 3 ways to do it.",
        "We met 2 times.",
        "Chapter 12 is long.",
        "0 failed",
    ] {
        assert!(values_of(prose, ArtifactKind::Count).is_empty(), "{prose}");
    }
}

#[test]
fn dotted_config_and_flag_names() {
    let text = "Turn on billing.invoice_v2_fx_cache and raise spark.executor.memory; see `feature.beta` too.";
    assert_eq!(
        values_of(text, ArtifactKind::ConfigName),
        [
            "billing.invoice_v2_fx_cache",
            "spark.executor.memory",
            "feature.beta"
        ]
    );
    for prose in [
        "e.g. this, i.e. that",
        "see config.yaml and app.module.ts",
        "visit www.example.com or api.example.com",
        "call os.path.join(a, b) and self.state.items",
        "node.js is fine",
        "Mr. Smith",
    ] {
        assert!(
            values_of(prose, ArtifactKind::ConfigName).is_empty(),
            "{prose}: {:?}",
            values_of(prose, ArtifactKind::ConfigName)
        );
    }
}

#[test]
fn settings_in_code_and_config_shapes() {
    assert_eq!(
        settings_of("export MAX_RETRIES=5 and FX_CACHE_TTL: 30s"),
        [
            ("MAX_RETRIES".to_owned(), "5".to_owned()),
            ("FX_CACHE_TTL".to_owned(), "30s".to_owned())
        ]
    );
    assert_eq!(
        settings_of("const MAX_RETRIES: u32 = 8;"),
        [("MAX_RETRIES".to_owned(), "8".to_owned())]
    );
    assert_eq!(
        settings_of("billing.fx_cache = on, spark.executor.memory=4g, \"max_retries\": 3"),
        [
            ("billing.fx_cache".to_owned(), "on".to_owned()),
            ("spark.executor.memory".to_owned(), "4g".to_owned()),
            ("max_retries".to_owned(), "3".to_owned())
        ]
    );
    assert_eq!(
        settings_of("[log]\nlog.level = debug\n"),
        [("log.level".to_owned(), "debug".to_owned())]
    );
    // The setting claims its value: 30s is not also a bare duration.
    assert!(values_of("FX_CACHE_TTL: 30s", ArtifactKind::Duration).is_empty());
    for code in [
        "if a.b == 5 { }",
        "db-primary.internal:5432",
        "x = 5",
        "self.count = 0",
        "${HOME_DIR}",
    ] {
        assert!(
            settings_of(code).is_empty(),
            "{code}: {:?}",
            settings_of(code)
        );
    }
}

#[test]
fn settings_said_in_words() {
    assert_eq!(
        settings_of("Please set the timeout to 37s."),
        [("timeout".to_owned(), "37s".to_owned())]
    );
    assert_eq!(
        settings_of("Actually, make the timeout 45s"),
        [("timeout".to_owned(), "45s".to_owned())]
    );
    assert_eq!(
        settings_of("reduce the batch size from 500 to 200 and bump MAX_RETRIES to 8"),
        [
            ("batch size".to_owned(), "500".to_owned()),
            ("batch size".to_owned(), "200".to_owned()),
            ("MAX_RETRIES".to_owned(), "8".to_owned())
        ]
    );
    assert_eq!(
        settings_of("The budget is now €500. Switch the fx cache off."),
        [
            ("budget".to_owned(), "€500".to_owned()),
            ("fx cache".to_owned(), "off".to_owned())
        ]
    );
    for prose in [
        "set it to 5",
        "make sure 3 tests run",
        "Let me set up 3 servers",
        "update the address to 12 Rue de Rivoli",
    ] {
        assert!(
            settings_of(prose).is_empty(),
            "{prose}: {:?}",
            settings_of(prose)
        );
    }
}

#[test]
fn secrets_are_never_recorded() {
    let found = said_by(
        Role::User,
        "API_KEY=sk-live-9f3c2ab71e and DB_PASSWORD: 'hunter22' and GITHUB_TOKEN=ghp_1234abcd5678",
    );
    assert!(
        found.is_empty(),
        "neither the setting nor its value: {found:?}"
    );
}

#[test]
fn versions_and_hosts() {
    let text =
        "Upgrade to v2.14.3 (not 1.8.0-rc.1) on db-primary.internal:5432, redis at 10.0.3.7:6379, \
                localhost:8080 and 192.168.1.20.";
    assert_eq!(
        values_of(text, ArtifactKind::Version),
        ["v2.14.3", "1.8.0-rc.1"]
    );
    assert_eq!(
        values_of(text, ArtifactKind::Host),
        [
            "db-primary.internal:5432",
            "10.0.3.7:6379",
            "localhost:8080",
            "192.168.1.20"
        ]
    );
    for prose in [
        "see src/main.rs:42 and index.ts:7",
        "pi is 3.14",
        "at 10:30",
        "999.1.1.1",
    ] {
        assert!(values_of(prose, ArtifactKind::Host).is_empty(), "{prose}");
        assert!(
            values_of(prose, ArtifactKind::Version).is_empty(),
            "{prose}"
        );
    }
}

#[test]
fn references_are_kept_whole() {
    let text = "My customer number is KD-5512-0937, order #A-99812 and ORD-2024-118833; \
                booking reference X7K2QB, PNR QWERTZ, case 48213, invoice #77120.";
    assert_eq!(
        values_of(text, ArtifactKind::Reference),
        [
            "KD-5512-0937",
            "#A-99812",
            "ORD-2024-118833",
            "X7K2QB",
            "QWERTZ",
            "48213",
            "#77120"
        ]
    );
    assert_eq!(
        values_of("The ticket is ENG-1234.", ArtifactKind::Identifier),
        ["ENG-1234"],
        "a ticket key stays an identifier after a cue word"
    );
    for prose in [
        "ISO-8859-1 and UTF-8 text",
        "in order to ship",
        "the booking TODAY",
        "order 5 pizzas",
        "account 2024",
        "QWERTZ keyboards",
    ] {
        assert!(
            values_of(prose, ArtifactKind::Reference).is_empty(),
            "{prose}: {:?}",
            values_of(prose, ArtifactKind::Reference)
        );
    }
}

#[test]
fn access_codes_keep_what_they_open() {
    assert_eq!(
        values_of(
            "My sister picks up the keys at 11:00; the door code 1242. Gate PIN: 4471.",
            ArtifactKind::Reference
        ),
        ["door code 1242", "Gate PIN: 4471"]
    );
    for prose in ["the door code is in the drawer", "use the access code"] {
        assert!(
            values_of(prose, ArtifactKind::Reference).is_empty(),
            "{prose}"
        );
    }
}

#[test]
fn amounts_with_currency() {
    let text = "It was €249.99, then USD 1,200, a refund of 1.200,50 EUR, $18 and £5.50 — 20 euros in cash.";
    assert_eq!(
        values_of(text, ArtifactKind::Amount),
        [
            "€249.99",
            "USD 1,200",
            "1.200,50 EUR",
            "$18",
            "£5.50",
            "20 euros"
        ]
    );
    for prose in ["$ cargo test", "I have 20 apples", "USD is strong", "$HOME"] {
        assert!(values_of(prose, ArtifactKind::Amount).is_empty(), "{prose}");
    }
}

#[test]
fn dates_and_times_with_zones() {
    let text =
        "Fly 2026-03-14, back 14 March 2026 or March 14th; the call is Tue 3 Dec at 09:30 CET, \
                the other at 3:45 pm, the sync 14:00 UTC+1, pickup 10am, due 14.03.2026.";
    assert_eq!(
        values_of(text, ArtifactKind::DateTime),
        [
            "2026-03-14",
            "14 March 2026",
            "March 14th",
            "Tue 3 Dec",
            "09:30 CET",
            "3:45 pm",
            "14:00 UTC+1",
            "10am",
            "14.03.2026"
        ]
    );
    for prose in [
        "You may go.",
        "The ratio is 16:9.",
        "In March we shipped.",
        "version 1.2.3",
    ] {
        assert!(
            values_of(prose, ArtifactKind::DateTime).is_empty(),
            "{prose}: {:?}",
            values_of(prose, ArtifactKind::DateTime)
        );
    }
}

#[test]
fn postal_addresses() {
    let text =
        "I moved from Kastanienallee 12, 10435 Berlin to 221B Baker Street, London NW1 6XE; \
                the office is at 12 Rue de Rivoli and the depot in 75001 Paris.";
    assert_eq!(
        values_of(text, ArtifactKind::Address),
        [
            "Kastanienallee 12, 10435 Berlin",
            "221B Baker Street, London NW1 6XE",
            "12 Rue de Rivoli",
            "75001 Paris"
        ]
    );
    for prose in [
        "In Spring 2026 we launch.",
        "We have 3 Big Problems.",
        "Version 10000 The end",
    ] {
        assert!(
            values_of(prose, ArtifactKind::Address).is_empty(),
            "{prose}: {:?}",
            values_of(prose, ArtifactKind::Address)
        );
    }
}

#[test]
fn phones_and_emails() {
    let text = "Call +49 30 1234567 or (415) 555-0132, mobile: 0151 23456789; mail dana.whitfield@example.org.";
    assert_eq!(
        values_of(text, ArtifactKind::Phone),
        ["+49 30 1234567", "(415) 555-0132", "0151 23456789"]
    );
    assert_eq!(
        values_of(text, ArtifactKind::Email),
        ["dana.whitfield@example.org"]
    );
    for prose in [
        "We sold 1234567 units",
        "x+1 = 2",
        "icon@2x.png",
        "git@github",
    ] {
        assert!(values_of(prose, ArtifactKind::Phone).is_empty(), "{prose}");
        assert!(values_of(prose, ArtifactKind::Email).is_empty(), "{prose}");
    }
}

#[test]
fn names_as_the_user_gives_them() {
    let text = "Hi, my name is Dana Whitfield. For the visit, contact: Tomás Ortega, or ask for Mr. Okafor.";
    assert_eq!(
        values_of(text, ArtifactKind::Person),
        ["Dana Whitfield", "Tomás Ortega", "Mr. Okafor"]
    );
    assert_eq!(
        values_of("I'm Priya, thanks!", ArtifactKind::Person),
        ["Priya"]
    );
    // A full name as the subject of a role needs no other cue.
    assert_eq!(
        values_of(
            "Priya Raman is on call for billing this week. Jonas Eklund owns the export.",
            ArtifactKind::Person
        ),
        ["Priya Raman", "Jonas Eklund"]
    );
    for prose in [
        "Billing is on call this week.",
        "The Team is responsible for it.",
        "I'm Sorry about that.",
        "I'm French.",
        "I am Not sure.",
        "speak to Sales please",
        "my name is dana",
    ] {
        assert!(values_of(prose, ArtifactKind::Person).is_empty(), "{prose}");
    }
    // The assistant introducing itself names no person of the chat.
    assert!(said_by(Role::Assistant, "I'm Claude, here to help.").is_empty());
    // Tool output is no place for names ("name: Build And Test" is a CI job).
    let ci = extract(&[tool_result(
        2,
        "read_file",
        "contact: Build And Test",
        false,
    )]);
    assert!(!ci.iter().any(|a| a.kind == ArtifactKind::Person), "{ci:?}");
}

#[test]
fn tool_output_is_mined_whole_success_or_error() {
    let msgs = vec![
        tool_result(
            1,
            "bash",
            "warning: unused import\nerror[E0599]: no method named `foo` found\n  --> src/x.rs:3:5",
            true,
        ),
        tool_result(
            2,
            "bash",
            "[main 3f9a2c1] Fix rounding in invoices\n 2 files changed, 14 insertions(+)",
            false,
        ),
        tool_result(
            3,
            "kubectl",
            "Name: api-7d9f\nState: Terminated\n  Reason: OOMKilled\n  Exit Code: 137",
            false,
        ),
    ];
    let found = extract(&msgs);
    assert!(has(&found, ArtifactKind::ErrorCode, "E0599"), "{found:?}");
    assert!(has(&found, ArtifactKind::Path, "src/x.rs"));
    assert!(has(&found, ArtifactKind::Identifier, "3f9a2c1"));
    assert!(has(&found, ArtifactKind::Count, "2 files changed"));
    assert!(has(&found, ArtifactKind::ErrorCode, "OOMKilled"));
    assert!(has(&found, ArtifactKind::ErrorCode, "exit code 137"));
    let pruned = Message::new(
        4,
        Role::Tool,
        vec![Part::ToolResult {
            call_id: "p".into(),
            tool_name: "bash".into(),
            output: "panicked: ECONNREFUSED".into(),
            is_error: false,
            pruned: true,
        }],
    );
    assert!(has(
        &extract(&[pruned]),
        ArtifactKind::ErrorCode,
        "ECONNREFUSED"
    ));
}

#[test]
fn reasoning_is_never_read() {
    let m = Message::new(
        1,
        Role::Assistant,
        vec![Part::Reasoning {
            text: "maybe src/secret.rs or E0502 at 10.0.0.1:80".into(),
        }],
    );
    assert!(extract(&[m]).is_empty());
}

#[test]
fn each_value_records_who_said_it() {
    let msgs = vec![
        Message::text(
            1,
            Role::User,
            "Fix src/a.rs please:\n```\nsrc/pasted.rs failed\n```",
        ),
        Message::new(
            2,
            Role::Assistant,
            vec![
                Part::text("I will edit src/b.rs."),
                Part::tool_call("e", "edit_file", serde_json::json!({"path": "src/c.rs"})),
                Part::tool_call("r", "read_file", serde_json::json!({"path": "src/d.rs"})),
            ],
        ),
        tool_result(3, "grep", "src/e.rs", false),
        tool_result(4, "bash", "src/f.rs: E0502", true),
        Message::new(
            5,
            Role::User,
            vec![Part::File {
                uri: "docs/spec.pdf".into(),
                media_type: None,
                name: None,
            }],
        ),
        Message::text(6, Role::System, "Always use /srv/app/config.toml"),
    ];
    let got: Vec<(String, Source, Salience, i64)> = extract(&msgs)
        .into_iter()
        .filter(|a| a.kind == ArtifactKind::Path)
        .map(|a| (a.value, a.source, a.salience, a.last_seen.0))
        .collect();
    let expected = [
        ("src/a.rs", Source::User, Salience::Stated, 1),
        ("src/pasted.rs", Source::User, Salience::Written, 1),
        ("src/b.rs", Source::Assistant, Salience::Written, 2),
        ("src/c.rs", Source::ToolInput, Salience::Written, 2),
        ("src/d.rs", Source::ToolInput, Salience::Read, 2),
        ("src/e.rs", Source::ToolOutput, Salience::Answered, 3),
        ("src/f.rs", Source::ToolOutput, Salience::Written, 4),
        ("docs/spec.pdf", Source::User, Salience::Stated, 5),
        ("/srv/app/config.toml", Source::System, Salience::Stated, 6),
    ];
    let expected: Vec<(String, Source, Salience, i64)> = expected
        .into_iter()
        .map(|(v, s, l, id)| (v.to_owned(), s, l, id))
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn a_value_is_counted_once_per_message_with_its_best_sighting() {
    let m = Message::new(
        7,
        Role::Assistant,
        vec![
            Part::tool_call("r", "read_file", serde_json::json!({"path": "src/a.rs"})),
            Part::text("src/a.rs is wrong, and src/a.rs again"),
        ],
    );
    let found = extract(&[m]);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].mentions, 1);
    assert_eq!(found[0].source, Source::Assistant);
    assert_eq!(found[0].salience, Salience::Written);
}

#[test]
fn edits_do_not_state_the_value_they_replace() {
    let m = Message::new(
        1,
        Role::Assistant,
        vec![Part::tool_call(
            "e",
            "edit_file",
            serde_json::json!({"old_string": "MAX_RETRIES=5", "new_string": "MAX_RETRIES=8"}),
        )],
    );
    let settings: Vec<String> = extract(&[m])
        .into_iter()
        .filter(|a| a.kind == ArtifactKind::Setting)
        .map(|a| a.value)
        .collect();
    assert_eq!(settings, ["8"]);
}

#[test]
fn one_message_yields_at_most_the_per_message_cap() {
    let text: String = (0..500).map(|i| format!("src/f{i}.rs ")).collect();
    assert_eq!(said_by(Role::User, &text).len(), MAX_PER_MESSAGE);
}

#[test]
fn a_huge_log_cannot_flood_and_its_error_still_counts() {
    let mut log = String::new();
    for i in 0..20_000 {
        log.push_str(&format!(
            "2026-04-14T10:{:02}:{:02} INFO read src/mod_{i}.rs in {i} ms from 10.0.{}.{}\n",
            i / 60 % 60,
            i % 60,
            i / 250 % 250,
            i % 250
        ));
    }
    log.push_str("FATAL worker killed: OOMKilled\n");
    assert!(log.len() > 1_000_000);
    let found = extract(&[tool_result(1, "bash", &log, true)]);
    assert!(found.len() <= MAX_BULK_PER_MESSAGE, "{}", found.len());
    for kind in ArtifactKind::ALL {
        let n = found.iter().filter(|a| a.kind == kind).count();
        assert!(n <= MAX_BULK_PER_KIND, "{kind:?}: {n}");
    }
    assert!(has(&found, ArtifactKind::ErrorCode, "OOMKilled"));

    // The same paste in user text is bulk too, and ranks as written.
    let pasted = said_by(Role::User, &log);
    assert!(pasted.len() <= MAX_BULK_PER_MESSAGE);
    assert!(pasted.iter().all(|a| a.salience == Salience::Written));
}

#[test]
fn has_artifact_detects_any_kind() {
    assert!(has_artifact("look at src/main.rs"));
    assert!(has_artifact("it took 30 s"));
    assert!(has_artifact("my name is Dana Whitfield"));
    assert!(has_artifact("it cost €20"));
    assert!(!has_artifact("nothing special here"));
    assert!(!has_artifact("never mind, found it"));
}

#[test]
fn tool_names_tell_reading_from_acting() {
    for name in [
        "read_file",
        "Grep",
        "WebFetch",
        "mcp__github__getIssue",
        "list_dir",
    ] {
        assert!(reads_only(name), "{name}");
    }
    for name in [
        "edit_file",
        "bash",
        "str_replace_based_edit_tool",
        "write",
        "userQuestions",
        "create_or_update_file",
    ] {
        assert!(!reads_only(name), "{name}");
    }
}

fn call(id: i64, call_id: &str, tool: &str, input: serde_json::Value) -> Message {
    Message::new(
        id,
        Role::Assistant,
        vec![Part::ToolCall {
            call_id: call_id.into(),
            tool_name: tool.into(),
            input,
        }],
    )
}

fn result(id: i64, call_id: &str, tool: &str, output: &str) -> Message {
    Message::new(
        id,
        Role::Tool,
        vec![Part::ToolResult {
            call_id: call_id.into(),
            tool_name: tool.into(),
            output: output.into(),
            is_error: false,
            pruned: false,
        }],
    )
}

fn salience_of(found: &[Artifact], value: &str) -> Option<Salience> {
    found.iter().find(|a| a.value == value).map(|a| a.salience)
}

#[test]
fn what_an_acting_call_answered_ranks_as_written_and_a_reading_calls_output_as_read() {
    let found = extract(&[
        call(
            1,
            "a",
            "bash",
            serde_json::json!({"command": "git commit -am \"fix\""}),
        ),
        result(2, "a", "bash", "[fix/fx 9f3c2a1] fix\n 1 file changed"),
        call(
            3,
            "b",
            "bash",
            serde_json::json!({"command": "git log --oneline -n 1"}),
        ),
        result(4, "b", "bash", "4e5d6c7 older change"),
        call(
            5,
            "c",
            "request_refund",
            serde_json::json!({"order": "NW-701742"}),
        ),
        result(
            6,
            "c",
            "request_refund",
            r#"{"refund_id":"RF-54569194","status":"approved"}"#,
        ),
        call(
            7,
            "d",
            "lookup_order",
            serde_json::json!({"order": "NW-701742"}),
        ),
        result(
            8,
            "d",
            "lookup_order",
            "order NW-701742: refund of USD 133.65 issued",
        ),
    ]);
    assert_eq!(
        salience_of(&found, "9f3c2a1"),
        Some(Salience::Written),
        "{found:?}"
    );
    assert_eq!(salience_of(&found, "4e5d6c7"), Some(Salience::Answered));
    assert_eq!(salience_of(&found, "RF-54569194"), Some(Salience::Written));
    assert_eq!(salience_of(&found, "USD 133.65"), Some(Salience::Answered));
}

#[test]
fn failure_lines_of_a_reading_calls_output_rank_as_written() {
    let found = extract(&[
        call(1, "a", "kubectl", serde_json::json!({"args": "describe pod api-1"})),
        result(
            2,
            "a",
            "kubectl",
            "Name: api-1\nImage: registry.example.com/api:v1.4.2\n  Reason: OOMKilled\n",
        ),
        call(3, "b", "bash", serde_json::json!({"command": "cargo build"})),
        result(
            4,
            "b",
            "bash",
            "   Compiling api v0.3.1\nerror[E0502]: cannot borrow\n  --> src/jobs/reconcile.rs:88:17\n",
        ),
    ]);
    assert_eq!(
        salience_of(&found, "OOMKilled"),
        Some(Salience::Written),
        "{found:?}"
    );
    assert_eq!(salience_of(&found, "E0502"), Some(Salience::Written));
    assert_eq!(salience_of(&found, "v1.4.2"), Some(Salience::Answered));
}

#[test]
fn values_of_a_listing_rank_below_a_value_answered_alone() {
    let found = extract(&[
        call(
            1,
            "a",
            "search_products",
            serde_json::json!({"query": "knife"}),
        ),
        result(
            2,
            "a",
            "search_products",
            r#"{"results":[{"sku":"CK-2231","price":"€19.99"},{"sku":"CK-2232","price":"€29.99"},{"sku":"CK-2233","price":"€39.99"}]}"#,
        ),
        call(3, "b", "lookup_order", serde_json::json!({"order": "sofa"})),
        result(4, "b", "lookup_order", "sofa order: total €1,359.00"),
    ]);
    assert_eq!(
        salience_of(&found, "€29.99"),
        Some(Salience::Listed),
        "{found:?}"
    );
    assert_eq!(salience_of(&found, "€1,359.00"), Some(Salience::Answered));
}

#[test]
fn a_brief_output_is_an_answer_and_a_long_ones_values_are_only_read() {
    let mut log = String::from("   Compiling billing-core v0.14.2 (crates/billing-core)\n");
    for i in 0..12 {
        log.push_str(&format!("test export::tests::case_{i} ... ok\n"));
    }
    let found = extract(&[
        call(
            1,
            "a",
            "bash",
            serde_json::json!({"command": "rustc --version"}),
        ),
        result(2, "a", "bash", "rustc 1.78.0 (9b00956e5 2024-04-29)\n"),
        call(3, "b", "bash", serde_json::json!({"command": "cargo test"})),
        result(4, "b", "bash", &log),
    ]);
    assert_eq!(
        salience_of(&found, "1.78.0"),
        Some(Salience::Answered),
        "{found:?}"
    );
    assert_eq!(salience_of(&found, "v0.14.2"), Some(Salience::Read));
    assert!(Salience::Answered > Salience::Read && Salience::Answered < Salience::Written);
}

#[test]
fn commands_written_in_prose_without_backticks() {
    let found = values_of(
        "To run the API locally I use RUST_LOG=billing=debug cargo run -p billing-api, after docker compose -f deploy/compose.dev.yml up -d db for the database.",
        ArtifactKind::Command,
    );
    assert!(
        found.contains(&"RUST_LOG=billing=debug cargo run -p billing-api".to_owned()),
        "{found:?}"
    );
    assert!(
        found.contains(&"docker compose -f deploy/compose.dev.yml up -d db".to_owned()),
        "{found:?}"
    );
    for prose in [
        "I use git every day.",
        "Is cargo slow for you too?",
        "Let's talk about docker later.",
    ] {
        assert!(
            values_of(prose, ArtifactKind::Command).is_empty(),
            "{prose}"
        );
    }
}

#[test]
fn upper_snake_names_of_failures_are_error_codes() {
    let found = values_of(
        "the provider answers 429 with RATE_LIMIT_EXCEEDED, or INVALID_CURRENCY_PAIR; MAX_RETRIES is a setting name",
        ArtifactKind::ErrorCode,
    );
    assert!(
        found.contains(&"RATE_LIMIT_EXCEEDED".to_owned()),
        "{found:?}"
    );
    assert!(
        found.contains(&"INVALID_CURRENCY_PAIR".to_owned()),
        "{found:?}"
    );
    assert!(!found.contains(&"MAX_RETRIES".to_owned()), "{found:?}");
}

#[test]
fn sql_command_tags_are_counts() {
    let found = extract(&[tool_result(
        1,
        "bash",
        "BEGIN\nINSERT 0 0\nUPDATE 49953\nDELETE 12\nCOMMIT\n",
        false,
    )]);
    assert!(
        has(&found, ArtifactKind::Count, "UPDATE 49953"),
        "{found:?}"
    );
    assert!(has(&found, ArtifactKind::Count, "DELETE 12"), "{found:?}");
    assert!(
        !found.iter().any(|a| a.value.contains("INSERT")),
        "{found:?}"
    );
}

/// Texts built from pieces the extractors react to (values, cues, secrets
/// that are claimed but not recorded), joined by separators.
fn shaped_text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::strategy::Strategy as _;
    const PIECES: &[&str] = &[
        "src/main.rs",
        "API_KEY=src/x.rs",
        "set the api key to 5",
        "DB_PASSWORD: hunter2",
        "https://example.com/a/b",
        "ops@example.com",
        "10.0.0.1:8080",
        "2026-04-14T10:00:01",
        "€200",
        "+49 30 1234567",
        "v1.2.3",
        "ENG-1234",
        "E0502",
        "ECONNREFUSED",
        "TimeoutError",
        "12 Main Street",
        "45s",
        "5 GB",
        "3 rows",
        "billing.fx_cache",
        "Mr Smith",
        "my name is Ana Díaz",
        "`cargo test -p api`",
        "$ ls -la",
        "the",
        "we",
        "never",
        "café",
        "a.b",
        "x/y",
        "#12",
        "and",
        "Turn 5",
    ];
    proptest::collection::vec(
        (
            proptest::sample::select(PIECES),
            proptest::sample::select(&[" ", ", ", ". ", "\n", ": ", "=", "/", ""][..]),
        ),
        0..8,
    )
    .prop_map(|parts| {
        parts
            .into_iter()
            .map(|(p, sep)| format!("{p}{sep}"))
            .collect()
    })
}

proptest::proptest! {
    /// The early-exit pass answers as the full one would.
    #[test]
    fn has_artifact_is_a_full_scan_found_something(text in shaped_text()) {
        proptest::prop_assert_eq!(has_artifact(&text), !scan(&text, STATED, false).is_empty());
    }

    /// A text the path extractor alone finds no path in has none.
    #[test]
    fn may_have_path_never_misses_a_path(text in shaped_text()) {
        let paths = said_by(Role::User, &text).iter().any(|a| a.kind == ArtifactKind::Path);
        proptest::prop_assert!(may_have_path(&text) || !paths);
    }

    /// The paths-only pass finds the full pass's paths, in its order, on
    /// text under the per-message cap.
    #[test]
    fn paths_are_the_full_passes_paths(text in shaped_text()) {
        proptest::prop_assert_eq!(paths(&text), values_of(&text, ArtifactKind::Path));
    }
}

#[test]
fn paths_of_bulk_text_are_the_full_passes() {
    let line = "see src/a.rs and /var/log/x.log at 10:00 with E0502 and https://h.io/p/q\n";
    let text = line.repeat(LONG_TEXT / line.len() + 1);
    assert!(text.len() > LONG_TEXT);
    assert_eq!(paths(&text), values_of(&text, ArtifactKind::Path));
}
