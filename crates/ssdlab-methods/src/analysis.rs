//! Analysis of per-second series: plateau, write cliff, steady-state statistics, SNIA PTS steady state and the
//! field report's percentile columns. Pure functions; no I/O.

pub use ssdlab_core::schema::{Cliff, PercentileColumns, SniaSteadyState};
use ssdlab_core::stats::{least_squares, mean, std_dev};
pub use ssdlab_core::stats::{median, percentile};

/// The PTS window: 5 rounds, data excursion within 20% of the mean, slope excursion within 10%.
pub const SNIA_WINDOW_ROUNDS: usize = 5;
pub const SNIA_RANGE_LIMIT: f64 = 0.20;
pub const SNIA_SLOPE_LIMIT: f64 = 0.10;
/// How far past a limit an excursion may land and still pass: the excursions are ratios computed in floating
/// point, so a window exactly at a limit comes out a few ulps to either side depending on its scale ((0.9, 1.1, 1,
/// 1, 1) gives 0.20000000000000007, (900, 1100, 1000, 1000, 1000) gives 0.2). One part in a billion is far below
/// any measurement's resolution and makes both the same.
pub const SNIA_LIMIT_TOLERANCE: f64 = 1e-9;

/// A window's two PTS tests in words, the failing one first and each with the precision that shows which side of
/// its limit it is on: "slope 10.5% > 10%; range 10% <= 20%". A figure that fails is never printed equal to its
/// limit (10.0001% shows as 10.0001%).
pub fn snia_tests_in_words(range_excursion: f64, slope_excursion: f64) -> String {
    let range = against_limit("range", range_excursion, SNIA_RANGE_LIMIT);
    let slope = against_limit("slope", slope_excursion, SNIA_SLOPE_LIMIT);
    if slope.1 && !range.1 {
        format!("{}; {}", slope.0, range.0)
    } else {
        format!("{}; {}", range.0, slope.0)
    }
}

/// "slope 10.5% > 10%" and whether it fails.
fn against_limit(name: &str, ratio: f64, limit: f64) -> (String, bool) {
    let fails = ratio > limit + SNIA_LIMIT_TOLERANCE;
    let sign = if fails { ">" } else { "<=" };
    let shown = percent_beside(ratio, limit);
    (format!("{name} {shown} {sign} {:.0}%", 100.0 * limit), fails)
}

/// `ratio` as a percentage with the fewest decimals (up to six) at which it reads on its own side of `limit`: a
/// verdict that compares a figure with a limit never prints 9.7% as 10% beside a 10% limit, nor 89.6% as 90%
/// beside 90%. A figure within [`SNIA_LIMIT_TOLERANCE`] of its limit is the limit.
pub fn percent_beside(ratio: f64, limit: f64) -> String {
    let on_its_side = |text: &String| {
        let shown = text.trim_end_matches('%').parse::<f64>().unwrap_or(f64::NAN);
        if ratio > limit + SNIA_LIMIT_TOLERANCE {
            shown > 100.0 * limit
        } else if ratio < limit - SNIA_LIMIT_TOLERANCE {
            shown < 100.0 * limit
        } else {
            true
        }
    };
    (0..=6)
        .map(|digits| format!("{:.digits$}%", 100.0 * ratio))
        .find(on_its_side)
        .unwrap_or_else(|| format!("{}%", 100.0 * ratio))
}

/// (range excursion, slope excursion, mean) of a window of round values.
pub fn snia_window(values: &[f64]) -> (f64, f64, f64) {
    let m = mean(values);
    if m <= 0.0 {
        return (f64::INFINITY, f64::INFINITY, m);
    }
    let max = values.iter().copied().fold(f64::MIN, f64::max);
    let min = values.iter().copied().fold(f64::MAX, f64::min);
    let xs: Vec<f64> = (0..values.len()).map(|i| i as f64).collect();
    let slope = least_squares(&xs, values).map_or(0.0, |line| line.slope);
    ((max - min) / m, slope.abs() * (values.len() - 1) as f64 / m, m)
}

/// Whether a window meets both PTS criteria.
pub fn snia_window_passes(values: &[f64]) -> bool {
    let (range, slope, _) = snia_window(values);
    within_limits(range, slope)
}

/// Whether a window's excursions meet the PTS limits, with [`SNIA_LIMIT_TOLERANCE`].
pub fn within_limits(range_excursion: f64, slope_excursion: f64) -> bool {
    range_excursion <= SNIA_RANGE_LIMIT + SNIA_LIMIT_TOLERANCE
        && slope_excursion <= SNIA_SLOPE_LIMIT + SNIA_LIMIT_TOLERANCE
}

/// Averages a per-second series into rounds of `round_s` seconds (a trailing partial round is dropped) and
/// applies the PTS steady-state test.
pub fn snia_steady_state(per_second: &[f64], round_s: u32) -> SniaSteadyState {
    let rounds: Vec<f64> = per_second
        .chunks_exact(round_s.max(1) as usize)
        .map(mean)
        .collect();
    let window = SNIA_WINDOW_ROUNDS;
    let first_window_start_round = (window <= rounds.len())
        .then(|| (0..=rounds.len() - window).find(|&i| snia_window_passes(&rounds[i..i + window])))
        .flatten();
    let last = rounds
        .len()
        .checked_sub(window)
        .map(|start| snia_window(&rounds[start..]));
    let achieved = last.is_some_and(|(range, slope, _)| within_limits(range, slope));
    SniaSteadyState {
        round_s,
        rounds: rounds.len() as u32,
        achieved,
        first_window_start_round: first_window_start_round.map(|i| i as u32),
        window_mean: last.map(|(_, _, m)| m),
        range_excursion: last.map(|(range, _, _)| range),
        slope_excursion: last.map(|(_, slope, _)| slope),
    }
}

