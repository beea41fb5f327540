//! The one list of test methods (the `test` command's methodologies and `quick`): each method's variant name, the
//! kind `result.json` names it by, its options type and its analysis type. Every enum over the methods and every
//! dispatch on them is generated from [`for_each_method!`], here and in the crates above (the runs in
//! ssdlab-methods, the views in ssdlab-report), so a method added to the list is a compile error everywhere it
//! is not yet handled, never a silent `_ =>`.
//!
//! This module owns the list and the types generated in the schema: [`MethodKind`], [`MethodOptions`] (tagged by
//! kind, so a saved file reads back as the method it names whatever fields the options share) and the method
//! variants of [`crate::schema::Analysis`]. It must never hold a method's logic or its rendering.

use serde::{Deserialize, Serialize};

/// Calls `$callback!` with the list of test methods, one entry each:
/// `Variant module "kind" OptionsType, AnalysisType;`. The crates that implement a method find it by these
/// names: the type `Variant` in their module `module` (`ssdlab_methods::trim::Trim`, the report's
/// `trim::Trim`), so a method is added by one line here and one module in each of them.
#[macro_export]
macro_rules! for_each_method {
    ($callback:ident) => {
        $callback! {
            Consistency consistency "consistency"
                $crate::schema::options::ConsistencyOptions, $crate::schema::ConsistencyAnalysis;
            Trim trim "trim" $crate::schema::options::TrimOptions, $crate::schema::TrimAnalysis;
            Sweep sweep "sweep" $crate::schema::options::SweepOptions, $crate::schema::SweepAnalysis;
            Latency latency "latency"
                $crate::schema::options::LatencyOptions, $crate::schema::LatencyAnalysis;
            Pts pts "pts" $crate::schema::pts::PtsOptions, $crate::schema::pts::PtsAnalysis;
            Quick quick "quick" $crate::schema::quick::QuickOptions, $crate::schema::quick::QuickAnalysis;
            Replay replay "replay"
                $crate::schema::replay::ReplayOptions, $crate::schema::replay::ReplayAnalysis;
        }
    };
}

macro_rules! define_method_types {
    ($( $variant:ident $module:ident $kind:literal $options:ty, $analysis:ty; )*) => {
        /// Which test method: the kind a result of it carries.
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
        )]
        pub enum MethodKind {
            $( #[serde(rename = $kind)] $variant, )*
        }

        impl MethodKind {
            /// Every method, in the list's order.
            pub const ALL: &'static [MethodKind] = &[$( MethodKind::$variant, )*];

            /// The kind as `result.json` and the command line name it.
            pub fn name(self) -> &'static str {
                match self {
                    $( MethodKind::$variant => $kind, )*
                }
            }

            /// The method a result's kind names, if it is a method's.
            pub fn from_name(name: &str) -> Option<MethodKind> {
                match name {
                    $( $kind => Some(MethodKind::$variant), )*
                    _ => None,
                }
            }
        }

        /// A method's options, as `result.json`'s `options.method` holds them: `{"kind": K, "options": {...}}`.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(tag = "kind", content = "options")]
        pub enum MethodOptions {
            $( #[serde(rename = $kind)] $variant($options), )*
        }

        impl MethodOptions {
            pub fn kind(&self) -> MethodKind {
                match self {
                    $( MethodOptions::$variant(_) => MethodKind::$variant, )*
                }
            }
        }
    };
}

for_each_method!(define_method_types);

impl std::fmt::Display for MethodKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::options::{LatencyOptions, LatencyRw};
    use crate::schema::quick::QuickOptions;

    /// Quick's fields were latency's plus `repeats`: untagged, the order of the variants decided which one a
    /// saved file read back as. Tagged, each reads back as itself whatever fields they share.
    #[test]
    fn options_read_back_as_the_method_they_name() {
        let quick = MethodOptions::Quick(QuickOptions::default());
        let latency = MethodOptions::Latency(LatencyOptions {
            rw: LatencyRw::RandRead,
            ..LatencyOptions::default()
        });
        for options in [quick, latency] {
            let text = serde_json::to_string(&options).unwrap();
            assert!(
                text.starts_with(&format!("{{\"kind\":\"{}\"", options.kind())),
                "{text}"
            );
            let back: MethodOptions = serde_json::from_str(&text).unwrap();
            assert_eq!(back, options);
        }
    }

    #[test]
    fn every_kind_has_one_name_that_reads_back() {
        for kind in MethodKind::ALL {
            assert_eq!(MethodKind::from_name(kind.name()), Some(*kind));
            let json = serde_json::to_string(kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.name()));
        }
        assert_eq!(MethodKind::from_name("scan"), None);
    }
}
