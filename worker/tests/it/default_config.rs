//! `config/default.toml` is the operator's reference: its `[queue]` and
//! `[worker]` sections must list every key of the queue and runtime
//! settings, with exactly the defaults the code uses.

use compactor_producer::queue::QueueConfig;
use compactor_worker::runtime::RuntimeConfig;

use compactor_testkit::config::{key_paths as key_set, DEFAULT_TOML};

fn section(name: &str) -> toml::Value {
    let file: toml::Value = toml::from_str(DEFAULT_TOML).expect("default.toml parses");
    file.get(name)
        .cloned()
        .unwrap_or_else(|| panic!("[{name}] section"))
}

#[test]
fn the_queue_section_equals_the_code_defaults() {
    let parsed: QueueConfig = section("queue").try_into().expect("[queue] deserializes");
    assert_eq!(parsed, QueueConfig::default());
    parsed.validate().expect("defaults are valid");
    let code = toml::Value::try_from(QueueConfig::default()).expect("serializes");
    assert_eq!(key_set(&section("queue")), key_set(&code));
}

#[test]
fn the_worker_section_equals_the_code_defaults() {
    let parsed: RuntimeConfig = section("worker").try_into().expect("[worker] deserializes");
    assert_eq!(parsed, RuntimeConfig::default());
    parsed
        .validate(QueueConfig::default().lease_ttl)
        .expect("defaults are valid");
    let code = toml::Value::try_from(RuntimeConfig::default()).expect("serializes");
    assert_eq!(key_set(&section("worker")), key_set(&code));
}

#[test]
fn bad_values_are_refused_with_the_key_name() {
    let err = toml::from_str::<QueueConfig>("lease_ttl = \"soon\"").unwrap_err();
    assert!(err.to_string().contains("lease_ttl"), "{err}");
    let err = toml::from_str::<QueueConfig>("name = \"Bad Name\"").unwrap_err();
    assert!(err.to_string().contains("invalid queue name"), "{err}");
    let err = toml::from_str::<RuntimeConfig>("concurrency = 2\nconcurency = 3").unwrap_err();
    assert!(err.to_string().contains("concurency"), "{err}");
    let config: RuntimeConfig = toml::from_str("renew_interval = \"20s\"").unwrap();
    let err = config
        .validate(QueueConfig::default().lease_ttl)
        .unwrap_err();
    assert_eq!(err.field, "renew_interval");
    let config: QueueConfig = toml::from_str("lease_ttl = \"0s\"").unwrap();
    assert_eq!(config.validate().unwrap_err().field, "lease_ttl");
}

#[test]
fn the_whole_file_equals_the_code_defaults() {
    use compactor_worker::settings::Settings;
    let parsed: Settings = toml::from_str(DEFAULT_TOML).expect("default.toml deserializes");
    assert_eq!(parsed, Settings::default());
    parsed.validate().expect("defaults are valid");
    // Every key the code has is in the file (optional keys left unset by
    // default are commented out there and absent from the serialization).
    let file: toml::Value = toml::from_str(DEFAULT_TOML).unwrap();
    let code = toml::Value::try_from(Settings::default()).expect("serializes");
    assert_eq!(key_set(&file), key_set(&code));
}

#[test]
fn the_admin_section_is_the_last_and_equals_the_code_defaults() {
    use compactor_worker::settings::AdminSettings;
    let parsed: AdminSettings = section("admin").try_into().expect("[admin] deserializes");
    assert_eq!(parsed, AdminSettings::default());
    let last_header = DEFAULT_TOML.lines().rfind(|l| l.starts_with('[')).unwrap();
    assert_eq!(last_header, "[admin]");
    assert!(
        DEFAULT_TOML.contains("# token_env = \"COMPACTOR_ADMIN_TOKEN\""),
        "the optional token_env is documented"
    );
    let err = toml::from_str::<AdminSettings>("listen = \"nowhere\"").unwrap_err();
    assert!(err.to_string().contains("listen"), "{err}");
    let err = toml::from_str::<AdminSettings>("token = \"inline\"").unwrap_err();
    assert!(
        err.to_string().contains("token"),
        "a token is never read from a file: {err}"
    );
}
