//! Loading the worker's configuration: the defaults, a `--config` file, the
//! environment (`COMPACTOR__SECTION__KEY`, `REDIS_URL`, `DATABASE_URL`),
//! and refusals that name the key.

use std::path::PathBuf;
use std::time::Duration;

use compactor_worker::llm::Provider;
use compactor_worker::settings::{LogFormat, Settings};

fn env(vars: &[(&str, &str)]) -> Vec<(String, String)> {
    vars.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn file(name: &str, body: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("{name}-{}.toml", std::process::id()));
    std::fs::write(&path, body).unwrap();
    path
}

#[test]
fn with_nothing_set_the_defaults_apply() {
    let s = Settings::load_from(None, env(&[])).unwrap();
    assert_eq!(s, Settings::default());
    assert_eq!(s.database.url.expose(), "sqlite://compactor.db?mode=rwc");
    assert_eq!(s.redis.url.expose(), "redis://127.0.0.1:6379");
    assert_eq!(s.llm.provider, Provider::Extractive);
}

#[test]
fn a_file_overrides_the_defaults_and_the_environment_overrides_the_file() {
    let path = file(
        "layers",
        "[worker]\nconcurrency = 3\nshutdown_grace = \"10s\"\n\n[engine.boundary]\ntail_messages = 8\n",
    );
    let s = Settings::load_from(
        Some(&path),
        env(&[
            ("COMPACTOR__WORKER__CONCURRENCY", "5"),
            ("COMPACTOR__LOG__FORMAT", "json"),
            ("COMPACTOR__ENGINE__PRUNE__PROTECTED_TOOLS", "skill,memory"),
            ("REDIS_URL", "redis://cache:6380/2"),
            ("DATABASE_URL", "postgres://app:pw-7Qx2@db/compactor"),
            ("UNRELATED", "ignored"),
        ]),
    )
    .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(s.worker.concurrency, 5, "environment over file");
    assert_eq!(
        s.worker.shutdown_grace,
        Duration::from_secs(10),
        "file over defaults"
    );
    assert_eq!(s.engine.boundary.tail_messages, 8);
    assert_eq!(s.log.format, LogFormat::Json);
    assert_eq!(s.engine.prune.protected_tools, vec!["skill", "memory"]);
    assert_eq!(s.redis.url.expose(), "redis://cache:6380/2");
    assert_eq!(
        s.database.url.expose(),
        "postgres://app:pw-7Qx2@db/compactor"
    );
    assert!(
        !format!("{s:?}").contains("pw-7Qx2"),
        "no password in Debug"
    );
}

#[test]
fn bad_values_are_refused_with_the_key_name() {
    for (vars, key) in [
        (
            vec![("COMPACTOR__WORKER__CONCURRENCY", "many")],
            "concurrency",
        ),
        (vec![("COMPACTOR__QUEUE__LEASE_TTL", "soon")], "lease_ttl"),
        (vec![("COMPACTOR__WORKER__CONCURRENCY", "0")], "concurrency"),
        (vec![("COMPACTOR__LLM__PROVIDER", "openai")], "model"),
        (vec![("COMPACTOR__ENGINE__TRIGGER__RATIO", "3.5")], "ratio"),
        (vec![("COMPACTOR__QUEUE__NAME", "Not A Name")], "queue name"),
    ] {
        let err = Settings::load_from(None, env(&vars))
            .unwrap_err()
            .to_string();
        assert!(err.contains(key), "{vars:?}: {err}");
    }
    let path = file("typo", "[workers]\nconcurrency = 2\n");
    let err = Settings::load_from(Some(&path), env(&[]))
        .unwrap_err()
        .to_string();
    std::fs::remove_file(&path).unwrap();
    assert!(
        err.contains("workers"),
        "an unknown section is named: {err}"
    );
    let err = Settings::load_from(
        Some(std::path::Path::new("/nonexistent/compactor.toml")),
        env(&[]),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("/nonexistent/compactor.toml"), "{err}");
}

