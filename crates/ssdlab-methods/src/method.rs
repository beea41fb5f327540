//! The test methods behind one trait, and the one plan type over them generated from the schema's list
//! ([`ssdlab_core::for_each_method!`]): a method is a unit type in its own module (`trim::Trim`, `quick::Quick`,
//! ...) implementing [`Method`],
//! and [`MethodPlan`] holds any one method's plan with its single dispatch (kind, recorded options, whether it
//! writes, whether it purges, run). A method added to the list does not compile here until it has its type.
//!
//! What this module must never do: know a method's options or logic (each method's module does), or open a
//! device (the caller hands the session its device).

use ssdlab_core::schema::{MethodKind, MethodOptions};

use crate::erase::Purger;
use crate::{MethodError, MethodOutcome, Session};

/// What a method is given besides its session and plan.
#[derive(Default)]
pub struct MethodContext<'p> {
    /// The drive's own purges (sanitize, secure erase) through the descriptor the safety gate judged, for a
    /// method that purges ([`Method::PURGES`]) on a whole block device; None elsewhere.
    pub purger: Option<&'p mut dyn Purger>,
}

/// One test method.
pub trait Method {
    /// Its options as `result.json` records them.
    type Options;
    /// What it runs from: its options, and whatever else it was given that the record does not hold (a replay's
    /// parsed trace).
    type Plan;
    /// Whether it purges the drive between tests (and so wants [`MethodContext::purger`]).
    const PURGES: bool = false;
    /// The options the plan records.
    fn recorded(plan: &Self::Plan) -> Self::Options;
    /// Whether the plan writes to the target (a plan of reads alone opens a real device read-only).
    fn writes(_plan: &Self::Plan) -> bool {
        true
    }
    /// Whether the test file a `file:` target laid out for this run is removed at its end (quick's, as the
    /// disk-mark tools remove theirs). The app removes it, proven by inode; a method never touches files.
    fn removes_test_file(_plan: &Self::Plan) -> bool {
        false
    }
    /// Runs the method on the session's device.
    fn run(
        session: Session<'_>,
        plan: Self::Plan,
        context: MethodContext<'_>,
    ) -> Result<MethodOutcome, MethodError>;
}

/// `impl Method for $method` for a method whose plan is its options (`Copy`), which writes, and which runs as
/// `$run(session, &options)`: most of them. `removes_test_file: F` says, from the options, whether the run's
/// test file goes at its end.
macro_rules! method_of_options {
    ($method:ident, $options:ty, $run:path $(, removes_test_file: $removes:expr)?) => {
        impl $crate::method::Method for $method {
            type Options = $options;
            type Plan = $options;

            fn recorded(plan: &Self::Plan) -> Self::Options {
                *plan
            }

            $(
                fn removes_test_file(plan: &Self::Plan) -> bool {
                    ($removes)(plan)
                }
            )?

            fn run(
                session: $crate::Session<'_>,
                plan: Self::Plan,
                _context: $crate::method::MethodContext<'_>,
            ) -> Result<$crate::MethodOutcome, $crate::MethodError> {
                $run(session, &plan)
            }
        }
    };
}
pub(crate) use method_of_options;

macro_rules! define_plan {
    ($( $variant:ident $module:ident $kind:literal $options:ty, $analysis:ty; )*) => {
        /// Any one method's plan: the one dispatch over the methods.
        pub enum MethodPlan {
            $( $variant(<crate::$module::$variant as Method>::Plan), )*
        }

        impl MethodPlan {
            pub fn kind(&self) -> MethodKind {
                match self {
                    $( MethodPlan::$variant(_) => MethodKind::$variant, )*
                }
            }

            /// The options as result.json records them.
            pub fn recorded(&self) -> MethodOptions {
                match self {
                    $( MethodPlan::$variant(p) => MethodOptions::$variant(<crate::$module::$variant as Method>::recorded(p)), )*
                }
            }

            /// Whether the plan writes to the target.
            pub fn writes(&self) -> bool {
                match self {
                    $( MethodPlan::$variant(p) => <crate::$module::$variant as Method>::writes(p), )*
                }
            }

            /// Whether the test file a `file:` target laid out for this run is removed at its end.
            pub fn removes_test_file(&self) -> bool {
                match self {
                    $( MethodPlan::$variant(p) => <crate::$module::$variant as Method>::removes_test_file(p), )*
                }
            }

            /// Whether the method purges the drive (and wants the drive's purges in its context).
            pub fn purges(&self) -> bool {
                match self {
                    $( MethodPlan::$variant(_) => <crate::$module::$variant as Method>::PURGES, )*
                }
            }

            /// Runs the method.
            pub fn run(
                self,
                session: Session<'_>,
                context: MethodContext<'_>,
            ) -> Result<MethodOutcome, MethodError> {
                match self {
                    $( MethodPlan::$variant(p) => <crate::$module::$variant as Method>::run(session, p, context), )*
                }
            }
        }
    };
}

ssdlab_core::for_each_method!(define_plan);
