//! When a workstream is due for compaction.
//!
//! Three policies, one chosen by configuration:
//! - [`TriggerPolicy::Threshold`] (the seed, default): compact when the
//!   estimated tokens reach `min(ctx × 0.7, ctx − output_reserve −
//!   safety_margin)`; with 200,000 / 32,000 / 8,000 that is 140,000.
//!   Left unset, the reserve and the margin are derived from the window
//!   ([`derived_output_reserve`], [`derived_safety_margin`]): the seed's
//!   32,000 and 8,000 from a 128,000-token window up, scaled down below it,
//!   so that an 8k model's trigger is min(5,600, 8,000 − 2,000 − 500).
//! - [`TriggerPolicy::Overflow`] (OpenCode): compact when the usage the
//!   model reported for the last step, `input + cache_read + output`,
//!   exceeds `input_limit`, or `ctx − output_reserve` when the model has no
//!   separate input limit. `ctx = 0` means an unlimited model: never.
//! - [`TriggerPolicy::Utilization`] (CoWork): compact at a fixed share of
//!   the window, 0.90 by default.
//!
//! A policy is evaluated on a [`Measure`]: the engine's estimate of the
//! serialized context, or the usage a provider reported. Policies that need
//! reported usage fall back to the estimate when none is given, so a
//! backend that cannot pass usage still gets compaction.

use serde::{Deserialize, Serialize};

/// Token usage reported by a model provider for the last step. Each
/// count is a whole number; one written with a zero fraction (`3170.0`, as
/// clients in languages without an integer type send it) is read as that
/// number, as JSON Schema's `integer` allows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Usage {
    #[serde(deserialize_with = "whole_number")]
    #[cfg_attr(
        feature = "openapi",
        schema(format = "uint64", maximum = 18_446_744_073_709_551_615_u64)
    )]
    pub input_tokens: u64,
    #[serde(deserialize_with = "whole_number")]
    #[cfg_attr(
        feature = "openapi",
        schema(format = "uint64", maximum = 18_446_744_073_709_551_615_u64)
    )]
    pub cache_read_tokens: u64,
    #[serde(deserialize_with = "whole_number")]
    #[cfg_attr(
        feature = "openapi",
        schema(format = "uint64", maximum = 18_446_744_073_709_551_615_u64)
    )]
    pub output_tokens: u64,
}

/// A `u64`, also from a float with no fraction within range (`42.0`, as
/// JSON Schema's `integer` allows and clients without an integer type
/// send). For `#[serde(deserialize_with)]`.
pub fn whole_number<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    struct WholeNumber;

    impl serde::de::Visitor<'_> for WholeNumber {
        type Value = u64;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a whole number of tokens, 0 or more")
        }

        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u64, E> {
            Ok(v)
        }

        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u64, E> {
            u64::try_from(v).map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &self))
        }

        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<u64, E> {
            // 2^64 as f64: every whole float below it fits a u64.
            const LIMIT: f64 = 18_446_744_073_709_551_616.0;
            if v.fract() == 0.0 && (0.0..LIMIT).contains(&v) {
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                Ok(v as u64)
            } else {
                Err(E::invalid_value(serde::de::Unexpected::Float(v), &self))
            }
        }
    }

    deserializer.deserialize_any(WholeNumber)
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.cache_read_tokens)
            .saturating_add(self.output_tokens)
    }
}

/// How big the context currently is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measure {
    /// The engine's estimate of summary + state + un-compacted messages.
    pub estimated_tokens: u64,
    /// What the provider reported for the last step, when known. Usage
    /// recorded before the latest compaction must not be passed (it would
    /// re-trigger compaction on a context that is already small).
    pub reported: Option<Usage>,
}

impl Measure {
    pub fn estimated(tokens: u64) -> Measure {
        Measure {
            estimated_tokens: tokens,
            reported: None,
        }
    }
}

/// The configured trigger policy, with every size in force: a reserve or
/// margin the configuration leaves out is derived from the window as the
/// configuration is read, so a policy in hand never has an unset one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(from = "TriggerSpec", into = "TriggerSpec")]
pub enum TriggerPolicy {
    Threshold {
        context_window: u64,
        ratio: f64,
        output_reserve: u64,
        safety_margin: u64,
    },
    Overflow {
        context_window: u64,
        input_limit: Option<u64>,
        output_reserve: u64,
    },
    Utilization {
        context_window: u64,
        ratio: f64,
    },
}

