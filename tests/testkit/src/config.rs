//! Reading `config/default.toml`, the operator's reference, which tests of
//! several crates hold against their code's defaults.

use std::collections::BTreeSet;

/// The workspace's `config/default.toml`.
pub const DEFAULT_TOML: &str = include_str!("../../../config/default.toml");

/// The dotted path of every value (not table) under `value`: `a.b.c`.
pub fn key_paths(value: &toml::Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    collect(value, "", &mut out);
    out
}

fn collect(value: &toml::Value, prefix: &str, out: &mut BTreeSet<String>) {
    if let toml::Value::Table(table) = value {
        for (k, v) in table {
            let path = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            if v.is_table() {
                collect(v, &path, out);
            } else {
                out.insert(path);
            }
        }
    }
}
