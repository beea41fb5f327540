//! Everything `health` concludes about one drive, from its snapshot, its history and its rating.

use ssdlab_core::schema::health::{DriveHealth, EnduranceRating, HealthSnapshot, LifeEstimate, Protocol};

use crate::history::{self, DAY_S};
use crate::life::{days_to, trend};
use crate::verdict::{WEAR_WARN_PERCENT, verdict};

/// The drive's health, warning from the default wear threshold ([`WEAR_WARN_PERCENT`]).
pub fn assess(
    snapshot: &HealthSnapshot,
    earlier: Vec<HealthSnapshot>,
    window_s: Option<u64>,
    rating: Option<EnduranceRating>,
) -> DriveHealth {
    assess_warned(snapshot, earlier, window_s, rating, WEAR_WARN_PERCENT)
}

/// The drive's health: `earlier` holds its earlier snapshots (any order; `snapshot` may be among them); a figure
/// of rated wear at or past `wear_warn_percent` warns.
pub fn assess_warned(
    snapshot: &HealthSnapshot,
    earlier: Vec<HealthSnapshot>,
    window_s: Option<u64>,
    rating: Option<EnduranceRating>,
    wear_warn_percent: f64,
) -> DriveHealth {
    let all = history::merged(earlier, snapshot);
    let window = history::window(&all, window_s);
    let rates = history::rates(window);
    let life = life(snapshot, window, rating.as_ref());
    let lifetime_write_amplification_ratio = match (snapshot.host_written_bytes, snapshot.nand_written_bytes)
    {
        (Some(h), Some(n)) if h > 0 => Some(n as f64 / h as f64),
        _ => None,
    };
    DriveHealth {
        verdict: verdict(snapshot, &life, rating.as_ref(), wear_warn_percent),
        snapshot: snapshot.clone(),
        lifetime_write_amplification_ratio,
        rated_life: crate::rated::rated_life(snapshot, rating.as_ref()),
        rating,
        rates,
        life,
        history: history::points(&all),
    }
}

/// Wear in percent of rated life: the drive's own figure, or mean erase count over rated P/E (finer, where the
/// drive counts erases).
fn wear_of(s: &HealthSnapshot, rated_pe: Option<u32>) -> Option<f64> {
    match (s.erase_count_mean, rated_pe) {
        (Some(erases), Some(pe)) if pe > 0 => Some(erases / f64::from(pe) * 100.0),
        _ => s.wear_used_percent,
    }
}

/// The remaining life: from the wear trend over the window if it gives one, else from host writes against the
/// TBW rating, else none, with what more it needs.
fn life(
    current: &HealthSnapshot,
    window: &[HealthSnapshot],
    rating: Option<&EnduranceRating>,
) -> LifeEstimate {
    let pe = rating.and_then(|r| r.pe_cycles);
    let wear_basis = wear_basis(current, pe);
    // The wear trend first: it is what the drive itself says about its NAND.
    let needs = match life_from_wear(current, window, pe, &wear_basis) {
        Ok(estimate) => return estimate,
        Err(needs) => needs,
    };
    // Then host writes against the TBW rating.
    if let Some(estimate) = life_from_host_writes(current, window, rating) {
        return estimate;
    }
    let needs = needs.unwrap_or_else(|| needs_without_trend(current, pe));
    LifeEstimate {
        basis: wear_basis,
        remaining_days: None,
        remaining_days_low: None,
        remaining_days_high: None,
        needs: Some(needs),
    }
}

/// What the wear figures are: mean erase count over rated P/E cycles, the drive's own wear used, or none.
fn wear_basis(current: &HealthSnapshot, pe: Option<u32>) -> String {
    if pe.is_some() && current.erase_count_mean.is_some() {
        format!("mean erase count over {} rated P/E cycles", pe.unwrap_or(0))
    } else if current.wear_source.is_empty() {
        "no wear figure: the drive reports neither wear used nor an erase count".to_string()
    } else {
        format!("wear used ({})", current.wear_source)
    }
}

/// A figure over the window's snapshots that have it, as (days since the first snapshot, value).
fn window_series(
    window: &[HealthSnapshot],
    f: &dyn Fn(&HealthSnapshot) -> Option<f64>,
) -> (Vec<f64>, Vec<f64>) {
    let t0 = window.first().map_or(0, |s| s.taken_at_s);
    window
        .iter()
        .filter_map(|s| f(s).map(|v| ((s.taken_at_s - t0) as f64 / DAY_S, v)))
        .unzip()
}

