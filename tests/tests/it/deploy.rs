//! The deployment material in `deploy/` checked against the code: the
//! Grafana dashboard and the Prometheus alerting rules reference only metric
//! families that exist (and the dashboard shows every one), the compose file,
//! the Kubernetes manifests and the systemd unit parse and keep their stop
//! timeouts above the worker's shutdown grace, the configuration files they
//! ship load, and the Dockerfile builds the two binaries with
//! `cargo build --release --locked`; a worker started with the kit's
//! configuration and environment requires the admin token (that test needs
//! Redis; the others no services).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::LazyLock;
use std::time::Duration;

use compactor_producer::client::ClientSettings;
use compactor_producer::metrics::{Family, Kind};
use compactor_worker::settings::Settings;
use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

// ---------------------------------------------------------------- helpers --

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

fn deploy_dir() -> PathBuf {
    root().join("deploy")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every document of a (multi-document) YAML file, as JSON values; empty
/// documents are skipped.
fn yaml_documents(path: &Path) -> Vec<Value> {
    let text = read(path);
    let mut docs = Vec::new();
    for (i, doc) in serde_norway::Deserializer::from_str(&text).enumerate() {
        let value = Value::deserialize(doc)
            .unwrap_or_else(|e| panic!("{} (document {}): {e}", path.display(), i + 1));
        if !value.is_null() {
            docs.push(value);
        }
    }
    docs
}

/// A single-document YAML file.
fn yaml(path: &Path) -> Value {
    let mut docs = yaml_documents(path);
    assert_eq!(docs.len(), 1, "{}: one YAML document", path.display());
    docs.remove(0)
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no string at {pointer} in {v}"))
}

/// `45`, `45s`, `1m30s`, `2m`, `1h` as a duration.
fn parse_duration(text: &str) -> Duration {
    let text = text.trim();
    if let Ok(secs) = text.parse::<u64>() {
        return Duration::from_secs(secs);
    }
    let re = Regex::new(r"(\d+)\s*(ms|s|m|h)").unwrap();
    let mut total = Duration::ZERO;
    let mut matched = 0;
    for c in re.captures_iter(text) {
        matched += c[0].len();
        let n: u64 = c[1].parse().unwrap();
        total += match &c[2] {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n * 60),
            _ => Duration::from_secs(n * 3600),
        };
    }
    let compact: String = text.split_whitespace().collect();
    assert!(
        matched > 0 && matched == compact.len(),
        "not a duration: {text:?}"
    );
    total
}

/// The worker's settings from `config/default.toml` plus `file`, with no
/// environment: the override files we ship must load and validate.
fn worker_settings_from(name: &str, toml: &str) -> Settings {
    let path = std::env::temp_dir().join(format!(
        "compactor-deploy-{}-{name}.toml",
        std::process::id()
    ));
    std::fs::write(&path, toml).unwrap();
    let worker = Settings::load_from(Some(&path), Vec::new());
    let client = compactor_producer::settings::load_from::<ClientSettings, _>(
        Some(&path),
        Vec::<(String, String)>::new(),
    );
    std::fs::remove_file(&path).unwrap();
    let worker = worker.unwrap_or_else(|e| panic!("{name}: the worker refuses it: {e}"));
    client.unwrap_or_else(|e| panic!("{name}: `compactor` refuses it: {e}"));
    worker
}

/// The worker's settings from `config/default.toml`, `toml` and the
/// environment `env`.
fn worker_settings_with(
    name: &str,
    toml: &str,
    env: BTreeMap<String, String>,
) -> Result<Settings, compactor_producer::settings::SettingsError> {
    let path = std::env::temp_dir().join(format!(
        "compactor-deploy-{}-{name}.toml",
        std::process::id()
    ));
    std::fs::write(&path, toml).unwrap();
    let settings = Settings::load_from(Some(&path), env);
    std::fs::remove_file(&path).unwrap();
    settings
}

/// The `KEY=value` lines of an environment file (comments and blank lines
/// skipped).
fn env_file(path: &Path) -> BTreeMap<String, String> {
    read(path)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.split_once('=').expect("KEY=value");
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

/// Compose's interpolation of `${VAR}`, `${VAR:-default}` and
/// `${VAR:?message}` with the variables `given`; `Err(message)` for a
/// required one that is missing.
fn interpolate(text: &str, given: &BTreeMap<&str, &str>) -> Result<String, String> {
    let re = Regex::new(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:-|:\?)([^}]*))?\}").unwrap();
    let mut out = String::new();
    let mut last = 0;
    for c in re.captures_iter(text) {
        let whole = c.get(0).unwrap();
        out.push_str(&text[last..whole.start()]);
        last = whole.end();
        let value = given.get(&c[1]).copied().filter(|v| !v.is_empty());
        match (value, c.get(2).map(|m| m.as_str())) {
            (Some(v), _) => out.push_str(v),
            (None, Some(":-")) => out.push_str(c.get(3).map_or("", |m| m.as_str())),
            (None, Some(_)) => return Err(format!("{}: {}", &c[1], &c[3])),
            (None, None) => {}
        }
    }
    out.push_str(&text[last..]);
    Ok(out)
}

