//! The RAPID-style cache on a real trace, in-process: the MSR Cambridge "web" rows as a fio iolog (copied with
//! their sources into ssdlab-trace's fixtures), whose 4 KiB writes sit at any 512-byte sector. Before the cache
//! held sectors, every such write went around it and the cached drive replayed the trace as the drive alone did
//! (write median 131 µs on both); the seed's gain must hold on real traces as on the synthetic ones.

mod common;

use std::path::Path;

use common::{event, replay_defaults, test_command};
use ssdlab_app::methodology::MethodPlan;
use ssdlab_app::methodology::options;

fn trace() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../ssdlab-trace/tests/fixtures/derived_msr_web_all_v3.iolog"
    ))
}

/// (write median ns, average data rate bytes/s, the cache's counters, what the command said) of the trace
/// replayed on `target`.
fn replay(target: &str) -> (f64, f64, serde_json::Value, String) {
    let flags = replay_defaults(trace());
    let ran = test_command(target, MethodPlan::Replay(options::replay(flags).unwrap()), None);
    let events = ran.events();
    let analysis = &event(&events, "analysis")["data"];
    let write_p50 = analysis["write_latency_ns"]["p50"]
        .as_f64()
        .unwrap_or_else(|| panic!("{analysis}"));
    let rate = analysis["average_data_rate_bytes_per_s"].as_f64().unwrap();
    let cache = events
        .iter()
        .filter(|e| e["type"] == "summary")
        .find_map(|e| e["data"]["summary"].get("cache").cloned())
        .unwrap_or_default();
    (write_p50, rate, cache, ran.text())
}

#[test]
fn the_cache_absorbs_a_real_traces_sector_aligned_writes() {
    let (plain_p50, plain_rate, _, _) = replay("sim:840evo-250g");
    let (cached_p50, cached_rate, cache, said) = replay("cached:sim:840evo-250g?size=1g");
    assert!(
        cached_p50 * 5.0 < plain_p50,
        "write median: cached {cached_p50} ns, plain {plain_p50} ns"
    );
    assert!(
        cached_rate > 1.2 * plain_rate,
        "data rate: cached {cached_rate}, plain {plain_rate}"
    );
    // Nearly every write was absorbed. The few that went around would have left a gap in what a frame holds
    // (sectors 0-2 held, 5-7 written), and the record says so: every write around has its reason.
    let (absorbed, around) = (
        cache["writes_absorbed"].as_u64().unwrap(),
        cache["writes_around"].as_u64().unwrap(),
    );
    assert!(absorbed > 2800 && around < absorbed / 50, "{cache}");
    assert_eq!(cache["writes_around_partial"], around, "{cache}");
    // The replay's own output says it, with the reason.
    assert!(
        said.contains(&format!(
            "around {around} ({around} covering part of a block the cache could not merge)"
        )),
        "{said}"
    );
}