/// [`TriggerPolicy`] as a configuration writes it. `output_reserve` and
/// `safety_margin` may be left out (`None`): reading derives them from
/// `context_window`, and writing leaves out a value equal to the derived
/// one, so the derived and the explicit stay apart where they can differ.
#[derive(Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "snake_case", deny_unknown_fields)]
enum TriggerSpec {
    Threshold {
        #[serde(default = "default_context_window")]
        context_window: u64,
        #[serde(default = "default_ratio_threshold")]
        ratio: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_reserve: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        safety_margin: Option<u64>,
    },
    Overflow {
        #[serde(default = "default_context_window")]
        context_window: u64,
        #[serde(default)]
        input_limit: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_reserve: Option<u64>,
    },
    Utilization {
        #[serde(default = "default_context_window")]
        context_window: u64,
        #[serde(default = "default_ratio_utilization")]
        ratio: f64,
    },
}

impl From<TriggerSpec> for TriggerPolicy {
    fn from(spec: TriggerSpec) -> TriggerPolicy {
        match spec {
            TriggerSpec::Threshold {
                context_window,
                ratio,
                output_reserve,
                safety_margin,
            } => TriggerPolicy::Threshold {
                context_window,
                ratio,
                output_reserve: output_reserve
                    .unwrap_or_else(|| derived_output_reserve(context_window)),
                safety_margin: safety_margin
                    .unwrap_or_else(|| derived_safety_margin(context_window)),
            },
            TriggerSpec::Overflow {
                context_window,
                input_limit,
                output_reserve,
            } => TriggerPolicy::Overflow {
                context_window,
                input_limit,
                output_reserve: output_reserve
                    .unwrap_or_else(|| derived_output_reserve(context_window)),
            },
            TriggerSpec::Utilization {
                context_window,
                ratio,
            } => TriggerPolicy::Utilization {
                context_window,
                ratio,
            },
        }
    }
}

impl From<TriggerPolicy> for TriggerSpec {
    fn from(policy: TriggerPolicy) -> TriggerSpec {
        let unless = |value: u64, derived: u64| (value != derived).then_some(value);
        match policy {
            TriggerPolicy::Threshold {
                context_window,
                ratio,
                output_reserve,
                safety_margin,
            } => TriggerSpec::Threshold {
                context_window,
                ratio,
                output_reserve: unless(output_reserve, derived_output_reserve(context_window)),
                safety_margin: unless(safety_margin, derived_safety_margin(context_window)),
            },
            TriggerPolicy::Overflow {
                context_window,
                input_limit,
                output_reserve,
            } => TriggerSpec::Overflow {
                context_window,
                input_limit,
                output_reserve: unless(output_reserve, derived_output_reserve(context_window)),
            },
            TriggerPolicy::Utilization {
                context_window,
                ratio,
            } => TriggerSpec::Utilization {
                context_window,
                ratio,
            },
        }
    }
}

fn default_context_window() -> u64 {
    200_000
}
fn default_ratio_threshold() -> f64 {
    0.7
}
fn default_ratio_utilization() -> f64 {
    0.9
}

/// The seed's output reserve: tokens kept for the agent model's answer.
pub const SEED_OUTPUT_RESERVE: u64 = 32_000;
/// The seed's safety margin below the reserve.
pub const SEED_SAFETY_MARGIN: u64 = 8_000;
/// The smallest window that gets the seed's reserve and margin as they
/// are; a smaller one gets them scaled by `window / SEED_WINDOW`.
pub const SEED_WINDOW: u64 = 128_000;

/// `output_reserve` when the configuration leaves it unset: a quarter of
/// the window, at most the seed's 32,000 (reached at 128,000 tokens); the
/// seed's for an unlimited model (`context_window = 0`). 8,000 → 2,000,
/// 32,000 → 8,000.
pub fn derived_output_reserve(context_window: u64) -> u64 {
    scaled_to_window(SEED_OUTPUT_RESERVE, context_window)
}

/// `safety_margin` when the configuration leaves it unset: a sixteenth of
/// the window, at most the seed's 8,000 (reached at 128,000 tokens); the
/// seed's for an unlimited model. 8,000 → 500, 32,000 → 2,000. With the
/// derived reserve, the two take 31.25 % of a small window, so the
/// threshold policy's trigger is 68.75 % of it (below the 0.7 ratio).
pub fn derived_safety_margin(context_window: u64) -> u64 {
    scaled_to_window(SEED_SAFETY_MARGIN, context_window)
}

