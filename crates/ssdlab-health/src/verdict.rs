//! OK, WARN or FAIL, with every reason. FAIL is the drive's own failure signals (SMART status, NVMe critical
//! warnings, attributes failing now, spare below threshold); WARN is what an operator should look at before it
//! becomes one (errors logged, wear past 80%, reallocations, a life estimate under a year).

use ssdlab_core::schema::health::{
    EnduranceRating, HealthLevel, HealthSnapshot, HealthVerdict, LifeEstimate,
};

use crate::ata::{CRITICAL_COUNTERS, count_of, critical, is_critical};
use crate::rated::UsedKind;
use crate::smartctl::exit_meaning;

/// NVMe critical warning bits (NVMe base specification, SMART / Health Information log byte 0).
const CRITICAL_WARNING_BITS: [&str; 6] = [
    "available spare is below its threshold",
    "temperature is outside its thresholds",
    "NVM subsystem reliability is degraded (media or internal errors)",
    "media is read-only",
    "the volatile memory backup device has failed",
    "the persistent memory region is read-only or unreliable",
];

/// Wear at which the verdict starts to warn, in percent of rated endurance, unless `--wear-warn` says otherwise:
/// CrystalDiskInfo's "Caution" and the usual smartctl_exporter alerts sit near here.
pub const WEAR_WARN_PERCENT: f64 = 80.0;
/// A remaining-life low band under this many days warns.
pub const LIFE_WARN_DAYS: f64 = 365.0;

/// OK, WARN or FAIL for a drive, with every reason: the failures first, then the warnings, each in the order
/// they are checked.
pub fn verdict(
    snapshot: &HealthSnapshot,
    life: &LifeEstimate,
    rating: Option<&EnduranceRating>,
    wear_warn_percent: f64,
) -> HealthVerdict {
    let mut found = Findings::default();
    found.drive_status(snapshot);
    found.attributes_and_spare(snapshot);
    found.endurance(snapshot, rating, wear_warn_percent);
    found.counters_and_life(snapshot, life);
    found.into_verdict(Evidence::of(snapshot))
}

/// The reasons found so far: those that fail the drive and those that warn, each in the order found.
#[derive(Default)]
struct Findings {
    fail: Vec<String>,
    warn: Vec<String>,
}

impl Findings {
    /// What the drive and smartctl say themselves: the SMART status, the NVMe critical warning bits and
    /// smartctl's exit status bits.
    fn drive_status(&mut self, snapshot: &HealthSnapshot) {
        if snapshot.smart_passed == Some(false) {
            self.fail
                .push("the drive's own SMART health status says FAILED".to_string());
        }
        if let Some(bits) = snapshot.critical_warning.filter(|&w| w != 0) {
            for (bit, meaning) in CRITICAL_WARNING_BITS.iter().enumerate() {
                if bits & (1 << bit) != 0 {
                    self.fail
                        .push(format!("NVMe critical warning bit {bit}: {meaning}"));
                }
            }
            if bits >> CRITICAL_WARNING_BITS.len() != 0 {
                self.fail.push(format!(
                    "NVMe critical warning {bits:#04x} has bits this version does not name"
                ));
            }
        }
        if let Some(status) = snapshot.smartctl_exit_status {
            if status & 0b0001_1000 != 0 {
                self.fail.push(format!(
                    "smartctl exit status {status}: {}",
                    exit_meaning(status, 0b0001_1000)
                ));
            }
            if status & 0b1110_0100 != 0 {
                self.warn.push(format!(
                    "smartctl exit status {status}: {}",
                    exit_meaning(status, 0b1110_0100)
                ));
            }
        }
    }

    /// ATA attributes at or below their thresholds, now (fail) or in the past (warn), and spare below its
    /// threshold.
    fn attributes_and_spare(&mut self, snapshot: &HealthSnapshot) {
        for a in &snapshot.attributes {
            match a.when_failed.as_str() {
                "now" => self.fail.push(format!(
                    "attribute {} {} is at or below its threshold now ({} <= {})",
                    a.id, a.name, a.value, a.thresh
                )),
                "past" => self.warn.push(format!(
                    "attribute {} {} was at or below its threshold in the past (worst {}, threshold {})",
                    a.id, a.name, a.worst, a.thresh
                )),
                _ => {}
            }
        }
        if let (Some(spare), Some(threshold)) = (
            snapshot.available_spare_percent,
            snapshot.available_spare_threshold_percent,
        ) && spare < threshold
        {
            self.fail.push(format!(
                "available spare {spare}% is below its threshold {threshold}%"
            ));
        }
    }

