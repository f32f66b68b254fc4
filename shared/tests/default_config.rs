//! `config/default.toml` is the operator's reference: it must list every
//! engine key, with exactly the defaults the code uses.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::collections::BTreeSet;

use compactor_shared::config::EngineConfig;

const DEFAULT_TOML: &str = include_str!("../../config/default.toml");

fn keys(value: &toml::Value, prefix: &str, out: &mut BTreeSet<String>) {
    if let toml::Value::Table(table) = value {
        for (k, v) in table {
            let path = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            if v.is_table() {
                keys(v, &path, out);
            } else {
                out.insert(path);
            }
        }
    }
}

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
    let mut in_file = BTreeSet::new();
    keys(&engine_table(), "", &mut in_file);
    let code = toml::Value::try_from(EngineConfig::default()).expect("serializes");
    let mut in_code = BTreeSet::new();
    keys(&code, "", &mut in_code);
    assert_eq!(
        in_file, in_code,
        "keys differ between config/default.toml and EngineConfig"
    );
}