/// The first second below half the initial rate (the first sample) that also starts two 5-second windows whose
/// medians are below it, or None when there is no such drop (say so honestly: a drive with ample spare area, or
/// one whose first second is already past its cliff, shows none).
pub fn find_cliff(values: &[f64], bytes_per_second: &[u64]) -> Option<Cliff> {
    let initial = *values.first()?;
    if initial <= 0.0 || values.len() < 11 {
        return None;
    }
    let half = 0.5 * initial;
    let rolling = |i: usize| median(&values[i..(i + 5).min(values.len())]);
    (1..values.len() - 10)
        .find(|&i| values[i] < half && rolling(i) < half && rolling(i + 5) < half)
        .map(|i| Cliff {
            t_s: i as f64,
            bytes_written: bytes_per_second[..i].iter().sum(),
        })
}

/// The initial plateau: the mean rate before the cliff (the whole series when there is none).
pub fn plateau(values: &[f64], cliff: Option<&Cliff>) -> f64 {
    let end = cliff.map_or(values.len(), |c| (c.t_s as usize).max(1));
    mean(&values[..end.min(values.len())])
}

/// Mean and standard deviation of the last `window` values (all of them when shorter).
pub fn tail_stats(values: &[f64], window: usize) -> (f64, f64) {
    let tail = &values[values.len().saturating_sub(window)..];
    (mean(tail), std_dev(tail))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_failing_pts_figure_shows_that_it_fails() {
        use super::snia_tests_in_words as words;
        assert_eq!(words(0.10, 0.105), "slope 10.5% > 10%; range 10% <= 20%");
        assert_eq!(words(0.25, 0.05), "range 25% > 20%; slope 5% <= 10%");
        assert_eq!(words(0.304, 0.097), "range 30% > 20%; slope 9.7% <= 10%");
        assert_eq!(super::percent_beside(0.896, 0.9), "89.6%");
        assert_eq!(words(0.1, 0.100_000_4), "slope 10.00004% > 10%; range 10% <= 20%");
        // Within the floating-point tolerance a figure at its limit passes, and says so.
        assert_eq!(
            words(0.200_000_000_000_000_07, 0.1),
            "range 20% <= 20%; slope 10% <= 10%"
        );
    }

    use super::*;

    #[test]
    fn snia_flat_passes_ramp_fails_noise_fails() {
        let flat = vec![5000.0; 600];
        let s = snia_steady_state(&flat, 60);
        assert!(s.achieved && s.range_excursion == Some(0.0) && s.first_window_start_round == Some(0));

        // A ramp of 5% per round: each round's range is small but the slope is large.
        let ramp: Vec<f64> = (0..600)
            .map(|t| 1000.0 * (1.0 + 0.05 * (t / 60) as f64))
            .collect();
        let s = snia_steady_state(&ramp, 60);
        assert!(!s.achieved, "a ramp is not steady: {s:?}");
        assert!(
            s.slope_excursion.unwrap() > SNIA_SLOPE_LIMIT && s.range_excursion.unwrap() <= SNIA_RANGE_LIMIT,
            "{s:?}"
        );

        // Alternating rounds 30% apart: no trend, but the range fails.
        let noisy: Vec<f64> = (0..600)
            .map(|t| if (t / 60) % 2 == 0 { 1000.0 } else { 1300.0 })
            .collect();
        let s = snia_steady_state(&noisy, 60);
        assert!(
            !s.achieved && s.range_excursion.unwrap() > SNIA_RANGE_LIMIT,
            "{s:?}"
        );
        assert!(s.slope_excursion.unwrap() <= SNIA_SLOPE_LIMIT, "{s:?}");

        assert!(
            !snia_steady_state(&flat[..200], 60).achieved,
            "fewer than five rounds cannot be steady"
        );
    }

    #[test]
    fn cliff_is_found_on_a_plateau_then_drop() {
        let mut series = vec![60_000.0; 100];
        series.extend(vec![4_000.0; 300]);
        let bytes: Vec<u64> = series.iter().map(|&v| (v * 4096.0) as u64).collect();
        let cliff = find_cliff(&series, &bytes).expect("a cliff");
        assert_eq!(plateau(&series, Some(&cliff)), 60_000.0);
        assert_eq!(cliff.t_s, 100.0);
        assert_eq!(cliff.bytes_written, 100 * 60_000 * 4096);
        // A dip that recovers is not a cliff, and neither is a flat line.
        let mut dip = vec![60_000.0; 100];
        dip[50] = 1.0;
        assert!(find_cliff(&dip, &bytes[..100]).is_none());
        assert!(find_cliff(&[5000.0; 100], &bytes[..100]).is_none());
    }

    #[test]
    fn percentile_columns_on_known_data() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        let c = PercentileColumns::of(&values);
        assert_eq!(
            (c.p25, c.p50, c.p75, c.p95, c.mean),
            (25.0, 50.0, 75.0, 95.0, 50.5)
        );
        assert_eq!(tail_stats(&values, 10), (95.5, std_dev(&values[90..])));
    }
}