/// `seed × window / SEED_WINDOW` below [`SEED_WINDOW`], `seed` from it up
/// and for an unlimited window (0).
fn scaled_to_window(seed: u64, context_window: u64) -> u64 {
    if context_window == 0 || context_window >= SEED_WINDOW {
        seed
    } else {
        seed * context_window / SEED_WINDOW
    }
}

impl Default for TriggerPolicy {
    fn default() -> Self {
        TriggerPolicy::for_window(default_context_window())
    }
}

/// A policy setting that cannot work.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TriggerConfigError {
    #[error("trigger ratio must be in (0, 1], got {0}")]
    Ratio(f64),
    #[error(
        "output_reserve + safety_margin ({reserve}) leaves no room in a context window of {window}"
    )]
    NoRoom { reserve: u64, window: u64 },
}

/// The outcome of evaluating a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TriggerDecision {
    /// Compaction is due.
    pub due: bool,
    /// The size that was compared (estimate or reported total).
    pub current_tokens: u64,
    /// The threshold it was compared with; `None` for an unlimited model.
    pub threshold_tokens: Option<u64>,
}

impl TriggerPolicy {
    /// The seed's policy (threshold, ratio 0.7) for a model of
    /// `context_window` tokens, with the reserve and margin derived from it:
    /// what a configuration that sets only the window reads as.
    pub fn for_window(context_window: u64) -> TriggerPolicy {
        TriggerPolicy::Threshold {
            context_window,
            ratio: default_ratio_threshold(),
            output_reserve: derived_output_reserve(context_window),
            safety_margin: derived_safety_margin(context_window),
        }
    }

    /// Checks the settings; call once when configuration is loaded.
    pub fn validate(&self) -> Result<(), TriggerConfigError> {
        match *self {
            TriggerPolicy::Threshold {
                context_window,
                ratio,
                output_reserve,
                safety_margin,
            } => {
                check_ratio(ratio)?;
                let reserve = output_reserve.saturating_add(safety_margin);
                if context_window > 0 && reserve >= context_window {
                    return Err(TriggerConfigError::NoRoom {
                        reserve,
                        window: context_window,
                    });
                }
                Ok(())
            }
            TriggerPolicy::Overflow {
                context_window,
                input_limit,
                output_reserve,
            } => {
                if context_window > 0 && input_limit.is_none() && output_reserve >= context_window {
                    return Err(TriggerConfigError::NoRoom {
                        reserve: output_reserve,
                        window: context_window,
                    });
                }
                Ok(())
            }
            TriggerPolicy::Utilization { ratio, .. } => check_ratio(ratio),
        }
    }

    /// The model's context window this policy was configured for.
    pub fn context_window(&self) -> u64 {
        match *self {
            TriggerPolicy::Threshold { context_window, .. }
            | TriggerPolicy::Overflow { context_window, .. }
            | TriggerPolicy::Utilization { context_window, .. } => context_window,
        }
    }

    /// The token count at which compaction becomes due; `None` when the
    /// model is unlimited (`context_window = 0`).
    pub fn threshold(&self) -> Option<u64> {
        match *self {
            TriggerPolicy::Threshold {
                context_window,
                ratio,
                output_reserve,
                safety_margin,
            } => {
                if context_window == 0 {
                    return None;
                }
                let by_ratio = scale(context_window, ratio);
                let by_reserve = context_window
                    .saturating_sub(output_reserve)
                    .saturating_sub(safety_margin);
                Some(by_ratio.min(by_reserve))
            }
            TriggerPolicy::Overflow {
                context_window,
                input_limit,
                output_reserve,
            } => {
                if context_window == 0 {
                    return None;
                }
                Some(input_limit.unwrap_or(context_window.saturating_sub(output_reserve)))
            }
            TriggerPolicy::Utilization {
                context_window,
                ratio,
            } => (context_window > 0).then(|| scale(context_window, ratio)),
        }
    }

    /// Whether compaction is due for `measure`.
    ///
    /// The threshold policies compare with `>=` (compaction is due *at* the
    /// threshold); the overflow policy with `>`, as OpenCode defines it.
    pub fn evaluate(&self, measure: &Measure) -> TriggerDecision {
        let threshold = self.threshold();
        let (current, strict) = match self {
            TriggerPolicy::Overflow { .. } => (
                measure
                    .reported
                    .map_or(measure.estimated_tokens, |u| u.total()),
                true,
            ),
            _ => (measure.estimated_tokens, false),
        };
        let due = match threshold {
            None => false,
            Some(t) if strict => current > t,
            Some(t) => current >= t,
        };
        TriggerDecision {
            due,
            current_tokens: current,
            threshold_tokens: threshold,
        }
    }
}

