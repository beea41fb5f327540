//! ssdlab-methods: the reviewers' methodologies as functions over any [`ssdlab_core::Device`].
//!
//! Each method runs phases through the engine's runner and returns phase results plus an analysis. Methods
//! never depend on `ssdlab-io` or `ssdlab-sim`: they run unchanged on a real drive, a file or the virtual SSD.
//! They never print; progress goes through the [`MethodObserver`] the caller provides.
#![forbid(unsafe_code)]

pub mod analysis;
pub mod consistency;
pub mod erase;
pub mod fanout;
pub mod latency;
pub mod method;
pub mod op;
pub mod pts;
pub mod quick;
pub mod replay;
pub mod session;
pub mod sweep;
pub mod trim;

pub use method::{Method, MethodContext, MethodPlan};
pub use session::{MethodError, MethodObserver, MethodOutcome, Session};
pub mod refresh;
pub mod scan;
