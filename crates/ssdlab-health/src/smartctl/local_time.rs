//! smartctl's "Local Time is:" line (`Tue Mar  5 10:00:00 2024 UTC`, C's `%a %b %e %H:%M:%S %Y %Z`) into Unix
//! seconds. The zone is printed as an abbreviation (or, on Windows, a name): only those with one meaning are
//! converted, by the fixed offsets below; an ambiguous one (CST, IST, BST) or an unknown one is refused with its
//! text, and the caller stamps the snapshot another way. Never a guess: a history keyed by time must not move.

/// Zones smartctl prints whose offset from UTC is unambiguous, in minutes east.
const ZONES: [(&str, i64); 30] = [
    ("UTC", 0),
    ("GMT", 0),
    ("Z", 0),
    ("WET", 0),
    ("WEST", 60),
    ("CET", 60),
    ("CEST", 120),
    ("MET", 60),
    ("MEST", 120),
    ("EET", 120),
    ("EEST", 180),
    ("MSK", 180),
    ("EST", -300),
    ("EDT", -240),
    ("MDT", -360),
    ("MST", -420),
    ("PDT", -420),
    ("PST", -480),
    ("AKST", -540),
    ("AKDT", -480),
    ("HST", -600),
    ("JST", 540),
    ("KST", 540),
    ("HKT", 480),
    ("SGT", 480),
    ("AEST", 600),
    ("AEDT", 660),
    ("NZST", 720),
    ("NZDT", 780),
    ("W. Europe Standard Time", 60),
];

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// The time as Unix seconds, or why it is not converted.
pub fn parse(value: &str) -> Result<u64, String> {
    let words: Vec<&str> = value.split_whitespace().collect();
    let unread = |why: &str| format!("smartctl's local time \"{value}\" is not used: {why}");
    let [_weekday, month, day, clock, year, zone @ ..] = words.as_slice() else {
        return Err(unread("not in smartctl's form"));
    };
    let month = MONTHS
        .iter()
        .position(|m| m == month)
        .ok_or_else(|| unread("no such month"))?
        + 1;
    let zone = zone.join(" ");
    let offset_minutes = ZONES
        .iter()
        .find(|(name, _)| *name == zone)
        .map(|(_, offset)| *offset)
        .ok_or_else(|| {
            unread(&format!(
                "the time zone {zone:?} has no single offset this reader knows"
            ))
        })?;
    let day: u32 = day.parse().map_err(|_| unread("no day"))?;
    let utc = format!("{year}-{month:02}-{day:02}T{clock}Z");
    let local = ssdlab_core::units::parse_rfc3339_utc(&utc).ok_or_else(|| unread("no date and time"))?;
    local
        .checked_add_signed(-offset_minutes * 60)
        .ok_or_else(|| unread("before 1970"))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn utc_and_zones_with_one_offset_convert_and_the_others_are_refused() {
        assert_eq!(parse("Tue Mar  5 10:00:00 2024 UTC"), Ok(1_709_632_800));
        assert_eq!(parse("Tue Mar  5 11:00:00 2024 CET"), Ok(1_709_632_800));
        assert_eq!(parse("Tue Mar  5 02:00:00 2024 PST"), Ok(1_709_632_800));
        assert_eq!(
            parse("Tue Mar  5 11:00:00 2024 W. Europe Standard Time"),
            Ok(1_709_632_800)
        );
        assert!(
            parse("Tue Mar  5 10:00:00 2024 CST")
                .unwrap_err()
                .contains("\"CST\"")
        );
        assert!(parse("yesterday").unwrap_err().contains("not in smartctl's form"));
    }
}
