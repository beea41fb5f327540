//! A drive's rated endurance: from the flags, else from a small table of drives whose ratings are published.
//!
//! TBW and DWPD are two views of one rating: DWPD = TBW / (capacity x 365 x warranty years). P/E cycles rate the
//! NAND, not the drive: TBW is about capacity x P/E / write amplification, which is why a drive's NAND-write
//! counter matters.

use ssdlab_core::schema::health::{DriveIdentity, EnduranceRating};

/// The rating flags as given.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RatingFlags {
    /// Terabytes (10^12 bytes) written.
    pub tbw_tb: Option<f64>,
    pub dwpd: Option<f64>,
    pub warranty_years: Option<f64>,
    pub pe_cycles: Option<u32>,
}

impl RatingFlags {
    fn any(&self) -> bool {
        self.tbw_tb.is_some() || self.dwpd.is_some() || self.pe_cycles.is_some()
    }
}

/// One row of `data/ratings.tsv`: a drive's published endurance, with where it was read.
#[derive(Debug, Clone, PartialEq)]
struct Rated {
    /// The model as the drive reports it, runs of spaces as one; a trailing '*' matches any model starting with
    /// the rest.
    model: String,
    capacity_gb: f64,
    tbw_tb: Option<f64>,
    dwpd: Option<f64>,
    warranty_years: f64,
    source: String,
}

/// The published ratings, one drive and capacity a row, each with its source (the file's header says how).
const RATINGS_TSV: &str = include_str!("../data/ratings.tsv");

/// Ratings of the NAND itself (P/E cycles), for drives whose vendor published no TBW.
const NAND_RATINGS: &[(&str, u32, &str)] = &[(
    "Samsung SSD 840 EVO",
    1000,
    "19 nm TLC is rated about 1,000 P/E cycles (AnandTech measured about 1,129 from the wear-leveling count)",
)];

/// WD's SATA drives report "WDC  WDS..." with two spaces on some firmware and one on others: models compare with
/// runs of spaces as one.
fn normalized(model: &str) -> String {
    model.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn parse_ratings(text: &str) -> Result<Vec<Rated>, String> {
    let number = |field: &str, what: &str, line: usize| -> Result<Option<f64>, String> {
        match field.trim() {
            "" => Ok(None),
            t => t
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v > 0.0)
                .map(Some)
                .ok_or_else(|| format!("ratings.tsv line {line}: {what} {t:?} is not a positive number")),
        }
    };
    let mut rows = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let n = index + 1;
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        let [model, capacity, tbw, dwpd, years, source] = fields[..] else {
            return Err(format!("ratings.tsv line {n}: {} fields, not 6", fields.len()));
        };
        let required =
            |v: Option<f64>, what: &str| v.ok_or_else(|| format!("ratings.tsv line {n}: no {what}"));
        if source.trim().is_empty() {
            return Err(format!("ratings.tsv line {n}: a rating without its source"));
        }
        rows.push(Rated {
            model: normalized(model),
            capacity_gb: required(number(capacity, "capacity", n)?, "capacity")?,
            tbw_tb: number(tbw, "TBW", n)?,
            dwpd: number(dwpd, "DWPD", n)?,
            warranty_years: required(number(years, "warranty", n)?, "warranty")?,
            source: source.trim().to_string(),
        });
    }
    Ok(rows)
}

fn ratings() -> &'static [Rated] {
    static TABLE: std::sync::OnceLock<Vec<Rated>> = std::sync::OnceLock::new();
    // The file is part of the binary and its test parses every row, so a malformed row cannot ship.
    TABLE.get_or_init(|| parse_ratings(RATINGS_TSV).unwrap_or_default())
}

/// Words a model string carries for its form factor. Samsung's warranty table rates the 850 and 860 EVO
/// families by capacity whatever the form factor ("Samsung SSD 850 EVO M.2 250GB" is rated as the 2.5-inch 250 GB,
/// 75 TBW), so a model with one of them that has no row of its own takes its family's row.
const FORM_FACTOR_WORDS: [&str; 2] = ["M.2", "mSATA"];

/// The row for a drive: its model (exact, or a prefix row), else its family's row with the form-factor word
/// taken out; among several rows the capacity nearest the drive's (prefix rows name a family whose capacities
/// differ). The second value names the form factor when the family's row was used.
fn known(model: &str, capacity_bytes: Option<u64>) -> Option<(&'static Rated, Option<&'static str>)> {
    let model = normalized(model);
    let distance = |r: &&Rated| match capacity_bytes {
        Some(c) => (r.capacity_gb * 1e9 - c as f64).abs(),
        None => 0.0,
    };
    let nearest = |model: &str| {
        ratings()
            .iter()
            .filter(|r| match r.model.strip_suffix('*') {
                Some(prefix) => model.starts_with(prefix),
                None => model == r.model,
            })
            .min_by(|a, b| distance(a).total_cmp(&distance(b)))
    };
    if let Some(row) = nearest(&model) {
        return Some((row, None));
    }
    let words: Vec<&str> = model.split(' ').collect();
    let form = FORM_FACTOR_WORDS.iter().find(|f| words.contains(f))?;
    let family: Vec<&str> = words.into_iter().filter(|w| w != form).collect();
    nearest(&family.join(" ")).map(|row| (row, Some(*form)))
}

