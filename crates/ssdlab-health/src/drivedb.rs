//! What each ATA attribute of a drive model means, from smartmontools' own drive database (`drivedb.h`, parsed
//! from its text: a real install's copy is newer than any table here) and, after it, a small table of families
//! that database does not match.
//!
//! smartctl names a drive's attributes from the database it was built with, when it ran; a saved output keeps
//! those names. A drive the database did not know gets the default names, and the default name of 241 is
//! `Total_LBAs_Written` even on drives that count GiB there (a WD Red SA500 4 TB: 89 MB "written" after 8,244
//! hours). Renaming by the database in use now, by model and firmware, gives the same attribute its meaning.
//!
//! This module parses and matches text; it never reads a file (the caller passes the text in).

use regex::Regex;
use ssdlab_core::schema::health::AtaAttribute;

/// One `-v ID,FORMAT,NAME` preset: the attribute's name for this family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preset {
    pub id: u8,
    pub name: String,
}

#[derive(Debug)]
struct Entry {
    family: String,
    model: Regex,
    firmware: Option<Regex>,
    presets: Vec<Preset>,
}

/// A drive database: its entries in order (the first match wins, as in smartctl), and where it came from.
#[derive(Debug)]
pub struct DriveDb {
    entries: Vec<Entry>,
    origin: String,
}

/// Families smartmontools' database (as of its 7.3 release) does not match, in its own syntax. Each names its
/// source.
const FALLBACK: &str = r#"
  // WD Red SA500 and Blue SSDs of sizes the database's pattern leaves out (its pattern stops at 2 TB; the 4 TB
  // WDC WDS400T1R0A reports the same attributes: WD's SA500 SMART attribute table, 233/234 NAND GiB written
  // to TLC/SLC, 241/242 host GiB written/read).
  { "WD Blue / Red SSDs (not in the drive database)",
    "WDC  ?WDS[0-9]+[GT][0-9][BGR][0-9][AB](-.*)?",
    "", "",
    "-v 165,raw48,Block_Erase_Count "
    "-v 169,raw48,Total_Bad_Blocks "
    "-v 173,raw48,Average_PE_Cycles_TLC "
    "-v 230,hex48,Media_Wearout_Indicator "
    "-v 233,raw48,NAND_GB_Written_TLC "
    "-v 234,raw48,NAND_GB_Written_SLC "
    "-v 241,raw48,Host_Writes_GiB "
    "-v 242,raw48,Host_Reads_GiB "
  },
"#;

impl DriveDb {
    /// Parses `drivedb.h` text. Entries whose patterns are not valid regular expressions here are skipped, as
    /// are the version, default and USB entries (they name no drive family).
    pub fn parse(text: &str, origin: &str) -> DriveDb {
        let entries = entry_fields(text)
            .into_iter()
            .filter_map(|fields| {
                let [family, model, firmware, _warning, presets] = fields.as_slice() else {
                    return None;
                };
                if family.starts_with("VERSION:") || family == "DEFAULT" || family.starts_with("USB:") {
                    return None;
                }
                Some(Entry {
                    family: family.clone(),
                    model: full_match(model)?,
                    firmware: if firmware.is_empty() {
                        None
                    } else {
                        Some(full_match(firmware)?)
                    },
                    presets: presets_of(presets),
                })
            })
            .collect();
        DriveDb {
            entries,
            origin: origin.into(),
        }
    }

    /// The families the database in this crate adds.
    pub fn fallback() -> DriveDb {
        DriveDb::parse(
            FALLBACK,
            "ssdlab's table of families the drive database does not match",
        )
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn lookup(&self, model: &str, firmware: Option<&str>) -> Option<&Entry> {
        self.entries.iter().find(|e| {
            e.model.is_match(model)
                && match (&e.firmware, firmware) {
                    (Some(pattern), Some(fw)) => pattern.is_match(fw),
                    (Some(_), None) => false,
                    (None, _) => true,
                }
        })
    }
}

/// The databases to name attributes by, in order: the installed one first, then the fallback table.
#[derive(Debug)]
pub struct AttributeNames {
    dbs: Vec<DriveDb>,
}

impl AttributeNames {
    pub fn new(installed: Option<DriveDb>) -> Self {
        AttributeNames {
            dbs: installed.into_iter().chain([DriveDb::fallback()]).collect(),
        }
    }

