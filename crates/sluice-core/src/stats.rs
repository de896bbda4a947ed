//! Order statistics over sorted samples, as the reports compute them (numpy's defaults), for
//! the summary ([`crate::metrics`]) and for the controllers that estimate from a window of
//! samples (Vidaptive's alpha, A4).

/// Linear-interpolation percentile (numpy's default) of sorted values.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q / 100.0 * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Mean of the largest `share` of sorted values (at least one; NaN when empty).
pub fn tail_mean(sorted: &[f64], share: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let n = ((sorted.len() as f64 * share).ceil() as usize).clamp(1, sorted.len());
    sorted[sorted.len() - n..].iter().sum::<f64>() / n as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_matches_numpy_linear() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 50.0), 2.5);
        assert!((percentile(&v, 95.0) - 3.85).abs() < 1e-12);
        assert_eq!(percentile(&v, 100.0), 4.0);
        assert!(percentile(&[], 50.0).is_nan());
    }

    #[test]
    fn tail_mean_takes_at_least_one_value() {
        let v = [1.0, 2.0, 3.0, 10.0];
        assert_eq!(tail_mean(&v, 0.25), 10.0);
        assert_eq!(tail_mean(&v, 0.01), 10.0);
        assert_eq!(tail_mean(&v, 0.5), 6.5);
        assert!(tail_mean(&[], 0.1).is_nan());
    }
}