fn check_ratio(ratio: f64) -> Result<(), TriggerConfigError> {
    if ratio.is_finite() && ratio > 0.0 && ratio <= 1.0 {
        Ok(())
    } else {
        Err(TriggerConfigError::Ratio(ratio))
    }
}

/// `floor(tokens × ratio)` without going through lossy paths for ratios
/// with up to four decimals (0.7, 0.9, 0.95…).
fn scale(tokens: u64, ratio: f64) -> u64 {
    let per_ten_thousand = (ratio.clamp(0.0, 1.0) * 10_000.0).round() as u64;
    ((u128::from(tokens) * u128::from(per_ten_thousand)) / 10_000) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_counts_are_whole_numbers_also_written_as_floats() {
        let read = |json: &str| serde_json::from_str::<Usage>(json);
        assert_eq!(
            read(r#"{"input_tokens": 3170.0, "output_tokens": 12}"#).unwrap(),
            Usage {
                input_tokens: 3170,
                cache_read_tokens: 0,
                output_tokens: 12,
            }
        );
        assert_eq!(
            read(r#"{"cache_read_tokens": 18446744073709551615}"#)
                .unwrap()
                .cache_read_tokens,
            u64::MAX
        );
        for bad in [
            r#"{"input_tokens": 1.5}"#,
            r#"{"input_tokens": -1}"#,
            r#"{"input_tokens": -1.0}"#,
            r#"{"input_tokens": 1e30}"#,
            r#"{"input_tokens": "12"}"#,
            r#"{"input_tokens": null}"#,
        ] {
            assert!(read(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn seed_threshold_is_140k_of_200k() {
        let p = TriggerPolicy::default();
        assert_eq!(p.threshold(), Some(140_000));
        assert!(!p.evaluate(&Measure::estimated(139_999)).due);
        assert!(p.evaluate(&Measure::estimated(140_000)).due);
    }

    #[test]
    fn seed_threshold_takes_the_reserve_bound_on_small_windows() {
        let p = TriggerPolicy::Threshold {
            context_window: 50_000,
            ratio: 0.7,
            output_reserve: 32_000,
            safety_margin: 8_000,
        };
        assert_eq!(p.threshold(), Some(10_000), "min(35k, 10k)");
    }

    #[test]
    fn overflow_uses_reported_usage_and_input_limit() {
        let p = TriggerPolicy::Overflow {
            context_window: 128_000,
            input_limit: None,
            output_reserve: 16_000,
        };
        assert_eq!(p.threshold(), Some(112_000));
        let usage = |i, c, o| Measure {
            estimated_tokens: 0,
            reported: Some(Usage {
                input_tokens: i,
                cache_read_tokens: c,
                output_tokens: o,
            }),
        };
        assert!(
            !p.evaluate(&usage(100_000, 10_000, 2_000)).due,
            "equal is not over"
        );
        assert!(p.evaluate(&usage(100_000, 10_000, 2_001)).due);
        assert!(
            p.evaluate(&Measure::estimated(112_001)).due,
            "falls back to the estimate without usage"
        );
        let with_limit = TriggerPolicy::Overflow {
            context_window: 400_000,
            input_limit: Some(272_000),
            output_reserve: 128_000,
        };
        assert_eq!(with_limit.threshold(), Some(272_000));
    }

    #[test]
    fn context_window_zero_never_triggers() {
        for p in [
            TriggerPolicy::Overflow {
                context_window: 0,
                input_limit: None,
                output_reserve: 0,
            },
            TriggerPolicy::Utilization {
                context_window: 0,
                ratio: 0.9,
            },
            TriggerPolicy::Threshold {
                context_window: 0,
                ratio: 0.7,
                output_reserve: 0,
                safety_margin: 0,
            },
        ] {
            let d = p.evaluate(&Measure::estimated(u64::MAX));
            assert!(!d.due);
            assert_eq!(d.threshold_tokens, None);
        }
    }

    #[test]
    fn utilization_is_ninety_percent_by_default() {
        let p: TriggerPolicy = serde_json::from_str(r#"{"policy":"utilization"}"#).unwrap();
        assert_eq!(p.threshold(), Some(180_000));
        let gpt35 = TriggerPolicy::Utilization {
            context_window: 16_000,
            ratio: 0.9,
        };
        assert_eq!(gpt35.threshold(), Some(14_400));
    }

    #[test]
    fn config_is_tagged_by_policy_and_validated() {
        let p: TriggerPolicy =
            serde_json::from_str(r#"{"policy":"threshold","context_window":100000}"#).unwrap();
        assert_eq!(
            p.threshold(),
            Some(68_750),
            "min(70,000, 100,000 - 25,000 - 6,250): reserve and margin derived"
        );
        assert!(serde_json::from_str::<TriggerPolicy>(r#"{"policy":"magic"}"#).is_err());
        let bad = TriggerPolicy::Utilization {
            context_window: 1000,
            ratio: 1.5,
        };
        assert_eq!(bad.validate(), Err(TriggerConfigError::Ratio(1.5)));
        let no_room = TriggerPolicy::Threshold {
            context_window: 30_000,
            ratio: 0.7,
            output_reserve: 32_000,
            safety_margin: 8_000,
        };
        assert!(matches!(
            no_room.validate(),
            Err(TriggerConfigError::NoRoom { .. })
        ));
        assert!(TriggerPolicy::default().validate().is_ok());
    }

    fn read(json: &str) -> TriggerPolicy {
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"))
    }

    #[test]
    fn an_unset_reserve_and_margin_derive_from_the_window() {
        for (window, reserve, margin, threshold) in [
            (8_000, 2_000, 500, 5_500),
            (32_000, 8_000, 2_000, 22_000),
            (128_000, 32_000, 8_000, 88_000),
            (200_000, 32_000, 8_000, 140_000),
            (1_000_000, 32_000, 8_000, 700_000),
        ] {
            let p = read(&format!(
                r#"{{"policy":"threshold","context_window":{window}}}"#
            ));
            assert_eq!(
                p,
                TriggerPolicy::Threshold {
                    context_window: window,
                    ratio: 0.7,
                    output_reserve: reserve,
                    safety_margin: margin,
                },
                "{window}"
            );
            assert_eq!(p, TriggerPolicy::for_window(window));
            assert_eq!(p.threshold(), Some(threshold), "{window}");
            p.validate().unwrap();
            let overflow = read(&format!(
                r#"{{"policy":"overflow","context_window":{window}}}"#
            ));
            assert_eq!(overflow.threshold(), Some(window - reserve), "{window}");
            overflow.validate().unwrap();
        }
        assert_eq!(
            TriggerPolicy::default(),
            read(r#"{"policy":"threshold"}"#),
            "the default window gets the seed's 32,000 and 8,000"
        );
        assert_eq!(
            (derived_output_reserve(0), derived_safety_margin(0)),
            (32_000, 8_000),
            "an unlimited model keeps the seed's"
        );
        assert_eq!(
            (derived_output_reserve(4_096), derived_safety_margin(4_096)),
            (1_024, 256)
        );
    }

    #[test]
    fn an_explicit_reserve_or_margin_is_kept_and_checked_as_before() {
        let p = read(
            r#"{"policy":"threshold","context_window":8000,"output_reserve":32000,"safety_margin":8000}"#,
        );
        assert_eq!(
            p.validate(),
            Err(TriggerConfigError::NoRoom {
                reserve: 40_000,
                window: 8_000
            })
        );
        // One set, the other derived; zero is a value, not "unset".
        let p = read(r#"{"policy":"threshold","context_window":8000,"safety_margin":0}"#);
        assert_eq!(
            p,
            TriggerPolicy::Threshold {
                context_window: 8_000,
                ratio: 0.7,
                output_reserve: 2_000,
                safety_margin: 0,
            }
        );
        let p = read(r#"{"policy":"overflow","context_window":8000,"output_reserve":8000}"#);
        assert!(matches!(
            p.validate(),
            Err(TriggerConfigError::NoRoom { .. })
        ));
    }

    #[test]
    fn a_derived_value_is_written_as_unset_and_an_explicit_one_as_set() {
        let written = serde_json::to_value(TriggerPolicy::default()).unwrap();
        assert_eq!(
            written,
            serde_json::json!({"policy": "threshold", "context_window": 200000, "ratio": 0.7})
        );
        let explicit = TriggerPolicy::Threshold {
            context_window: 8_000,
            ratio: 0.7,
            output_reserve: 1_000,
            safety_margin: 500,
        };
        let written = serde_json::to_value(explicit).unwrap();
        assert_eq!(written["output_reserve"], 1_000);
        assert!(
            written.get("safety_margin").is_none(),
            "500 is what 8,000 derives"
        );
        assert_eq!(read(&written.to_string()), explicit, "read back the same");
    }
}