/// The life the wear trend gives (to 100% wear), or, as the error, what more history it needs (None when it
/// says nothing, as with a single snapshot).
fn life_from_wear(
    current: &HealthSnapshot,
    window: &[HealthSnapshot],
    pe: Option<u32>,
    wear_basis: &str,
) -> Result<LifeEstimate, Option<String>> {
    let t0 = window.first().map_or(0, |s| s.taken_at_s);
    let span_days = window.last().map_or(0.0, |l| (l.taken_at_s - t0) as f64 / DAY_S);
    let (days, wear) = window_series(window, &|s| wear_of(s, pe));
    // Wear is reported in steps (whole percent, whole erase cycles): a trend through a single step is the
    // rounding, not a rate, so at least two steps must have passed.
    let steps = wear.windows(2).filter(|w| w[0] != w[1]).count();
    if steps < 2 && wear.len() >= 2 {
        return Err(Some(format!(
            "more history: wear has moved {steps} step(s) over {span_days:.1} days and a trend needs two"
        )));
    }
    let (Some(now), Some(t)) = (wear_of(current, pe), trend(&days, &wear)) else {
        return Err(None);
    };
    let (d, low, high) = days_to(100.0, now, &t);
    if d.is_some() {
        return Ok(LifeEstimate {
            basis: format!(
                "{wear_basis}: {:.4}% a day over {} snapshots",
                t.per_day, t.points
            ),
            remaining_days: d,
            remaining_days_low: low,
            remaining_days_high: high,
            needs: (t.points < 3).then(|| "a third snapshot, for the band".to_string()),
        });
    }
    Err(Some(format!(
        "more history: wear has not risen over {span_days:.1} days (drives report it in whole steps)"
    )))
}

/// The life host writes give against the rating's TBW, when there is a rating and a trend that reaches it.
fn life_from_host_writes(
    current: &HealthSnapshot,
    window: &[HealthSnapshot],
    rating: Option<&EnduranceRating>,
) -> Option<LifeEstimate> {
    let (Some(tbw), Some(now)) = (rating.and_then(|r| r.tbw_bytes), current.host_written_bytes) else {
        return None;
    };
    let (days, host) = window_series(window, &|s| s.host_written_bytes.map(|b| b as f64));
    let t = trend(&days, &host)?;
    let (Some(days_left), low, high) = days_to(tbw as f64, now as f64, &t) else {
        return None;
    };
    Some(LifeEstimate {
        basis: format!(
            "host writes against the {:.0} TBW rating: {:.1} GB a day over {} snapshots",
            tbw as f64 / 1e12,
            t.per_day / 1e9,
            t.points
        ),
        remaining_days: Some(days_left),
        remaining_days_low: low,
        remaining_days_high: high,
        needs: (t.points < 3).then(|| "a third snapshot, for the band".to_string()),
    })
}

