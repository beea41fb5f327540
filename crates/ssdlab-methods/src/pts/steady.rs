//! The PTS steady-state rule over rounds: a measurement window of five consecutive rounds whose tracking
//! values stay within 20% of their mean (max - min) and whose least-squares line moves by at most 10% of the
//! mean across the window; at most 25 rounds. Pure arithmetic on the tracking values.

use ssdlab_core::schema::pts::PtsSteadyState;
use ssdlab_core::stats::least_squares;

use crate::analysis::{SNIA_WINDOW_ROUNDS, snia_window, snia_window_passes};

/// Whether the last five of `tracking` form a steady-state window (the test stops after such a round).
pub fn last_window_passes(tracking: &[f64]) -> bool {
    tracking.len() >= SNIA_WINDOW_ROUNDS
        && snia_window_passes(&tracking[tracking.len() - SNIA_WINDOW_ROUNDS..])
}

/// The determination over a run's tracking values: the first passing window, or the last five rounds when none
/// passed.
pub fn determine(tracking: &[f64], max_rounds: u32) -> PtsSteadyState {
    let n = SNIA_WINDOW_ROUNDS;
    let first_passing = (n <= tracking.len())
        .then(|| (0..=tracking.len() - n).find(|&i| snia_window_passes(&tracking[i..i + n])))
        .flatten();
    let start = first_passing.or_else(|| tracking.len().checked_sub(n));
    let mut state = PtsSteadyState {
        achieved: first_passing.is_some(),
        window_first_round: None,
        window_last_round: None,
        window_mean: None,
        range_excursion: None,
        slope_excursion: None,
        slope_per_round: None,
        intercept: None,
        rounds_run: tracking.len() as u32,
        max_rounds,
    };
    if let Some(start) = start {
        let window = &tracking[start..start + n];
        let (range, slope, mean) = snia_window(window);
        let xs: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let line = least_squares(&xs, window);
        state.window_first_round = Some(start as u32 + 1);
        state.window_last_round = Some((start + n) as u32);
        state.window_mean = Some(mean);
        state.range_excursion = Some(range);
        state.slope_excursion = Some(slope);
        state.slope_per_round = line.as_ref().map(|l| l.slope);
        state.intercept = line.as_ref().map(|l| l.intercept);
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_cliff_then_steady_rounds_finds_the_first_window() {
        // Fresh-drive rounds, the cliff, then rounds within a few percent of each other.
        let tracking = [
            60000.0, 31000.0, 12000.0, 8200.0, 8000.0, 8100.0, 7900.0, 8050.0, 8000.0,
        ];
        let s = determine(&tracking, 25);
        assert!(s.achieved, "{s:?}");
        assert_eq!((s.window_first_round, s.window_last_round), (Some(4), Some(8)));
        assert!(s.range_excursion.unwrap() <= 0.2 && s.slope_excursion.unwrap() <= 0.1);
        assert!(
            !last_window_passes(&tracking[..7]),
            "rounds 3-7 still hold the cliff"
        );
        assert!(last_window_passes(&tracking[..8]));
    }

    #[test]
    fn the_range_and_slope_rules_each_reject() {
        // 25% apart: the range rule fails though the mean does not move.
        let noisy = [1000.0, 1250.0, 1000.0, 1250.0, 1000.0];
        let s = determine(&noisy, 25);
        assert!(!s.achieved && s.range_excursion.unwrap() > 0.2 && s.slope_excursion.unwrap() <= 0.1);
        // A steady 4% decline per round: range 16% passes, slope 16% over the window fails.
        let ramp: Vec<f64> = (0..5).map(|i| 1000.0 * (1.0 - 0.04 * i as f64)).collect();
        let s = determine(&ramp, 25);
        assert!(!s.achieved, "{s:?}");
        assert!(s.range_excursion.unwrap() <= 0.2 && s.slope_excursion.unwrap() > 0.1);
        assert!((s.slope_per_round.unwrap() + 40.0).abs() < 1e-9);
        assert!((s.intercept.unwrap() - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn a_window_exactly_at_the_limit_passes_at_every_scale() {
        // max - min is exactly 20% of the mean in both; in floating point the first comes out a few ulps above
        // 0.2 and the second exactly at it. The same window must get the same answer whatever its unit.
        let small = [0.9, 1.1, 1.0, 1.0, 1.0];
        let large = [900.0, 1100.0, 1000.0, 1000.0, 1000.0];
        let (a, b) = (determine(&small, 25), determine(&large, 25));
        assert!(a.achieved && b.achieved, "{a:?} {b:?}");
        assert!(last_window_passes(&small) && last_window_passes(&large));
        // Just past the limit still fails at both scales.
        assert!(!last_window_passes(&[0.9, 1.1001, 1.0, 1.0, 1.0]));
        assert!(!last_window_passes(&[900.0, 1100.1, 1000.0, 1000.0, 1000.0]));
    }

    #[test]
    fn the_round_limit_reports_the_last_window() {
        let never: Vec<f64> = (0..25).map(|i| if i % 2 == 0 { 100.0 } else { 200.0 }).collect();
        let s = determine(&never, 25);
        assert!(!s.achieved);
        assert_eq!((s.window_first_round, s.window_last_round), (Some(21), Some(25)));
        assert_eq!(s.rounds_run, 25);
        let short = determine(&[1.0, 1.0, 1.0], 25);
        assert!(!short.achieved && short.window_first_round.is_none() && short.window_mean.is_none());
    }
}