#[test]
fn the_production_example_is_valid() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/production.example.toml");
    let s =
        Settings::load_from(Some(&path), env(&[("DATABASE_URL", "postgres://app@db/c")])).unwrap();
    assert_eq!(s.llm.provider, Provider::OpenAi);
    assert_eq!(s.log.format, LogFormat::Json);
    assert_eq!(s.worker.concurrency, 4);
}

#[test]
fn the_local_llm_example_is_valid_and_fits_a_slow_call() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/local-llm.example.toml");
    let s = Settings::load_from(Some(&path), env(&[])).unwrap();
    assert_eq!(s.llm.provider, Provider::OpenAi);
    assert_eq!(s.llm.request_timeout, Duration::from_secs(600));
    assert!(s.llm_request_room() >= s.llm.request_timeout);
    assert!(s.engine.summarization_call().total() <= s.engine.trigger.context_window());
    // The same file with the default lock duration is refused, naming
    // what would fit.
    let err = Settings::load_from(
        Some(&path),
        env(&[("COMPACTOR__WORKER__LOCK_DURATION", "5m")]),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("llm.request_timeout"), "{err}");
    assert!(err.contains("at least 915s"), "{err}");
}

#[test]
fn the_real_model_run_config_is_valid() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/real-llm/worker.toml");
    let s = Settings::load_from(
        Some(&path),
        env(&[("COMPACTOR__LLM__BASE_URL", "http://127.0.0.1:1/v1")]),
    )
    .unwrap();
    assert_eq!(s.engine.trigger.context_window(), 4_096);
    assert!(s.engine.summarization_call().total() <= 4_096);
}