    /// Renames `attributes` by the first family matching `model` and `firmware`; returns a note saying which
    /// family and database, and what changed, or None when no family matched or nothing changed.
    pub fn rename(
        &self,
        model: &str,
        firmware: Option<&str>,
        attributes: &mut [AtaAttribute],
    ) -> Option<String> {
        let (db, entry) = self
            .dbs
            .iter()
            .find_map(|db| db.lookup(model, firmware).map(|e| (db, e)))?;
        let mut changed = vec![];
        for attribute in attributes.iter_mut() {
            if let Some(preset) = entry.presets.iter().find(|p| p.id == attribute.id)
                && preset.name != attribute.name
            {
                changed.push(format!("{} {} -> {}", attribute.id, attribute.name, preset.name));
                attribute.name = preset.name.clone();
            }
        }
        (!changed.is_empty()).then(|| {
            format!(
                "attributes named as the drive database knows the family \"{}\" ({}): {}",
                entry.family,
                db.origin,
                changed.join(", ")
            )
        })
    }
}

/// A POSIX extended expression as drivedb.h writes it, matched against the whole string as smartctl does.
fn full_match(pattern: &str) -> Option<Regex> {
    Regex::new(&format!("^(?:{pattern})$")).ok()
}

/// The `-v ID,FORMAT[,NAME[,TYPE]]` presets of an entry (other options, such as `-F`, are not about names).
fn presets_of(text: &str) -> Vec<Preset> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| w[0] == "-v")
        .filter_map(|w| {
            let mut parts = w[1].split(',');
            let id = parts.next()?.parse().ok()?;
            let _format = parts.next()?;
            let name = parts.next()?;
            Some(Preset {
                id,
                name: name.to_string(),
            })
        })
        .collect()
}

/// The string fields of every `{ ... }` entry at the top level, with C comments removed and adjacent string
/// literals joined, as the compiler would see them.
fn entry_fields(text: &str) -> Vec<Vec<String>> {
    let mut entries = vec![];
    let mut fields: Vec<String> = vec![];
    let mut field: Option<String> = None;
    let mut depth = 0u32;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            '"' => {
                let literal = field.get_or_insert_with(String::new);
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            if let Some(escaped) = chars.next() {
                                literal.push(escaped);
                            }
                        }
                        _ => literal.push(c),
                    }
                }
            }
            '{' => {
                depth += 1;
                if depth == 1 {
                    fields.clear();
                    field = None;
                }
            }
            ',' if depth == 1 => fields.push(field.take().unwrap_or_default()),
            '}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    if let Some(last) = field.take() {
                        fields.push(last);
                    }
                    entries.push(std::mem::take(&mut fields));
                }
            }
            _ => {}
        }
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attribute(id: u8, name: &str) -> AtaAttribute {
        AtaAttribute {
            id,
            name: name.into(),
            value: 100,
            worst: 100,
            thresh: 0,
            when_failed: String::new(),
            prefailure: false,
            raw_value: 1,
            raw_string: "1".into(),
        }
    }

    #[test]
    fn entries_join_literals_skip_comments_and_match_whole_models() {
        let db = DriveDb::parse(
            r#"
            /* a comment with { braces } and "quotes" */
            { "VERSION: 7.3", "-", "-", "", "" },
            { "DEFAULT", "-", "-", "", "-v 241,raw48,Total_LBAs_Written " },
            { "Some family", // tested with X1
              "X1|" "X2(-.*)?",
              "", "",
            //"-v 1,raw48,Ignored "
              "-v 241,raw48,Host_Writes_GiB -F xerrorlba "
              "-v 233,raw48,NAND_GB_Written_TLC"
            },
            { "Firmware-specific", "Y1", "FW[0-9]", "", "-v 9,raw48,Power_On_Hours" },
            "#,
            "test",
        );
        assert_eq!(db.len(), 2);
        let entry = db.lookup("X2-foo", None).expect("X2-foo matches");
        assert_eq!(entry.family, "Some family");
        assert_eq!(
            entry.presets,
            [
                Preset {
                    id: 241,
                    name: "Host_Writes_GiB".into()
                },
                Preset {
                    id: 233,
                    name: "NAND_GB_Written_TLC".into()
                }
            ]
        );
        assert!(db.lookup("X12", None).is_none(), "a model matches as a whole");
        assert!(db.lookup("Y1", Some("FW1")).is_some());
        assert!(db.lookup("Y1", Some("GW1")).is_none());
    }

    #[test]
    fn a_wd_red_sa500_of_4_tb_gets_its_gib_counters_named() {
        let names = AttributeNames::new(None);
        let mut attributes = vec![
            attribute(241, "Total_LBAs_Written"),
            attribute(9, "Power_On_Hours"),
        ];
        let note = names
            .rename("WDC  WDS400T1R0A-68A4W0", Some("411000WR"), &mut attributes)
            .expect("the fallback table knows the family");
        assert_eq!(attributes[0].name, "Host_Writes_GiB");
        assert_eq!(attributes[1].name, "Power_On_Hours");
        assert!(
            note.contains("241 Total_LBAs_Written -> Host_Writes_GiB"),
            "{note}"
        );
    }

    #[test]
    fn the_installed_database_parses_when_there_is_one() {
        // smartmontools is installed by the tests' setup; skip quietly where it is not.
        let Ok(text) = std::fs::read_to_string("/usr/share/smartmontools/drivedb.h") else {
            return;
        };
        let db = DriveDb::parse(&text, "drivedb.h");
        assert!(db.len() > 500, "{} entries", db.len());
        let entry = db
            .lookup("Samsung SSD 860 EVO 500GB", Some("RVT02B6Q"))
            .expect("the 860 EVO is in the database");
        assert_eq!(entry.family, "Samsung based SSDs");
        assert!(
            entry
                .presets
                .iter()
                .any(|p| p.id == 251 && p.name == "NAND_Writes"),
            "{entry:?}"
        );
    }
}
