//! How much of its rated endurance a drive has used, by each figure that can say: the drive's own wear
//! indicator, host writes against the TBW rating, and mean erase count against the NAND's rated P/E cycles. The
//! verdict warns on each figure past the wear threshold; the drive's rated life is the figure that shows the most
//! used, so an operator reads one "remaining" and the figure it rests on.

use ssdlab_core::schema::health::{EnduranceRating, HealthSnapshot, RatedLife};

/// One figure of rated endurance used.
#[derive(Debug, Clone, PartialEq)]
pub struct Used {
    pub percent: f64,
    /// What it is, in words: "attribute 233 Media_Wearout_Indicator (100 - normalized value)", "33.17 TB written
    /// of its rated 40 TBW".
    pub basis: String,
    pub kind: UsedKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsedKind {
    /// The drive's own wear indicator.
    Indicator,
    /// Host writes against the TBW rating.
    Tbw,
    /// Mean erase count against the rated P/E cycles.
    EraseCycles,
}

/// Every figure of rated endurance used that the snapshot and the rating give, in that order.
pub fn used(snapshot: &HealthSnapshot, rating: Option<&EnduranceRating>) -> Vec<Used> {
    let mut figures = vec![];
    if let Some(percent) = snapshot.wear_used_percent {
        figures.push(Used {
            percent,
            basis: snapshot.wear_source.clone(),
            kind: UsedKind::Indicator,
        });
    }
    if let (Some(written), Some(tbw)) = (
        snapshot.host_written_bytes,
        rating.and_then(|r| r.tbw_bytes).filter(|&t| t > 0),
    ) {
        figures.push(Used {
            percent: written as f64 / tbw as f64 * 100.0,
            basis: format!(
                "{:.2} TB written of its rated {:.0} TBW",
                written as f64 / 1e12,
                tbw as f64 / 1e12
            ),
            kind: UsedKind::Tbw,
        });
    }
    if let (Some(erases), Some(pe)) = (
        snapshot.erase_count_mean,
        rating.and_then(|r| r.pe_cycles).filter(|&p| p > 0),
    ) {
        figures.push(Used {
            percent: erases / f64::from(pe) * 100.0,
            basis: format!("mean erase count {erases:.1} of its NAND's rated {pe} P/E cycles"),
            kind: UsedKind::EraseCycles,
        });
    }
    figures
}

/// The drive's rated life: the figure that shows the most used, and what is left of it.
pub fn rated_life(snapshot: &HealthSnapshot, rating: Option<&EnduranceRating>) -> Option<RatedLife> {
    used(snapshot, rating)
        .into_iter()
        .filter(|u| u.percent.is_finite())
        .max_by(|a, b| a.percent.total_cmp(&b.percent))
        .map(|u| RatedLife {
            used_percent: u.percent,
            remaining_percent: (100.0 - u.percent).max(0.0),
            basis: u.basis,
        })
}