#[test]
fn a_redis_cluster_is_a_flag_and_a_comma_separated_list_of_seed_nodes() {
    assert!(!Settings::default().redis.cluster, "one server by default");
    let list = "redis://:hunter2@10.0.0.1:6379,redis://:hunter2@10.0.0.2:6379";
    for url_var in ["REDIS_URL", "COMPACTOR__REDIS__URL"] {
        let s = Settings::load_from(
            None,
            env(&[(url_var, list), ("COMPACTOR__REDIS__CLUSTER", "true")]),
        )
        .unwrap();
        assert!(s.redis.cluster, "{url_var}");
        assert_eq!(s.redis.url.expose(), list, "{url_var}: the list as given");
        let shown = format!("{s:?} {}", s.redis.url);
        assert!(!shown.contains("hunter2"), "no password shown: {shown}");
    }
    let path = file(
        "cluster",
        "[redis]\nurl = \"redis://a:6379,redis://b:6379\"\ncluster = true\n",
    );
    let s = Settings::load_from(Some(&path), env(&[])).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(s.redis.cluster);
    let mut one = Settings::default();
    one.redis.url = compactor_producer::settings::ConnectionUrl::new(list);
    let err = one.validate().unwrap_err().to_string();
    assert!(err.contains("redis.cluster"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
    let err = Settings::load_from(None, env(&[("COMPACTOR__REDIS__CLUSTER", "maybe")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("cluster"), "{err}");
}

/// The issue: `/v1` answered 200 without a token on 0.0.0.0. A listen
/// address beyond loopback without a token is now a configuration error
/// (the binary exits with status 2, naming the fix), unless
/// `allow_unauthenticated` says it is meant.
#[test]
fn an_open_address_without_a_token_refuses_to_start() {
    for listen in ["0.0.0.0:9464", "[::]:9464", "10.1.2.3:9464"] {
        let err = Settings::load_from(None, env(&[("COMPACTOR__ADMIN__LISTEN", listen)]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("admin.listen") && err.contains("admin.token_env"),
            "{listen}: {err}"
        );
        assert!(err.contains("allow_unauthenticated"), "{err}");
        // A token variable, or saying it is meant, or loopback: fine.
        for extra in [
            ("COMPACTOR__ADMIN__TOKEN_ENV", "COMPACTOR_ADMIN_TOKEN"),
            ("COMPACTOR__ADMIN__ALLOW_UNAUTHENTICATED", "true"),
            ("COMPACTOR__ADMIN__ENABLED", "false"),
        ] {
            let vars = [("COMPACTOR__ADMIN__LISTEN", listen), extra];
            assert!(
                Settings::load_from(None, env(&vars)).is_ok(),
                "{listen} with {extra:?}"
            );
        }
    }
    for listen in ["127.0.0.1:9464", "[::1]:9464", "127.0.0.2:0"] {
        assert!(
            Settings::load_from(None, env(&[("COMPACTOR__ADMIN__LISTEN", listen)])).is_ok(),
            "{listen}"
        );
    }

    // The binary: exit status 2 (systemd does not restart it), before it
    // connects to anything, with the reason on stderr.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_compactor-worker"))
        .env("COMPACTOR__ADMIN__LISTEN", "0.0.0.0:0")
        .env("REDIS_URL", "redis://127.0.0.1:1")
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .env_remove("COMPACTOR__ADMIN__TOKEN_ENV")
        .env_remove("COMPACTOR__ADMIN__ALLOW_UNAUTHENTICATED")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("admin.token_env"), "{stderr}");
}

/// The admin server's bounds are settings, checked at start.
#[test]
fn the_admin_bounds_are_settings_checked_at_start() {
    let s = Settings::load_from(
        None,
        env(&[
            ("COMPACTOR__ADMIN__REQUEST_TIMEOUT", "5s"),
            ("COMPACTOR__ADMIN__MAX_LONG_POLLS", "10"),
            ("COMPACTOR__ADMIN__MAX_CONNECTIONS", "20"),
            ("COMPACTOR__ADMIN__HEADER_READ_TIMEOUT", "2s"),
            ("COMPACTOR__ADMIN__IDLE_TIMEOUT", "30s"),
            ("COMPACTOR__DATABASE__STATEMENT_TIMEOUT", "3s"),
            ("COMPACTOR__DATABASE__CONTEXT_MAX_MESSAGES", "500"),
        ]),
    )
    .unwrap();
    assert_eq!(s.admin.request_timeout, Duration::from_secs(5));
    assert_eq!(s.admin.max_long_polls, 10);
    assert_eq!(s.admin.max_connections, 20);
    assert_eq!(s.admin.header_read_timeout, Duration::from_secs(2));
    assert_eq!(s.admin.idle_timeout, Duration::from_secs(30));
    assert_eq!(s.database.statement_timeout, Duration::from_secs(3));
    assert_eq!(s.database.context_max_messages, 500);
    for (vars, key) in [
        (
            vec![
                ("COMPACTOR__ADMIN__MAX_LONG_POLLS", "20"),
                ("COMPACTOR__ADMIN__MAX_CONNECTIONS", "20"),
            ],
            "admin.max_long_polls",
        ),
        (
            vec![("COMPACTOR__ADMIN__REQUEST_TIMEOUT", "0s")],
            "admin.request_timeout",
        ),
        (
            vec![("COMPACTOR__ADMIN__HEADER_READ_TIMEOUT", "0s")],
            "admin.header_read_timeout",
        ),
        (
            vec![("COMPACTOR__DATABASE__CONTEXT_MAX_MESSAGES", "0")],
            "database.context_max_messages",
        ),
        (
            vec![("COMPACTOR__DATABASE__CONTEXT_MAX_TOKENS", "1000")],
            "database.context_max_tokens",
        ),
        (
            vec![("COMPACTOR__DATABASE__STATEMENT_TIMEOUT", "0s")],
            "database.statement_timeout",
        ),
    ] {
        let err = Settings::load_from(None, env(&vars))
            .unwrap_err()
            .to_string();
        assert!(err.contains(key), "{vars:?}: {err}");
    }
}

/// Issue 31: with an LLM and a small window, the defaults refused to
/// start (the reserve and margin, then the chunk, then the summary budget).
/// Now a model's window is the one engine setting it needs: the sizes left
/// unset derive from it.
#[test]
fn with_an_llm_the_window_alone_is_enough() {
    let llm = [
        ("COMPACTOR__LLM__PROVIDER", "openai"),
        ("COMPACTOR__LLM__MODEL", "local-model"),
        ("COMPACTOR__LLM__BASE_URL", "http://127.0.0.1:8080/v1"),
    ];
    for (window, reserve, margin) in [
        ("8192", 2_048, 512),
        ("32768", 8_192, 2_048),
        ("128000", 32_000, 8_000),
    ] {
        let mut vars = llm.to_vec();
        vars.push(("COMPACTOR__ENGINE__TRIGGER__CONTEXT_WINDOW", window));
        let s = Settings::load_from(None, env(&vars)).unwrap_or_else(|e| panic!("{window}: {e}"));
        let window: u64 = window.parse().unwrap();
        assert_eq!(s.llm.provider, Provider::OpenAi);
        assert_eq!(
            s.engine.trigger,
            compactor_shared::trigger::TriggerPolicy::Threshold {
                context_window: window,
                ratio: 0.7,
                output_reserve: reserve,
                safety_margin: margin,
            }
        );
        assert_eq!(
            s.engine,
            compactor_shared::config::EngineConfig::for_window(window)
        );
        assert!(
            s.engine.summarization_call().total() <= window,
            "{window}: {:?}",
            s.engine.summarization_call()
        );
        // A file that names only the window reads the same.
        let path = file(
            &format!("window-{window}"),
            &format!("[engine.trigger]\ncontext_window = {window}\n"),
        );
        let from_file = Settings::load_from(Some(&path), env(&llm)).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(from_file.engine, s.engine, "{window}");
    }
    // Large windows keep the seeds' sizes.
    let mut vars = llm.to_vec();
    vars.push(("COMPACTOR__ENGINE__TRIGGER__CONTEXT_WINDOW", "128000"));
    let s = Settings::load_from(None, env(&vars)).unwrap();
    assert_eq!(s.engine.chunk.max_chars, 120_000);
    assert_eq!(s.engine.summary_budget(), 4_096);
}

#[test]
fn with_an_llm_a_size_set_by_hand_that_does_not_fit_is_still_refused() {
    let base = [
        ("COMPACTOR__LLM__PROVIDER", "openai"),
        ("COMPACTOR__LLM__MODEL", "local-model"),
        ("COMPACTOR__LLM__BASE_URL", "http://127.0.0.1:8080/v1"),
        ("COMPACTOR__ENGINE__TRIGGER__CONTEXT_WINDOW", "8192"),
    ];
    for (key, value, named) in [
        (
            "COMPACTOR__ENGINE__TRIGGER__OUTPUT_RESERVE",
            "32000",
            "engine.trigger: output_reserve + safety_margin (32512)",
        ),
        (
            "COMPACTOR__ENGINE__CHUNK__MAX_CHARS",
            "120000",
            "engine.chunk.max_chars: ",
        ),
        (
            "COMPACTOR__ENGINE__SUMMARY__MAX_OUTPUT_TOKENS",
            "6000",
            "engine.summary.max_output_tokens: 6000 is not below the trigger",
        ),
    ] {
        let mut vars = base.to_vec();
        vars.push((key, value));
        let err = Settings::load_from(None, env(&vars))
            .unwrap_err()
            .to_string();
        assert!(err.contains(named), "{key}: {err}");
    }
    // One that fits is used as it is.
    let mut vars = base.to_vec();
    vars.push(("COMPACTOR__ENGINE__CHUNK__MAX_CHARS", "6000"));
    let s = Settings::load_from(None, env(&vars)).unwrap();
    assert_eq!(s.engine.chunk.max_chars, 6_000);
}
