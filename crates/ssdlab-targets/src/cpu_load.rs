//! How busy the host's CPUs are, from /proc/stat: the cache's load probe on real devices (RAPID passed I/O
//! through when the CPU was busy). It reads one line per call and keeps the previous counters; it never
//! blocks or spawns anything.

use ssdlab_cache::device::LoadProbe;

/// The busy and total jiffies of all CPUs together (`cpu` line: user nice system idle iowait irq softirq steal).
fn read_cpu_times() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|f| f.parse().ok())
        .collect();
    if fields.len() < 5 {
        return None;
    }
    let total: u64 = fields.iter().sum();
    // Idle and waiting for I/O are the CPU being free.
    let free = fields[3] + fields[4];
    Some((total - free, total))
}

/// A probe that answers the busy fraction of all CPUs since its previous call (`None` on the first call, or
/// when /proc/stat cannot be read or no time has passed).
pub fn probe() -> LoadProbe {
    let mut last = read_cpu_times();
    Box::new(move || {
        let now = read_cpu_times()?;
        let before = last.replace(now)?;
        let total = now.1.checked_sub(before.1).filter(|&t| t > 0)?;
        let busy = now.0.saturating_sub(before.0);
        Some(busy as f64 / total as f64)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_probe_reads_a_fraction_of_the_cpus() {
        let mut probe = super::probe();
        // Keep one CPU busy for a while so the counters move.
        let until = std::time::Instant::now() + std::time::Duration::from_millis(60);
        let mut x = 0u64;
        while std::time::Instant::now() < until {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let busy = probe().expect("/proc/stat is readable and time passed");
        assert!((0.0..=1.0).contains(&busy), "{busy}");
    }
}