fn nand_pe(model: &str) -> Option<(u32, &'static str)> {
    NAND_RATINGS
        .iter()
        .find(|(prefix, _, _)| model.starts_with(prefix))
        .map(|&(_, pe, source)| (pe, source))
}

/// The rating of `identity`: the flags win over the table; `profile_pe` is a virtual drive's NAND rating.
pub fn rating(
    identity: &DriveIdentity,
    flags: &RatingFlags,
    profile_pe: Option<u32>,
) -> Option<EnduranceRating> {
    let table = known(&identity.model, identity.capacity_bytes);
    let nand = nand_pe(&identity.model);
    // The table is the base and the flags override what they name, so --warranty-years alone, or --rated-pe
    // on a drive with a published TBW, keeps the rest of the table's rating.
    let flagged = flags.any() || flags.warranty_years.is_some();
    let mut rating = if let Some((k, form_factor)) = table {
        let mut source = format!("published rating: {}", k.source);
        if let Some(form) = form_factor {
            source.push_str(&format!(
                " (the row of {}: this {form} model is rated as its family by capacity)",
                k.model
            ));
        }
        // A rating published only as DWPD defines the TBW over the warranty: DWPD x capacity x 365 x years.
        let tbw_tb = k.tbw_tb.or_else(|| {
            let tbw = k.dwpd? * k.capacity_gb * 365.0 * k.warranty_years / 1000.0;
            source.push_str(" (TBW from the published DWPD)");
            Some(tbw)
        });
        if let Some((_, nand_source)) = nand {
            source.push_str(&format!("; NAND: {nand_source}"));
        }
        if flagged {
            source = format!("the --rated-* flags over the {source}");
        }
        EnduranceRating {
            tbw_bytes: tbw_tb.map(|tb| (tb * 1e12) as u64),
            warranty_years: flags.warranty_years.or(Some(k.warranty_years)),
            dwpd: k.dwpd,
            pe_cycles: flags.pe_cycles.or(nand.map(|(pe, _)| pe)),
            source,
        }
    } else if flagged {
        EnduranceRating {
            tbw_bytes: None,
            warranty_years: flags.warranty_years,
            dwpd: None,
            pe_cycles: flags.pe_cycles.or(nand.map(|(pe, _)| pe)),
            source: "the --rated-* flags".into(),
        }
    } else if let Some((pe, source)) = nand {
        EnduranceRating {
            tbw_bytes: None,
            warranty_years: None,
            dwpd: None,
            pe_cycles: Some(pe),
            source: format!("NAND rating: {source}"),
        }
    } else if let Some(pe) = profile_pe {
        EnduranceRating {
            tbw_bytes: None,
            warranty_years: None,
            dwpd: None,
            pe_cycles: Some(pe),
            source: "the simulator profile's NAND rating".into(),
        }
    } else {
        return None;
    };
    if rating.pe_cycles.is_none() {
        rating.pe_cycles = profile_pe;
    }
    let capacity = identity.capacity_bytes.map(|c| c as f64);
    if let Some(tb) = flags.tbw_tb {
        rating.tbw_bytes = Some((tb * 1e12) as u64);
        // The table's DWPD rated the table's TBW; the flag's TBW gets its own below.
        rating.dwpd = None;
    } else if flags.dwpd.is_some() {
        // A DWPD given on the command line defines the TBW (below), over any table figure.
        rating.tbw_bytes = None;
    }
    match (rating.tbw_bytes, flags.dwpd, rating.warranty_years, capacity) {
        // A published DWPD stands as published (vendors round it, and some rate it over a different period).
        (Some(tbw), None, Some(years), Some(cap)) if cap > 0.0 && years > 0.0 && rating.dwpd.is_none() => {
            rating.dwpd = Some(tbw as f64 / (cap * 365.0 * years));
        }
        (None, Some(dwpd), Some(years), Some(cap)) => {
            rating.dwpd = Some(dwpd);
            rating.tbw_bytes = Some((dwpd * cap * 365.0 * years) as u64);
        }
        (_, Some(dwpd), _, _) => rating.dwpd = Some(dwpd),
        _ => {}
    }
    Some(rating)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ssdlab_core::schema::health::Protocol;

    fn drive(model: &str, capacity: u64) -> DriveIdentity {
        DriveIdentity {
            model: model.into(),
            serial: "S1".into(),
            firmware: None,
            capacity_bytes: Some(capacity),
            protocol: Protocol::Ata,
            source: "/dev/sda".into(),
        }
    }

    #[test]
    fn dwpd_follows_from_tbw_capacity_and_warranty() {
        // 300 TB over 5 years on 500 GB: 300e12 / (500e9 x 365 x 5) = 0.3288 drive writes per day.
        let r = rating(
            &drive("Samsung SSD 860 EVO 500GB", 500_000_000_000),
            &RatingFlags::default(),
            None,
        )
        .unwrap();
        assert_eq!(r.tbw_bytes, Some(300_000_000_000_000));
        assert!((r.dwpd.unwrap() - 0.328_767).abs() < 1e-5, "{:?}", r.dwpd);
    }

    #[test]
    fn tbw_follows_from_dwpd_and_the_flags_win() {
        let flags = RatingFlags {
            dwpd: Some(10.0),
            warranty_years: Some(5.0),
            ..RatingFlags::default()
        };
        // Seed 004's "10 DW x 5 years" on 200 GB: 10 x 200 GB x 365 x 5 = 3.65 PB.
        let r = rating(&drive("Samsung SSD 860 EVO 500GB", 200_000_000_000), &flags, None).unwrap();
        assert_eq!(r.tbw_bytes, Some(3_650_000_000_000_000));
        assert!(r.source.starts_with("the --rated-* flags"), "{}", r.source);
    }

    #[test]
    fn every_row_of_the_ratings_file_parses_with_its_source() {
        let rows = parse_ratings(RATINGS_TSV).expect("ratings.tsv parses");
        assert!(rows.len() >= 50, "{} rows", rows.len());
        assert!(
            rows.iter()
                .all(|r| r.tbw_tb.is_some() || r.dwpd.is_some() || r.model.contains("840 EVO"))
        );
        assert!(rows.iter().all(|r| r.source.len() > 20));
        // Each model and capacity once.
        let mut keys: Vec<(String, u64)> = rows
            .iter()
            .map(|r| (r.model.clone(), r.capacity_gb as u64))
            .collect();
        keys.sort();
        let before = keys.len();
        keys.dedup();
        assert_eq!(keys.len(), before, "a drive listed twice");
        assert!(
            parse_ratings("M\t250\t75\t\t5\t")
                .unwrap_err()
                .contains("without its source")
        );
        assert!(
            parse_ratings("M\t250\tmany\t\t5\tS")
                .unwrap_err()
                .contains("TBW \"many\"")
        );
        assert!(parse_ratings("M\t250").unwrap_err().contains("2 fields"));
    }

    #[test]
    fn the_850_evo_the_wd_red_by_either_spacing_and_a_dwpd_only_drive() {
        // Issue 32's 850 EVO 250 GB: 75 TBW over 5 years.
        let r = rating(
            &drive("Samsung SSD 850 EVO 250GB", 250_059_350_016),
            &RatingFlags::default(),
            None,
        )
        .unwrap();
        assert_eq!(
            (r.tbw_bytes, r.warranty_years),
            (Some(75_000_000_000_000), Some(5.0))
        );
        assert!(r.source.contains("samsung.com"), "{}", r.source);
        // The WD Red SA500 4 TB, reported with one space after WDC or two, and an OEM suffix.
        for model in ["WDC WDS400T1R0A-68A4W0", "WDC  WDS400T1R0A-68A4W0"] {
            let r = rating(&drive(model, 4_000_787_030_016), &RatingFlags::default(), None).unwrap();
            assert_eq!(r.tbw_bytes, Some(2_500_000_000_000_000), "{model}");
        }
        // The Intel DC S3700 400 GB is rated 10 drive writes a day for 5 years: 7.3 PB.
        let r = rating(
            &drive("INTEL SSDSC2BA400G3", 400_088_457_216),
            &RatingFlags::default(),
            None,
        )
        .unwrap();
        assert_eq!(r.dwpd, Some(10.0));
        assert_eq!(r.tbw_bytes, Some(7_300_000_000_000_000));
        assert!(r.source.contains("TBW from the published DWPD"), "{}", r.source);
        // A family row picks the capacity nearest the drive's.
        let small = rating(
            &drive("INTEL SSDSC2BA100G3", 100_030_242_816),
            &RatingFlags::default(),
            None,
        )
        .unwrap();
        assert_eq!(small.tbw_bytes, Some(1_825_000_000_000_000));
    }

    #[test]
    fn the_840_evo_family_has_a_pe_rating_and_no_tbw() {
        let r = rating(
            &drive("Samsung SSD 840 EVO 1TB", 1_000_204_886_016),
            &RatingFlags::default(),
            None,
        )
        .unwrap();
        assert_eq!((r.tbw_bytes, r.pe_cycles), (None, Some(1000)));
        assert_eq!(r.warranty_years, Some(3.0));
        // An M.2 model has no row of its own: its family's row by capacity rates it (issue 48's 850 EVO M.2).
        let m2 = rating(
            &drive("Samsung SSD 850 EVO M.2 250GB", 250_059_350_016),
            &RatingFlags::default(),
            None,
        )
        .unwrap();
        assert_eq!(m2.tbw_bytes, Some(75_000_000_000_000));
        assert!(
            m2.source.contains("M.2 model is rated as its family"),
            "{}",
            m2.source
        );
        // The mSATA model has no row of its own; its NAND rating still applies.
        let msata = rating(
            &drive("Samsung SSD 840 EVO mSATA 1TB", 1_000_204_886_016),
            &RatingFlags::default(),
            None,
        );
        assert_eq!(msata.and_then(|r| r.pe_cycles), Some(1000));
        assert!(rating(&drive("Unknown SSD", 1), &RatingFlags::default(), None).is_none());
    }
}
