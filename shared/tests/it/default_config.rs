//! `config/default.toml` is the operator's reference: it must list every
//! engine key, with exactly the defaults the code uses.

use compactor_shared::config::EngineConfig;
use compactor_testkit::config::{key_paths, DEFAULT_TOML};

fn engine_table() -> toml::Value {
    let file: toml::Value = toml::from_str(DEFAULT_TOML).expect("default.toml parses");
    file.get("engine").cloned().expect("[engine] section")
}

#[test]
fn default_toml_engine_section_equals_the_code_defaults() {
    let parsed: EngineConfig = engine_table().try_into().expect("[engine] deserializes");
    assert_eq!(parsed, EngineConfig::default());
    parsed.validate().expect("defaults are valid");
}

#[test]
fn default_toml_lists_every_engine_key() {
    let in_file = key_paths(&engine_table());
    let code = toml::Value::try_from(EngineConfig::default()).expect("serializes");
    let in_code = key_paths(&code);
    assert_eq!(
        in_file, in_code,
        "keys differ between config/default.toml and EngineConfig"
    );
}
