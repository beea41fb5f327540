//! End-to-end tests of the `ssdlab` binary against null, regular files and real loop devices, one module (room)
//! per subject, in one test binary.
//!
//! Loop-device tests need root (CI runs as root). Every loop device, mount and image is released by a guard's
//! `Drop`, so a failing assertion still detaches it.

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

mod bounds;
mod cache;
mod common;
mod crash_oracle;
mod engine;
mod erase;
mod fanout;
mod fleet;
mod gate;
mod habits;
mod health;
mod in_use;
mod input;
mod methods;
mod nbd;
mod nbd_conformance;
mod nbd_hostile;
mod nbd_page_cache;
mod op;
mod pts;
mod refresh;
mod replay;
mod report;
mod safety;
mod scan;
mod sim;

// Every room sees the shared helpers and the helpers of the other rooms.
pub(crate) use common::*;
#[allow(unused_imports)]
pub(crate) use gate::{Stacked, image_sum};
#[allow(unused_imports)]
pub(crate) use health::*;
#[allow(unused_imports)]
pub(crate) use input::*;
#[allow(unused_imports)]
pub(crate) use methods::*;
#[allow(unused_imports)]
pub(crate) use refresh::*;
#[allow(unused_imports)]
pub(crate) use report::*;
#[allow(unused_imports)]
pub(crate) use safety::*;
#[allow(unused_imports)]
pub(crate) use scan::*;

pub(crate) use std::os::unix::fs::{FileExt, MetadataExt};
pub(crate) use std::path::{Path, PathBuf};
pub(crate) use std::process::{Command, Output, Stdio};

pub(crate) use serde_json::Value;
