//! Parsing `sim:PROFILE[?key=value&...]` target parameters.

use ssdlab_core::units::{MONTH_S, parse_duration_ns};

use crate::ftl::GcPolicy;
use crate::profile::{Profile, profile, profiles};

/// A parsed `sim:` target.
#[derive(Debug, Clone, PartialEq)]
pub struct SimSpec {
    pub profile: Profile,
    /// Capacity divisor (`scale=1/64` gives 64).
    pub scale: u32,
    /// Over-provisioning override as a fraction (`op=25` gives 0.25).
    pub op: Option<f64>,
    pub seed: u64,
    pub policy: GcPolicy,
    /// Fill this fraction of the LBAs sequentially when the device is created (`fill=100%`).
    pub fill: f64,
    /// Then let the device sit idle this long (`age=7mo`).
    pub age_ns: u64,
    /// Firmware refresh: rewrite blocks older than this when idle (`refresh=3mo`).
    pub refresh_after_ns: Option<u64>,
}

/// Why a `sim:` target was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

const KEYS: &str =
    "op=PCT, scale=1/N, seed=N, gc=greedy|cost-benefit, fill=PCT%, age=DURATION, refresh=DURATION";

impl SimSpec {
    pub fn parse(spec: &str) -> Result<Self, SpecError> {
        let (name, query) = spec.split_once('?').unwrap_or((spec, ""));
        let profile = profile(name).ok_or_else(|| {
            let names: Vec<&str> = profiles().iter().map(|p| p.name).collect();
            SpecError(format!(
                "unknown profile '{name}': use one of {} (see ssdlab sim profiles)",
                names.join(", ")
            ))
        })?;
        let mut parsed = SimSpec {
            profile,
            scale: 1,
            op: None,
            seed: 1,
            policy: GcPolicy::Greedy,
            fill: 0.0,
            age_ns: 0,
            refresh_after_ns: None,
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| SpecError(format!("'{pair}' is not key=value; keys: {KEYS}")))?;
            let bad = |what: &str| SpecError(format!("{key}={value}: {what}"));
            match key {
                "op" => {
                    let pct: f64 = value
                        .trim_end_matches('%')
                        .parse()
                        .map_err(|_| bad("write a percentage, e.g. op=25"))?;
                    if !(pct > 0.0 && pct <= 400.0) {
                        return Err(bad("over-provisioning must be above 0 and at most 400 percent"));
                    }
                    parsed.op = Some(pct / 100.0);
                }
                "scale" => {
                    let n = value.strip_prefix("1/").unwrap_or(value);
                    parsed.scale = n
                        .parse()
                        .ok()
                        .filter(|&n| n >= 1)
                        .ok_or_else(|| bad("write scale=1/N, e.g. scale=1/64"))?;
                }
                "seed" => parsed.seed = value.parse().map_err(|_| bad("write a whole number"))?,
                "gc" => {
                    parsed.policy = match value {
                        "greedy" => GcPolicy::Greedy,
                        "cost-benefit" => GcPolicy::CostBenefit,
                        _ => return Err(bad("use greedy or cost-benefit")),
                    }
                }
                "fill" => {
                    let pct: f64 = value
                        .trim_end_matches('%')
                        .parse()
                        .map_err(|_| bad("write a percentage, e.g. fill=100%"))?;
                    if !(0.0..=100.0).contains(&pct) {
                        return Err(bad("between 0% and 100%"));
                    }
                    parsed.fill = pct / 100.0;
                }
                "age" => {
                    parsed.age_ns = parse_duration_ns(value).map_err(|e| bad(&e.to_string()))?;
                    if parsed.age_ns > crate::device::MAX_AGE_NS {
                        return Err(bad(
                            "at most 8 years (the virtual drive keeps page program times for nine), e.g. age=7mo",
                        ));
                    }
                }
                "refresh" => {
                    parsed.refresh_after_ns = Some(parse_duration_ns(value).map_err(|e| bad(&e.to_string()))?)
                }
                _ => return Err(SpecError(format!("unknown key '{key}'; keys: {KEYS}"))),
            }
        }
        Ok(parsed)
    }

    /// The data age in months that `age` gives.
    pub fn age_months(&self) -> f64 {
        self.age_ns as f64 / 1e9 / MONTH_S
    }
}

