//! Small statistics for benchmark samples, and the CPU time a thread has used.

/// A sequential transfer: its rate, and the CPU seconds the sending and the receiving side
/// spent on it (on a busy machine the CPU cost per byte is steadier than the rate).
#[derive(Clone, Copy)]
pub struct Transfer {
    pub mb_s: f64,
    pub sender_cpu: f64,
    pub receiver_cpu: f64,
}

/// The median rate of `runs`, and the median CPU seconds of each side.
pub fn median_transfer(runs: &[Transfer]) -> Transfer {
    let pick = |f: fn(&Transfer) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    Transfer {
        mb_s: pick(|t| t.mb_s),
        sender_cpu: pick(|t| t.sender_cpu),
        receiver_cpu: pick(|t| t.receiver_cpu),
    }
}

/// CPU seconds (user and system) the calling thread has used so far.
pub fn thread_cpu() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid rusage for the kernel to fill.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// The median of `samples` (the mean of the middle two for an even count).
pub fn median(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
