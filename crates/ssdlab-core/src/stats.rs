//! Summary statistics over series: mean, standard deviation, nearest-rank percentiles, least-squares regression.
//!
//! Pure functions over slices; no I/O.

/// The arithmetic mean (0 for an empty series).
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// The population standard deviation (0 for fewer than two values).
pub fn std_dev(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let m = mean(values);
    (values.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / values.len() as f64).sqrt()
}

/// The sample standard deviation, divided by n - 1 (0 for fewer than two values): the spread of repeats taken
/// as a sample of what the next run would give, as hyperfine and every statistics text give it.
pub fn sample_std_dev(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let m = mean(values);
    (values.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (values.len() - 1) as f64).sqrt()
}

/// The nearest-rank percentile of a series (0 for an empty one).
pub fn percentile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((q / 100.0 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The median (nearest rank, of a copy).
pub fn median(values: &[f64]) -> f64 {
    percentile(values, 50.0)
}

/// A least-squares line `y = intercept + slope * x`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Line {
    pub slope: f64,
    pub intercept: f64,
}

/// The least-squares fit of `ys` against `xs` (None when the x values do not vary).
pub fn least_squares(xs: &[f64], ys: &[f64]) -> Option<Line> {
    assert_eq!(xs.len(), ys.len(), "least_squares needs paired series");
    let (mx, my) = (mean(xs), mean(ys));
    let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let slope = sxy / sxx;
    Some(Line {
        slope,
        intercept: my - slope * mx,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_of_known_data() {
        assert_eq!(mean(&[1.0, 2.0, 3.0, 4.0]), 2.5);
        assert!((std_dev(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]) - 2.0).abs() < 1e-12);
        assert_eq!(std_dev(&[3.0]), 0.0);
        // The same eight values as a sample: sqrt(32 / 7).
        assert!(
            (sample_std_dev(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]) - (32.0f64 / 7.0).sqrt()).abs()
                < 1e-12
        );
        assert_eq!(sample_std_dev(&[3.0]), 0.0);
    }

    #[test]
    fn regression_recovers_a_line() {
        let xs: Vec<f64> = (0..10).map(f64::from).collect();
        let ys: Vec<f64> = xs.iter().map(|x| 3.0 - 0.5 * x).collect();
        let line = least_squares(&xs, &ys).unwrap();
        assert!((line.slope + 0.5).abs() < 1e-12 && (line.intercept - 3.0).abs() < 1e-12);
        assert!(least_squares(&[1.0, 1.0], &[2.0, 3.0]).is_none());
    }
}