impl std::fmt::Display for SimSpec {
    /// The canonical `sim:` target: the profile, then each option that differs from its default, in the order op,
    /// scale, seed, gc, fill, age, refresh. It parses back to the same drive (percentages to a millionth).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut options = Vec::new();
        if let Some(op) = self.op {
            options.push(format!("op={}", decimal(op * 100.0)));
        }
        if self.scale != 1 {
            options.push(format!("scale=1/{}", self.scale));
        }
        if self.seed != 1 {
            options.push(format!("seed={}", self.seed));
        }
        if self.policy == GcPolicy::CostBenefit {
            options.push("gc=cost-benefit".into());
        }
        if self.fill > 0.0 {
            options.push(format!("fill={}%", decimal(self.fill * 100.0)));
        }
        if self.age_ns > 0 {
            options.push(format!("age={}ns", self.age_ns));
        }
        if let Some(ns) = self.refresh_after_ns {
            options.push(format!("refresh={ns}ns"));
        }
        write!(f, "sim:{}", self.profile.name)?;
        if !options.is_empty() {
            write!(f, "?{}", options.join("&"))?;
        }
        Ok(())
    }
}

/// A number with at most six decimals and no trailing zeros (`42.6`, `25`).
fn decimal(x: f64) -> String {
    let text = format!("{x:.6}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_canonical_text_parses_back_to_the_same_drive() {
        for text in [
            "840evo-250g",
            "840evo-250g?op=42.6&scale=1/64",
            "840evo-1t?scale=1/256&seed=9&gc=cost-benefit&fill=100%&age=7mo&refresh=3mo",
            "840evo-250g?fill=37.5%&op=7",
        ] {
            let spec = SimSpec::parse(text).unwrap();
            let shown = spec.to_string();
            let again = SimSpec::parse(shown.strip_prefix("sim:").unwrap()).unwrap();
            assert_eq!(again.to_string(), shown, "{text}");
            assert_eq!(
                (again.scale, again.seed, again.policy, again.age_ns),
                (spec.scale, spec.seed, spec.policy, spec.age_ns)
            );
            assert_eq!(again.refresh_after_ns, spec.refresh_after_ns);
            assert!(
                (again.fill - spec.fill).abs() < 1e-9
                    && again.op.zip(spec.op).is_none_or(|(a, b)| (a - b).abs() < 1e-9)
            );
        }
        assert_eq!(
            SimSpec::parse("840evo-250g?scale=64&op=42.6")
                .unwrap()
                .to_string(),
            "sim:840evo-250g?op=42.6&scale=1/64"
        );
    }

    #[test]
    fn parses_every_key() {
        let s = SimSpec::parse(
            "840evo-250g?op=25&scale=1/64&seed=7&gc=cost-benefit&fill=100%&age=7mo&refresh=3mo",
        )
        .unwrap();
        assert_eq!(s.profile.name, "840evo-250g");
        assert_eq!(
            (s.scale, s.op, s.seed, s.policy, s.fill),
            (64, Some(0.25), 7, GcPolicy::CostBenefit, 1.0)
        );
        assert!((s.age_months() - 7.0).abs() < 1e-9);
        assert!(s.refresh_after_ns.is_some());
        assert_eq!(SimSpec::parse("840evo-1t").unwrap().scale, 1);
    }

    #[test]
    fn errors_say_what_is_accepted() {
        assert!(SimSpec::parse("850pro").unwrap_err().0.contains("840evo-250g"));
        assert!(
            SimSpec::parse("840evo-250g?size=1")
                .unwrap_err()
                .0
                .contains("scale=1/N")
        );
        assert!(SimSpec::parse("840evo-250g?scale=0").is_err());
        assert!(
            SimSpec::parse("840evo-250g?age=9y")
                .unwrap_err()
                .0
                .contains("8 years")
        );
        assert!(
            SimSpec::parse("840evo-250g?age=8y")
                .unwrap_err()
                .0
                .contains("8 years")
        );
        assert!(SimSpec::parse("840evo-250g?age=7y").is_ok());
        assert!(SimSpec::parse("840evo-250g?op=-5").is_err());
        assert!(SimSpec::parse("840evo-250g?op").is_err());
    }
}
