//! Remaining life from a trend, with a band: a least-squares line through (time, wear) and the 95% confidence
//! interval of its slope (Student's t with n - 2 degrees of freedom). The fastest plausible wear rate gives the
//! low end of the band; when the interval includes zero wear there is no upper end.

use ssdlab_core::stats::least_squares;

/// A fitted wear rate and its 95% interval, in the series' units per day.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trend {
    pub per_day: f64,
    /// None with two points (no degrees of freedom left for the interval).
    pub per_day_low: Option<f64>,
    pub per_day_high: Option<f64>,
    pub points: usize,
}

/// The two-sided 95% quantile of Student's t with `dof` degrees of freedom.
pub fn t_975(dof: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042,
    ];
    match dof {
        0 => f64::INFINITY,
        1..=30 => TABLE[dof - 1],
        // Between table rows, the row below (fewer degrees of freedom): a slightly wider, safe band.
        31..=39 => 2.042,
        40..=59 => 2.021,
        60..=119 => 2.000,
        120..=999 => 1.980,
        _ => 1.960,
    }
}

/// Fits `values` against `days`. None when there are fewer than two distinct times.
pub fn trend(days: &[f64], values: &[f64]) -> Option<Trend> {
    let line = least_squares(days, values)?;
    let n = days.len();
    let (low, high) = if n >= 3 {
        let mean_x = days.iter().sum::<f64>() / n as f64;
        let sxx: f64 = days.iter().map(|x| (x - mean_x).powi(2)).sum();
        let ssr: f64 = days
            .iter()
            .zip(values)
            .map(|(x, y)| (y - (line.intercept + line.slope * x)).powi(2))
            .sum();
        let se = (ssr / (n - 2) as f64 / sxx).sqrt();
        let half = t_975(n - 2) * se;
        (Some(line.slope - half), Some(line.slope + half))
    } else {
        (None, None)
    };
    Some(Trend {
        per_day: line.slope,
        per_day_low: low,
        per_day_high: high,
        points: n,
    })
}

/// Days until a series at `current` reaches `limit` at the trend's rate, with the band. Rates at or below zero
/// give no end (None).
pub fn days_to(limit: f64, current: f64, trend: &Trend) -> (Option<f64>, Option<f64>, Option<f64>) {
    let left = (limit - current).max(0.0);
    let at = |rate: f64| (rate > 0.0).then(|| left / rate);
    (
        at(trend.per_day),
        trend.per_day_high.and_then(at),
        trend.per_day_low.and_then(at),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_perfect_line_has_a_zero_width_band() {
        // 1% a day from 10%: 90 days to 100%.
        let days = [0.0, 1.0, 2.0, 3.0];
        let wear = [10.0, 11.0, 12.0, 13.0];
        let t = trend(&days, &wear).unwrap();
        assert!((t.per_day - 1.0).abs() < 1e-12);
        assert!((t.per_day_low.unwrap() - 1.0).abs() < 1e-9);
        let (d, low, high) = days_to(100.0, 13.0, &t);
        assert!((d.unwrap() - 87.0).abs() < 1e-9);
        assert!((low.unwrap() - 87.0).abs() < 1e-6 && (high.unwrap() - 87.0).abs() < 1e-6);
    }

    #[test]
    fn the_band_matches_a_hand_computed_interval() {
        // x = 0,1,2,3,4; y = 0,2,1,3,4. Slope = sxy/sxx = 9/10 = 0.9; intercept 0.2; residuals
        // -0.2, 0.9, -1.0, 0.1, 0.2: SSR = 1.9; se = sqrt(1.9 / 3 / 10) = 0.25166; t(3) = 3.182;
        // interval 0.9 +- 0.80078.
        let t = trend(&[0.0, 1.0, 2.0, 3.0, 4.0], &[0.0, 2.0, 1.0, 3.0, 4.0]).unwrap();
        assert!((t.per_day - 0.9).abs() < 1e-12);
        assert!((t.per_day_low.unwrap() - 0.099_22).abs() < 1e-4, "{t:?}");
        assert!((t.per_day_high.unwrap() - 1.700_78).abs() < 1e-4, "{t:?}");
        // From 4 to 100: 106.7 days at 0.9/day, 56.4 at the fastest, 967.5 at the slowest.
        let (d, low, high) = days_to(100.0, 4.0, &t);
        assert!((d.unwrap() - 106.667).abs() < 1e-2);
        assert!((low.unwrap() - 56.444).abs() < 1e-2);
        assert!((high.unwrap() - 967.5).abs() < 1.0);
    }

    #[test]
    fn no_wear_no_end_and_two_points_no_band() {
        let flat = trend(&[0.0, 1.0, 2.0], &[5.0, 5.0, 5.0]).unwrap();
        assert_eq!(days_to(100.0, 5.0, &flat).0, None);
        let two = trend(&[0.0, 10.0], &[1.0, 2.0]).unwrap();
        assert_eq!((two.per_day_low, two.per_day_high), (None, None));
        assert!(trend(&[3.0], &[1.0]).is_none());
        // A noisy series whose interval includes zero has no upper end.
        let noisy = trend(&[0.0, 1.0, 2.0, 3.0], &[1.0, 3.0, 0.0, 2.0]).unwrap();
        let (_, _, high) = days_to(100.0, 2.0, &noisy);
        assert_eq!(high, None);
    }
}