/// The worker's default shutdown grace (`worker.shutdown_grace`).
fn default_grace() -> Duration {
    let grace = Settings::load_from(None, Vec::new())
        .unwrap()
        .worker
        .shutdown_grace;
    assert_eq!(grace, Duration::from_secs(30), "the documented default");
    grace
}

// ------------------------------------------------------------ metric names --

fn families() -> Vec<&'static Family> {
    compactor_producer::metrics::FAMILIES
        .iter()
        .chain(compactor_worker::llm::metrics::FAMILIES)
        .chain(compactor_producer::metrics::EVENT_FAMILIES)
        .chain(compactor_producer::metrics::HOOK_FAMILIES)
        .chain(compactor_producer::metrics::PROXY_FAMILIES)
        .collect()
}

/// Metrics besides ours that panels and rules may use (and the process
/// metrics the worker reads from /proc at each scrape: [`is_standard`]).
const STANDARD_METRICS: &[&str] = &["up"];

/// `up`, or one of the worker's `process_*` metrics.
fn is_standard(name: &str) -> bool {
    STANDARD_METRICS.contains(&name)
        || compactor_worker::observability::process::FAMILIES
            .iter()
            .any(|(family, _, _)| *family == name)
}

/// The family a series name belongs to: the family itself for counters and
/// gauges, `<family>_bucket|_sum|_count` for histograms (a bare histogram
/// name has no series in Prometheus' output).
fn family_of(series: &str) -> Option<&'static Family> {
    let all = families();
    if let Some(f) = all.iter().find(|f| f.name == series) {
        return (f.kind != Kind::Histogram).then_some(*f);
    }
    ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
        let base = series.strip_suffix(suffix)?;
        all.iter()
            .find(|f| f.name == base && f.kind == Kind::Histogram)
            .copied()
    })
}