    /// Rated endurance used at or past `wear_warn_percent`, by each figure that says (the drive's own wear
    /// indicator, host writes against the TBW rating, mean erase count against the rated P/E cycles), each reason
    /// with what remains and the threshold. TBW rates host writes: a drive written past it is outside the vendor's
    /// promise whatever its own wear figure says (drives keep counting past 100%, and some never count at all).
    fn endurance(
        &mut self,
        snapshot: &HealthSnapshot,
        rating: Option<&EnduranceRating>,
        wear_warn_percent: f64,
    ) {
        let threshold = format!("warns from {wear_warn_percent:.0}% (--wear-warn)");
        for used in crate::rated::used(snapshot, rating) {
            let percent = used.percent;
            if percent < wear_warn_percent && percent < 100.0 {
                continue;
            }
            let figure = match used.kind {
                UsedKind::Indicator => format!("{percent:.0}% of rated endurance used ({})", used.basis),
                UsedKind::Tbw | UsedKind::EraseCycles => format!("{} ({percent:.0}%)", used.basis),
            };
            self.warn.push(if percent >= 100.0 {
                format!(
                    "{figure}: past its rating, the drive may still work but is outside what the vendor promises; \
                     {threshold}"
                )
            } else {
                format!(
                    "{figure}: {:.0}% of rated life remains; {threshold}",
                    100.0 - percent
                )
            });
        }
    }

    /// Errors the drive counted (the ATA critical counters by ID, with the name the drive database gives each), a
    /// hot drive, and a remaining life whose low band is under [`LIFE_WARN_DAYS`]: all warnings.
    fn counters_and_life(&mut self, snapshot: &HealthSnapshot, life: &LifeEstimate) {
        for (id, _, what) in CRITICAL_COUNTERS {
            if let Some(a) = critical(&snapshot.attributes, id)
                && count_of(a) > 0
            {
                self.warn
                    .push(format!("attribute {id} {}: {} {what}", a.name, count_of(a)));
            }
        }
        // The normalized figures, where no critical attribute above already said them (SAS, NVMe, other names).
        let said = |id: u8| critical(&snapshot.attributes, id).is_some();
        let counted = [
            (
                snapshot.media_errors.filter(|_| !said(187)),
                "uncorrectable media errors",
            ),
            (
                snapshot.pending_sectors.filter(|_| !said(197)),
                "sectors pending reallocation",
            ),
            (
                snapshot.reallocated.filter(|_| !said(5)),
                "blocks or sectors reallocated",
            ),
            (
                snapshot.crc_errors,
                "interface CRC errors (check the cable or backplane)",
            ),
        ];
        for (count, what) in counted {
            if let Some(n) = count.filter(|&n| n > 0) {
                self.warn.push(format!("{n} {what}"));
            }
        }
        if let Some(t) = snapshot.temperature_celsius.filter(|&t| t >= 70.0) {
            self.warn.push(format!("temperature {t:.0} °C"));
        }
        if let Some(low) = life.remaining_days_low.filter(|&d| d < LIFE_WARN_DAYS) {
            self.warn.push(format!(
                "remaining life may be as short as {low:.0} days at the recent wear rate"
            ));
        }
    }

    /// The verdict: FAIL when anything failed, else UNKNOWN when nothing showing the drive's condition was read,
    /// else WARN when anything warned, else OK; the reasons failures first.
    fn into_verdict(self, evidence: Evidence) -> HealthVerdict {
        let level = if !self.fail.is_empty() {
            HealthLevel::Fail
        } else if evidence == Evidence::None {
            HealthLevel::Unknown
        } else if !self.warn.is_empty() {
            HealthLevel::Warn
        } else {
            HealthLevel::Ok
        };
        let mut reasons = self.fail;
        if level == HealthLevel::Unknown {
            reasons.push(
                "no health data read: the output holds no wear, spare, error or reallocation figure, no ATA \
                 attribute the drive judges (a threshold or a critical counter) and no NVMe warning (a drive's own \
                 SMART status alone is not evidence, nor are write counters and temperatures)"
                    .into(),
            );
        }
        reasons.extend(self.warn);
        if reasons.is_empty() {
            reasons.push("no failure or warning signs".into());
        }
        HealthVerdict { level, reasons }
    }
}

/// Whether a snapshot holds anything that shows the drive's condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Evidence {
    None,
    Some,
}

impl Evidence {
    /// The figures a verdict of OK or WARN rests on: attributes the drive judges, wear, spare, media errors,
    /// reallocated or pending sectors, or the NVMe critical warning. A figure that failed plausibility was removed
    /// before, so a drive whose every figure failed is unknown. A SMART status that says PASSED is the drive's own word,
    /// which a failing drive often still gives; alone it is not enough to call a drive healthy.
    fn of(snapshot: &HealthSnapshot) -> Self {
        // An attribute is evidence when the drive judges it (a threshold, a failure now or in the past) or it is
        // a critical counter; a table of temperatures and hours alone is not.
        let judged_attribute = snapshot
            .attributes
            .iter()
            .any(|a| a.thresh > 0 || !a.when_failed.is_empty() || is_critical(a));
        let read = judged_attribute
            || snapshot.critical_warning.is_some()
            || snapshot.wear_used_percent.is_some()
            || snapshot.available_spare_percent.is_some()
            || snapshot.media_errors.is_some()
            || snapshot.reallocated.is_some()
            || snapshot.pending_sectors.is_some();
        if read { Evidence::Some } else { Evidence::None }
    }
}