/// What a drive without a trend needs for one: a later snapshot (none can come for a virtual drive), with its
/// lifetime average wear rate for scale where it has one.
fn needs_without_trend(current: &HealthSnapshot, pe: Option<u32>) -> String {
    if current.identity.protocol == Protocol::Virtual {
        return "a wear trend over time, which a virtual drive (one run, no history) does not have: \
                its WAF and P/E used are the run's"
            .to_string();
    }
    let mut text = "a second snapshot at least a day later (run ssdlab health daily: \
                    dist/systemd has a timer), and a third for the band"
        .to_string();
    if let (Some(used), Some(hours)) = (wear_of(current, pe), current.power_on_hours)
        && used > 0.0
        && hours > 0
    {
        let days = hours as f64 / 24.0;
        let left = (100.0 - used).max(0.0) / (used / days);
        text.push_str(&format!(
            ". For scale only: at its lifetime average ({used:.1}% in {days:.0} power-on days) about \
             {:.1} power-on years remain; one ratio is not an estimate",
            left / 365.25
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::virtual_drive::{VirtualDrive, snapshot};
    use ssdlab_core::schema::DeviceCounters;
    use ssdlab_core::schema::health::HealthLevel;

    /// A drive that looks like a real one (the virtual snapshot's shape, another protocol).
    fn day(d: u64, erases: f64, host: u64) -> HealthSnapshot {
        let mut s = virtual_day(d, erases, host);
        s.identity.protocol = Protocol::Ata;
        s
    }

    fn virtual_day(d: u64, erases: f64, host: u64) -> HealthSnapshot {
        snapshot(
            &VirtualDrive {
                target: "sim:x".into(),
                model: "m".into(),
                capacity_bytes: 1 << 30,
                counters: DeviceCounters {
                    host_bytes_written: host,
                    nand_bytes_written: host * 2,
                    erase_count_mean: erases,
                    ..DeviceCounters::default()
                },
                host_read_bytes: None,
                rated_pe_cycles: 1000,
                powered_s: d as f64 * 86_400.0,
                origin: None,
            },
            d * 86_400,
        )
    }

    fn pe_rating() -> Option<EnduranceRating> {
        Some(EnduranceRating {
            tbw_bytes: None,
            warranty_years: None,
            dwpd: None,
            pe_cycles: Some(1000),
            source: "test".into(),
        })
    }

    #[test]
    fn one_snapshot_says_what_it_needs() {
        let s = day(100, 100.0, 1 << 40);
        let h = assess(&s, vec![], None, pe_rating());
        assert_eq!(h.life.remaining_days, None);
        let needs = h.life.needs.unwrap();
        assert!(needs.contains("a second snapshot"), "{needs}");
        // 10% in 100 days: 900 more days = 2.46 years, given as scale only.
        assert!(needs.contains("2.5 power-on years"), "{needs}");
        assert_eq!(h.lifetime_write_amplification_ratio, Some(2.0));
        assert_eq!(h.verdict.level, HealthLevel::Ok);
        // A virtual drive is not told to come back tomorrow.
        let v = assess(&virtual_day(100, 100.0, 1 << 40), vec![], None, pe_rating());
        assert!(v.life.needs.unwrap().contains("virtual drive"));
    }

    #[test]
    fn a_steady_wear_rate_gives_the_remaining_days() {
        // 1 erase cycle a day = 0.1% a day; at 50% used, 500 days remain.
        let history: Vec<_> = (0..10).map(|d| day(d, 491.0 + d as f64, d << 30)).collect();
        let h = assess(history.last().unwrap(), history.clone(), None, pe_rating());
        assert!(
            (h.life.remaining_days.unwrap() - 500.0).abs() < 1e-6,
            "{:?}",
            h.life
        );
        assert!((h.life.remaining_days_low.unwrap() - 500.0).abs() < 1e-3);
        assert_eq!(h.life.needs, None);
        assert_eq!(h.history.len(), 10);
        // A window of 3 days keeps the last four snapshots.
        let last = history.last().unwrap().clone();
        let w = assess(&last, history, Some(3 * 86_400), pe_rating());
        assert_eq!(w.rates.unwrap().snapshots, 4);
    }

    #[test]
    fn a_single_step_of_wear_is_rounding_not_a_rate() {
        // Whole-percent wear 10, 10, 10, 11 over three days: no estimate and no warning.
        let history: Vec<_> = [10.0, 10.0, 10.0, 11.0]
            .iter()
            .enumerate()
            .map(|(d, w)| {
                let mut s = day(d as u64, 0.0, (d as u64) << 30);
                s.erase_count_mean = None;
                s.wear_used_percent = Some(*w);
                s
            })
            .collect();
        let h = assess(history.last().unwrap(), history.clone(), None, None);
        assert_eq!(h.life.remaining_days, None);
        assert!(h.life.needs.unwrap().contains("moved 1 step(s)"));
        assert_eq!(h.verdict.level, HealthLevel::Ok);
    }

    #[test]
    fn a_short_life_warns() {
        // 5 erase cycles a day from 900: 20 days left.
        let history: Vec<_> = (0..4).map(|d| day(d, 885.0 + 5.0 * d as f64, d << 30)).collect();
        let h = assess(history.last().unwrap(), history.clone(), None, pe_rating());
        assert!((h.life.remaining_days.unwrap() - 20.0).abs() < 1e-6);
        assert_eq!(h.verdict.level, HealthLevel::Warn);
        assert!(
            h.verdict.reasons.iter().any(|r| r.contains("remaining life")),
            "{:?}",
            h.verdict
        );
    }
}