static GRAFANA_VARIABLE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\$\{[^}]*\}|\$\w+").unwrap());
static STRING_LITERAL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`"#).unwrap());
static LABEL_MATCHERS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\{[^}]*\}").unwrap());
static RANGE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\[[^\]]*\]").unwrap());
static GROUPING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)").unwrap()
});
static OFFSET: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\boffset\s+-?[0-9a-z]+").unwrap());
static NUMBER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\b\d[\w.]*").unwrap());
static IDENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?").unwrap());
const PROMQL_KEYWORDS: &[&str] = &[
    "and",
    "or",
    "unless",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "offset",
    "inf",
    "nan",
];

/// The metric names a PromQL expression selects (Grafana variables allowed).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let s = GRAFANA_VARIABLE.replace_all(expr, " ");
    let s = STRING_LITERAL.replace_all(&s, " ");
    let s = LABEL_MATCHERS.replace_all(&s, " ");
    let s = RANGE.replace_all(&s, " ");
    let s = GROUPING.replace_all(&s, " ");
    let s = OFFSET.replace_all(&s, " ");
    let s = NUMBER.replace_all(&s, " ");
    IDENT
        .captures_iter(&s)
        .filter(|c| c.get(1).is_none()) // a function or aggregation call
        .map(|c| c[0].to_owned())
        .filter(|name| !PROMQL_KEYWORDS.contains(&name.to_ascii_lowercase().as_str()))
        .collect()
}

/// Checks that every expression selects at least one metric and only
/// metrics that exist; returns the families used.
fn check_references(what: &str, exprs: &[(String, String)]) -> BTreeSet<&'static str> {
    assert!(!exprs.is_empty(), "{what}: no PromQL expression found");
    let mut used = BTreeSet::new();
    let mut unknown = Vec::new();
    for (place, expr) in exprs {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{what}: {place}: no metric in {expr:?}");
        for name in names {
            if is_standard(&name) {
                continue;
            }
            match family_of(&name) {
                Some(f) => {
                    used.insert(f.name);
                }
                None => unknown.push(format!("{place}: {name}")),
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "{what} references metrics that do not exist (histograms need _bucket/_sum/_count):\n{}",
        unknown.join("\n")
    );
    used
}

#[test]
fn the_promql_scanner_finds_metric_names_and_nothing_else() {
    let expr = r#"histogram_quantile(0.95, sum by (queue, le) (rate(compactor_job_queue_wait_seconds_bucket{queue=~"$queue", state!="a_b"}[$__rate_interval] offset 5m)))
        / on (queue) group_left(domain) sum without (x) (compactor_jobs_started_total) > 1e3
        unless absent(up{job="compactor-worker"} == 1) or bool compactor_dead_letter_size"#;
    let names: Vec<String> = metric_names(expr).into_iter().collect();
    assert_eq!(
        names,
        [
            "compactor_dead_letter_size",
            "compactor_job_queue_wait_seconds_bucket",
            "compactor_jobs_started_total",
            "up",
        ]
    );
    assert!(family_of("compactor_job_queue_wait_seconds_bucket").is_some());
    assert!(family_of("compactor_job_queue_wait_seconds").is_none());
    assert!(family_of("compactor_jobs_started_total_count").is_none());
    assert!(family_of("compactor_no_such_total").is_none());
}

// --------------------------------------------------------------- dashboard --

/// Every `expr` in the dashboard (panels, rows' panels), with the panel title.
fn dashboard_exprs(value: &Value, place: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            let place = map
                .get("title")
                .and_then(Value::as_str)
                .map_or_else(|| place.to_owned(), |t| format!("panel {t:?}"));
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr", Value::String(expr)) => out.push((place.clone(), expr.clone())),
                    _ => dashboard_exprs(v, &place, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| dashboard_exprs(v, place, out)),
        _ => {}
    }
}

fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in dashboard["panels"].as_array().expect("panels") {
        out.push(p);
        if let Some(inner) = p.get("panels").and_then(Value::as_array) {
            out.extend(inner);
        }
    }
    out
}

#[test]
fn the_dashboard_shows_every_metric_family_and_only_existing_ones() {
    let path = deploy_dir().join("grafana/dashboards/compactor.json");
    let dashboard: Value = serde_json::from_str(&read(&path)).expect("the dashboard is JSON");
    assert_eq!(dashboard["uid"], "compactor");

    // Its datasource: a `datasource` variable of type prometheus, used by
    // every panel and target.
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("templating");
    assert!(variables.iter().any(|v| v["type"] == "datasource"
        && v["name"] == "datasource"
        && v["query"] == "prometheus"));
    let mut ids = BTreeSet::new();
    let mut exprs = Vec::new();
    for panel in panels(&dashboard) {
        let title = panel["title"].as_str().expect("every panel has a title");
        let id = panel["id"].as_u64().expect("every panel has an id");
        assert!(ids.insert(id), "panel id {id} used twice");
        assert!(panel["gridPos"].is_object(), "{title}: gridPos");
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(str_at(panel, "/datasource/uid"), "${datasource}", "{title}");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no query");
        for t in targets {
            assert_eq!(str_at(t, "/datasource/uid"), "${datasource}", "{title}");
            assert!(t["refId"].is_string(), "{title}: refId");
        }
        dashboard_exprs(panel, "", &mut exprs);
    }

    // Template variables: `label_values(<selector>, <label>)` queries.
    let label_values =
        Regex::new(r"^\s*label_values\(\s*(.+?)\s*,\s*[A-Za-z_]\w*\s*\)\s*$").unwrap();
    for v in variables.iter().filter(|v| v["type"] == "query") {
        let query = v["query"]
            .get("query")
            .unwrap_or(&v["query"])
            .as_str()
            .expect("a query variable's query");
        let selector = label_values
            .captures(query)
            .unwrap_or_else(|| panic!("variable {}: not label_values(…): {query}", v["name"]));
        exprs.push((format!("variable {}", v["name"]), selector[1].to_owned()));
    }

    let used = check_references("the dashboard", &exprs);
    let missing: Vec<&str> = families()
        .iter()
        .map(|f| f.name)
        .filter(|name| !used.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "metric families without a panel: {missing:?}"
    );
    assert_eq!(used.len(), families().len());
}

#[test]
fn grafana_is_provisioned_with_prometheus_and_the_dashboard() {
    let datasources = yaml(&deploy_dir().join("grafana/provisioning/datasources/prometheus.yml"));
    let ds = &datasources["datasources"][0];
    assert_eq!(ds["type"], "prometheus");
    assert_eq!(ds["url"], "http://prometheus:9090");
    assert_eq!(ds["isDefault"], true);

    let providers = yaml(&deploy_dir().join("grafana/provisioning/dashboards/compactor.yml"));
    let dashboards_path = str_at(&providers, "/providers/0/options/path");
    // The compose file mounts deploy/grafana/dashboards there.
    let compose = yaml(&deploy_dir().join("docker-compose.yml"));
    let mounts: Vec<&str> = compose["services"]["grafana"]["volumes"]
        .as_array()
        .expect("grafana volumes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        mounts.contains(&format!("./grafana/dashboards:{dashboards_path}:ro").as_str()),
        "{mounts:?}"
    );
    assert!(mounts.contains(&"./grafana/provisioning:/etc/grafana/provisioning:ro"));
}

// ------------------------------------------------------------------ alerts --

/// Where the alerts' `runbook_url`s point: docs/RUNBOOK.md on the
/// repository's main branch, one section per alert.
const RUNBOOK_URL: &str = "https://github.com/compactor-dev/compactor/blob/main/docs/RUNBOOK.md";

#[test]
fn the_alerting_rules_cover_the_failure_modes_with_existing_metrics() {
    let rules_file = yaml(&deploy_dir().join("prometheus/alerts.yml"));
    let runbook = read(&root().join("docs/RUNBOOK.md"));
    let mut exprs = Vec::new();
    let mut names = BTreeSet::new();
    for group in rules_file["groups"].as_array().expect("groups") {
        assert!(group["name"].is_string());
        for rule in group["rules"].as_array().expect("rules") {
            let name = str_at(rule, "/alert");
            assert!(names.insert(name.to_owned()), "alert {name} defined twice");
            let expr = str_at(rule, "/expr");
            parse_duration(str_at(rule, "/for"));
            let severity = str_at(rule, "/labels/severity");
            assert!(
                ["critical", "warning", "info"].contains(&severity),
                "{name}: severity {severity}"
            );
            assert!(!str_at(rule, "/annotations/summary").is_empty(), "{name}");
            assert!(
                !str_at(rule, "/annotations/description").is_empty(),
                "{name}"
            );
            assert_eq!(
                str_at(rule, "/annotations/runbook_url"),
                format!("{RUNBOOK_URL}#{}", name.to_lowercase()),
                "{name}: its runbook section"
            );
            assert!(
                runbook.contains(&format!("\n### {name}\n")),
                "docs/RUNBOOK.md has no section for {name}"
            );
            exprs.push((format!("alert {name}"), expr.to_owned()));
        }
    }
    check_references("alerts.yml", &exprs);

    // The failure modes of the issue, each watched by some rule.
    let watched = |what: &str, pred: &dyn Fn(&str, &BTreeSet<String>) -> bool| {
        assert!(
            exprs.iter().any(|(_, e)| pred(e, &metric_names(e))),
            "no alert for {what}"
        );
    };
    watched("dead-letter growth", &|_, m| {
        m.contains("compactor_jobs_dead_lettered_total") || m.contains("compactor_dead_letter_size")
    });
    watched("the failure ratio", &|_, m| {
        m.contains("compactor_jobs_failed_total") && m.contains("compactor_jobs_started_total")
    });
    watched("queue wait p95", &|e, m| {
        e.contains("histogram_quantile(0.95")
            && m.contains("compactor_job_queue_wait_seconds_bucket")
    });
    watched("stuck leases", &|_, m| {
        m.contains("compactor_jobs_recovered_total")
    });
    watched("running jobs that never finish", &|e, m| {
        e.contains(r#"state="running""#) && m.contains("compactor_queue_depth")
    });
    watched("no workers", &|e, _| {
        e.contains("absent(") && e.contains(r#"up{job="compactor-worker"}"#)
    });
    watched("fence conflicts", &|_, m| {
        m.contains("compactor_fence_conflicts_total")
    });
    watched("LLM errors", &|e, m| {
        m.contains("compactor_llm_requests_total") && e.contains("outcome")
    });
    watched("webhook deliveries given up", &|e, m| {
        m.contains("compactor_event_deliveries_total") && e.contains(r#"outcome="failed""#)
    });
    watched("events not delivered for long", &|_, m| {
        m.contains("compactor_events_oldest_undelivered_seconds")
    });
}

#[test]
fn prometheus_scrapes_the_workers_and_loads_the_rules() {
    let config = yaml(&deploy_dir().join("prometheus/prometheus.yml"));
    let rule_files: Vec<&str> = config["rule_files"]
        .as_array()
        .expect("rule_files")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let job = config["scrape_configs"]
        .as_array()
        .expect("scrape_configs")
        .iter()
        .find(|j| j["job_name"] == "compactor-worker")
        .expect("a compactor-worker scrape job (the alerts select job=\"compactor-worker\")");
    assert_eq!(job["dns_sd_configs"][0]["names"][0], "worker");
    assert_eq!(job["dns_sd_configs"][0]["port"], 9464);

    // The compose file mounts this configuration and every rule file.
    let compose = yaml(&deploy_dir().join("docker-compose.yml"));
    let mounts: Vec<&str> = compose["services"]["prometheus"]["volumes"]
        .as_array()
        .expect("prometheus volumes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(mounts.contains(&"./prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro"));
    for file in rule_files {
        assert!(
            mounts.iter().any(|m| m.split(':').nth(1) == Some(file)),
            "rule file {file} is not mounted: {mounts:?}"
        );
    }
}

// ----------------------------------------------------------------- compose --

fn command_line(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().expect("a string argument"))
            .collect::<Vec<_>>()
            .join(" "),
        other => panic!("not a command: {other}"),
    }
}

#[test]
fn the_compose_file_has_the_services_and_production_redis() {
    let path = deploy_dir().join("docker-compose.yml");
    let compose = yaml(&path);
    let services = compose["services"].as_object().expect("services");
    for name in [
        "redis",
        "postgres",
        "migrate",
        "worker",
        "prometheus",
        "grafana",
    ] {
        assert!(services.contains_key(name), "no service {name}");
    }

    // Redis 7, the queue's production settings: AOF fsynced every second,
    // never evict.
    let redis = &services["redis"];
    assert!(str_at(redis, "/image").starts_with("redis:7"));
    let args = command_line(&redis["command"]);
    for flag in [
        "--appendonly yes",
        "--appendfsync everysec",
        "--maxmemory-policy noeviction",
    ] {
        assert!(args.contains(flag), "redis lacks {flag}: {args}");
    }
    assert!(redis["healthcheck"].is_object());

    let postgres = &services["postgres"];
    assert!(str_at(postgres, "/image").starts_with("postgres:16"));
    assert!(postgres["healthcheck"]["test"].is_array());
    assert!(postgres["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v.as_str().unwrap().ends_with(":/var/lib/postgresql/data")));

    // A one-shot `compactor migrate` after PostgreSQL is healthy.
    let migrate = &services["migrate"];
    let migrate_cmd = format!(
        "{} {}",
        command_line(&migrate["entrypoint"]),
        command_line(&migrate["command"])
    );
    assert_eq!(migrate_cmd, "compactor migrate");
    assert_eq!(
        migrate["depends_on"]["postgres"]["condition"],
        "service_healthy"
    );
    assert_eq!(str_at(migrate, "/build/dockerfile"), "deploy/Dockerfile");
    assert!(deploy_dir()
        .join(str_at(migrate, "/build/context"))
        .join("deploy/Dockerfile")
        .is_file());

    // Two workers, after a successful migration, stopped with more time than
    // their shutdown grace.
    let worker = &services["worker"];
    assert_eq!(worker["deploy"]["replicas"], 2);
    let depends = &worker["depends_on"];
    assert_eq!(
        depends["migrate"]["condition"],
        "service_completed_successfully"
    );
    assert_eq!(depends["redis"]["condition"], "service_healthy");
    assert_eq!(depends["postgres"]["condition"], "service_healthy");
    assert_eq!(worker["image"], migrate["image"]);
    let env = &worker["environment"];
    assert_eq!(env["COMPACTOR__ADMIN__LISTEN"], "0.0.0.0:9464");
    assert!(str_at(env, "/DATABASE_URL").starts_with("postgres://"));
    assert_eq!(env["REDIS_URL"], "redis://redis:6379");
    let command = command_line(&worker["command"]);
    let args: Vec<&str> = command.split(' ').collect();
    let config_path = args[args
        .iter()
        .position(|a| *a == "--config")
        .expect("--config")
        + 1];
    let mount = worker["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find(|m| m.split(':').nth(1) == Some(config_path))
        .expect("the --config file is mounted");
    let config_file = deploy_dir().join(mount.split(':').next().unwrap());
    let settings = worker_settings_from("compose", &read(&config_file));
    // /v1 needs a token (config.toml's token_env), and compose refuses to
    // start without the variable.
    let token_var = settings
        .admin
        .token_env
        .as_deref()
        .expect("config.toml makes /v1 require a token");
    let wired = str_at(env, &format!("/{token_var}"));
    assert!(
        wired.starts_with(&format!("${{{token_var}:?")),
        "{token_var} is required by compose: {wired}"
    );
    let stop = parse_duration(str_at(worker, "/stop_grace_period"));
    assert!(
        stop > settings.worker.shutdown_grace && stop > default_grace(),
        "stop_grace_period {stop:?} must exceed the shutdown grace {:?}",
        settings.worker.shutdown_grace
    );

    // Every bind mount's source exists.
    for (name, service) in services {
        for volume in service["volumes"].as_array().into_iter().flatten() {
            let source = volume.as_str().unwrap().split(':').next().unwrap();
            if source.starts_with('.') {
                assert!(
                    deploy_dir().join(source).exists(),
                    "{name}: {source} does not exist"
                );
            }
        }
    }
}

/// `docker compose config --quiet` validates the file where the compose
/// plugin exists (it needs no engine); the YAML checks above run everywhere.
#[test]
fn docker_compose_validates_the_file_where_it_is_installed() {
    let path = deploy_dir().join("docker-compose.yml");
    let plugin = Command::new("docker").args(["compose", "version"]).output();
    match plugin {
        Ok(out) if out.status.success() => {
            let out = Command::new("docker")
                .args(["compose", "-f"])
                .arg(&path)
                .args(["config", "--quiet"])
                .env("COMPACTOR_ADMIN_TOKEN", "compose-config-check")
                .output()
                .expect("docker compose config");
            assert!(
                out.status.success(),
                "docker compose config: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        _ => {
            eprintln!(
                "docker compose is not installed here: only the YAML-level checks of {} ran",
                path.display()
            );
        }
    }
    // Whatever docker says, the file is YAML with the services.
    let compose = yaml(&path);
    assert!(compose["services"]["worker"].is_object());
}

// -------------------------------------------------------------- kubernetes --

fn k8s_objects() -> Vec<Value> {
    let dir = deploy_dir().join("k8s");
    let kustomization = yaml(&dir.join("kustomization.yaml"));
    assert_eq!(kustomization["kind"], "Kustomization");
    let resources: Vec<&str> = kustomization["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // Every manifest parses, listed or optional (the ServiceMonitor).
    let mut all = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if name == "kustomization.yaml" || !name.ends_with(".yaml") {
            continue;
        }
        let docs = yaml_documents(&path);
        assert!(!docs.is_empty(), "{name}: empty");
        for doc in &docs {
            assert!(doc["apiVersion"].is_string(), "{name}: apiVersion");
            assert!(doc["kind"].is_string(), "{name}: kind");
            assert!(doc["metadata"]["name"].is_string(), "{name}: metadata.name");
        }
        all.insert(name, docs);
    }
    for r in &resources {
        assert!(
            all.contains_key(*r),
            "kustomization lists {r}, which is missing"
        );
    }
    resources.iter().flat_map(|r| all[*r].clone()).collect()
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn secret_ref<'a>(container: &'a Value, var: &str) -> &'a Value {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == var)
        .map(|e| &e["valueFrom"]["secretKeyRef"])
        .filter(|r| r.is_object())
        .unwrap_or_else(|| panic!("{var} does not come from a Secret"))
}

#[test]
fn the_kubernetes_deployment_probes_and_outlasts_the_shutdown_grace() {
    let objects = k8s_objects();
    let deployment = find(&objects, "Deployment", "compactor-worker");
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"], 2);
    let pod = &spec["template"]["spec"];
    let container = &pod["containers"][0];

    // The ConfigMap's config.toml, mounted and passed with --config, loads.
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let config_path = args[args
        .iter()
        .position(|a| *a == "--config")
        .expect("--config")
        + 1];
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == config_path)
        .expect("the --config file is mounted");
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("the config volume");
    let config_map = find(&objects, "ConfigMap", str_at(volume, "/configMap/name"));
    let toml = str_at(config_map, &format!("/data/{}", str_at(mount, "/subPath")));
    let settings = worker_settings_from("k8s", toml);

    // SIGTERM: the pod is killed only after the shutdown grace.
    let grace = Duration::from_secs(pod["terminationGracePeriodSeconds"].as_u64().expect("set"));
    assert!(
        grace > settings.worker.shutdown_grace && grace > default_grace(),
        "terminationGracePeriodSeconds {grace:?} must exceed the shutdown grace {:?}",
        settings.worker.shutdown_grace
    );

    // Liveness on /healthz, readiness on /readyz, on the probe listener's
    // port (admin.health_listen, below): a flood of the API does not fail
    // them.
    let port = &container["ports"][0];
    assert_eq!(port["containerPort"], 9464);
    let health = &container["ports"][1];
    assert_eq!(health["containerPort"], 9465);
    for (probe, path) in [
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert!(
            get["port"] == health["name"] || get["port"] == 9465,
            "{probe} port"
        );
    }
    assert_eq!(
        spec["template"]["metadata"]["annotations"]["prometheus.io/port"],
        "9465"
    );

    // Non-root, bounded, secrets by reference.
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    assert!(container["resources"]["requests"]["memory"].is_string());
    assert!(container["resources"]["limits"]["memory"].is_string());
    for var in ["DATABASE_URL", "OPENAI_API_KEY", "COMPACTOR_ADMIN_TOKEN"] {
        assert_eq!(
            secret_ref(container, var)["name"],
            "compactor-secrets",
            "{var}"
        );
    }
    let env_map = str_at(container, "/envFrom/0/configMapRef/name");
    let env = &find(&objects, "ConfigMap", env_map)["data"];
    assert_eq!(env["COMPACTOR__ADMIN__LISTEN"], "0.0.0.0:9464");

    // The pod's environment: the ConfigMap's variables and the Secret's
    // (stand-in values). With it the configuration loads, listens on every
    // interface, and /v1 requires the token.
    let mut pod_env: BTreeMap<String, String> = env
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    for var in container["env"].as_array().unwrap() {
        if var["valueFrom"]["secretKeyRef"].is_object() {
            let name = var["name"].as_str().unwrap();
            pod_env.insert(name.to_owned(), format!("secret-{name}"));
        }
    }
    let settings = worker_settings_with("k8s-env", toml, pod_env.clone())
        .unwrap_or_else(|e| panic!("the pod's configuration: {e}"));
    assert!(!settings.admin.listen.ip().is_loopback());
    let probes = settings
        .admin
        .health_listen
        .expect("the probe listener is on");
    assert!(!probes.ip().is_loopback());
    assert_eq!(u64::from(probes.port()), health["containerPort"]);
    let token_var = settings
        .admin
        .token_env
        .clone()
        .expect("the ConfigMap's config.toml makes /v1 require a token");
    let token = settings
        .admin
        .resolve_token(|name| pod_env.get(name).cloned())
        .unwrap();
    assert!(token.is_some_and(|t| t.matches(format!("secret-{token_var}").as_bytes())));
    // Every key the configuration needs is a required key of the Secret:
    // an optional one that is missing would start the pod without it — a
    // crash loop (the LLM key of provider = "openai") or a refusal (the
    // token) — instead of a pod waiting with an event naming the key.
    let mut needed = vec!["DATABASE_URL".to_owned(), token_var];
    needed.extend(settings.llm.effective_api_key_env().map(str::to_owned));
    assert!(
        needed.iter().any(|v| v == "OPENAI_API_KEY"),
        "provider openai needs its key: {needed:?}"
    );
    for var in &needed {
        let reference = secret_ref(container, var);
        assert_ne!(reference["optional"], true, "{var} must be required");
    }

    // The metrics Service selects these pods; its name is the job label the
    // alerts expect.
    let service = find(&objects, "Service", "compactor-worker");
    for (k, v) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(
            &spec["template"]["metadata"]["labels"][k], v,
            "selector {k}"
        );
    }
    assert_eq!(service["spec"]["ports"][0]["port"], 9464);
    assert_eq!(service["spec"]["ports"][1]["targetPort"], health["name"]);

    // The migration Job runs `compactor migrate` with the database secret.
    let job = find(&objects, "Job", "compactor-migrate");
    let migrate = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(command_line(&migrate["command"]), "compactor");
    assert_eq!(migrate["args"][0], "migrate");
    assert_eq!(
        secret_ref(migrate, "DATABASE_URL")["name"],
        "compactor-secrets"
    );
    assert_eq!(migrate["image"], container["image"]);
}

// ----------------------------------------------------------------- systemd --

#[test]
fn the_systemd_unit_outlasts_the_shutdown_grace_and_is_hardened() {
    let unit = read(&deploy_dir().join("systemd/compactor-worker.service"));
    let mut section = String::new();
    let mut service: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in unit.lines().map(str::trim) {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_owned();
            continue;
        }
        let (key, value) = line.split_once('=').expect("key=value");
        if section == "Service" {
            service
                .entry(key.to_owned())
                .or_default()
                .push(value.to_owned());
        }
    }
    let one = |key: &str| -> &str {
        let values = service.get(key).unwrap_or_else(|| panic!("no {key}="));
        values.last().unwrap()
    };
    assert_eq!(
        one("ExecStart"),
        "/usr/local/bin/compactor-worker --config /etc/compactor/config.toml"
    );
    assert_eq!(one("EnvironmentFile"), "/etc/compactor/env");
    assert_eq!(one("KillSignal"), "SIGTERM");
    assert_eq!(one("Restart"), "on-failure");
    // The config file it runs with (deploy/config.toml is the example).
    let settings = worker_settings_from("systemd", &read(&deploy_dir().join("config.toml")));
    // Its environment file has the token /v1 requires, to be filled in:
    // as shipped (empty) the worker refuses to start, naming it.
    let token_var = settings
        .admin
        .token_env
        .clone()
        .expect("config.toml makes /v1 require a token");
    let env_file = env_file(&deploy_dir().join("systemd/env.example"));
    assert!(
        env_file.contains_key(&token_var),
        "{token_var} in env.example"
    );
    let missing = settings
        .admin
        .resolve_token(|name| env_file.get(name).cloned())
        .unwrap_err();
    assert!(missing.to_string().contains(&token_var), "{missing}");
    let stop = parse_duration(one("TimeoutStopSec"));
    assert!(
        stop > default_grace() && stop > settings.worker.shutdown_grace,
        "TimeoutStopSec {stop:?} must exceed the shutdown grace"
    );
    assert!(one("DynamicUser") == "yes" || service.contains_key("User"));
    assert_eq!(one("ProtectSystem"), "strict");
    assert_eq!(one("NoNewPrivileges"), "yes");
    assert_eq!(one("CapabilityBoundingSet"), "");
}

// -------------------------------------------------------------- Dockerfile --

#[test]
fn the_dockerfile_builds_both_binaries_locked_into_a_small_non_root_image() {
    let dockerfile = read(&deploy_dir().join("Dockerfile"));
    // Instructions, continuation lines joined.
    let joined = dockerfile
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("\\\n", " ");
    let instructions: Vec<&str> = joined
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let stages: Vec<usize> = instructions
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("FROM "))
        .map(|(i, _)| i)
        .collect();
    assert!(stages.len() >= 2, "multi-stage");

    let build = instructions
        .iter()
        .find(|l| l.contains("cargo build"))
        .expect("a cargo build step");
    assert!(build.contains("cargo build --release --locked"), "{build}");
    // Both binaries come from one package (one feature set, one build).
    assert!(
        build.contains("-p compactor-worker")
            && build.contains("--bin compactor-worker")
            && build.contains("--bin compactor "),
        "{build}"
    );
    assert!(build.contains("--mount=type=cache"), "dependency caching");
    assert!(
        root().join("Cargo.lock").is_file(),
        "--locked needs Cargo.lock"
    );

    // The builder's Rust is not older than the workspace's rust-version.
    let arg = |name: &str| -> String {
        let prefix = format!("ARG {name}=");
        instructions
            .iter()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no {prefix}"))
            .to_owned()
    };
    let minor = |v: &str| -> u32 {
        v.split('.')
            .nth(1)
            .unwrap()
            .trim_matches('"')
            .parse()
            .unwrap()
    };
    let workspace = read(&root().join("Cargo.toml"));
    let rust_version = workspace
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .expect("rust-version");
    assert!(minor(&arg("RUST_VERSION")) >= minor(rust_version));
    assert!(instructions[stages[0]].contains("rust:${RUST_VERSION}"));

    // The runtime stage: small base, both binaries, the reference config,
    // a non-root user, the admin port, the worker as entrypoint.
    let runtime = &instructions[*stages.last().unwrap()..];
    assert!(runtime[0].contains("debian:") || runtime[0].contains("distroless"));
    let copies: Vec<&&str> = runtime.iter().filter(|l| l.starts_with("COPY")).collect();
    assert!(copies
        .iter()
        .any(|l| l.contains("compactor-worker") && l.contains("/out/compactor ")));
    assert!(copies.iter().any(|l| l.contains("config/default.toml")));
    assert!(root().join("config/default.toml").is_file());
    let user = runtime
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER");
    assert!(!["root", "0", "0:0"].contains(&user.trim()), "USER {user}");
    assert!(runtime.contains(&"EXPOSE 9464"));
    // The probe listener, which the image's health check calls.
    assert!(runtime.contains(&"EXPOSE 9465"));
    assert!(runtime
        .iter()
        .any(|l| l.contains("COMPACTOR__ADMIN__HEALTH_LISTEN=0.0.0.0:9465")));
    assert!(runtime
        .iter()
        .any(|l| l.starts_with("HEALTHCHECK") && l.contains("/dev/tcp/127.0.0.1/9465")));
    assert!(runtime.contains(&r#"ENTRYPOINT ["compactor-worker"]"#));

    // The build context leaves out target/ and .git.
    let ignore = read(&root().join(".dockerignore"));
    let ignored: Vec<&str> = ignore.lines().map(str::trim).collect();
    assert!(ignored.contains(&"target/") && ignored.contains(&".git/"));
}

// ------------------------------------------------------ the token is on --

/// The issue: no file of `deploy/` set `[admin] token_env`, so the
/// `COMPACTOR_ADMIN_TOKEN` the kit provides was ignored and `/v1` answered
/// 200 without a token on 0.0.0.0. A worker started as compose starts it —
/// `deploy/config.toml` and the service's environment, interpolated as
/// compose does — refuses `/v1` without the token (401) and serves it with
/// the token; the probes stay open. Only what must differ on a test machine
/// is changed: the database, the Redis queue and the port (0, on every
/// interface as in the container).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_started_as_the_deploy_kit_starts_it_requires_the_token() {
    use compactor_e2e::db::{Backend, TestDb};
    use compactor_e2e::{start_worker, TestRedis};

    let compose = yaml(&deploy_dir().join("docker-compose.yml"));
    let service = &compose["services"]["worker"];
    let token = "deploy-kit-token-0123456789";
    let given = BTreeMap::from([("COMPACTOR_ADMIN_TOKEN", token)]);
    let mut env: BTreeMap<String, String> = service["environment"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let value = interpolate(v.as_str().unwrap(), &given).unwrap();
            (k.clone(), value)
        })
        .collect();
    // Compose itself refuses to start without the token.
    let required = interpolate(
        str_at(&service["environment"], "/COMPACTOR_ADMIN_TOKEN"),
        &BTreeMap::new(),
    );
    assert!(required.is_err(), "{required:?}");

    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    assert_eq!(env["COMPACTOR__ADMIN__LISTEN"], "0.0.0.0:9464");
    env.insert("COMPACTOR__ADMIN__LISTEN".into(), "0.0.0.0:0".into());
    env.insert("DATABASE_URL".into(), db.url.clone());
    env.insert("REDIS_URL".into(), redis.url.clone());
    env.insert(
        "COMPACTOR__QUEUE__NAME".into(),
        redis.config.name.as_str().to_owned(),
    );
    let mut settings = worker_settings_with(
        "compose-run",
        &read(&deploy_dir().join("config.toml")),
        env.clone(),
    )
    .unwrap();
    // The token as the worker resolves it, from the service's environment
    // (not this process's).
    settings.admin.token = settings
        .admin
        .resolve_token(|name| env.get(name).cloned())
        .unwrap();
    assert!(settings.admin.token.is_some(), "the kit wires the token");
    let worker = start_worker(settings).await;
    let base = worker
        .admin_url()
        .replace("0.0.0.0", "127.0.0.1")
        .replace("[::]", "[::1]");
    let http = reqwest::Client::new();
    let path = format!("{base}/v1/workstreams/chat/deploy/messages");
    let body = serde_json::json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]});

    let anonymous = http.post(&path).json(&body).send().await.unwrap();
    assert_eq!(anonymous.status(), reqwest::StatusCode::UNAUTHORIZED);
    let error: Value = anonymous.json().await.unwrap();
    assert_eq!(error["error"]["code"], "unauthorized");
    let wrong = http
        .post(&path)
        .bearer_auth("not-the-token")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), reqwest::StatusCode::UNAUTHORIZED);
    let authorized = http
        .post(&path)
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(authorized.status(), reqwest::StatusCode::OK);
    for probe in ["/healthz", "/readyz", "/metrics"] {
        let open = http.get(format!("{base}{probe}")).send().await.unwrap();
        assert_eq!(open.status(), reqwest::StatusCode::OK, "{probe}");
    }
    worker.stop().await;
}
