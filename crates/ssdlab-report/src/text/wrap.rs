//! Fitting a line of text to a terminal's width. It owns only the breaking of one line at spaces; it never
//! decides whether to wrap (the console does, and only on a terminal: a pipe or a file keeps every line whole, so
//! a sentence can be searched for).

/// Where a labelled line's text starts: `verdict   `, `finding   `, `note      ` are ten columns wide.
const LABEL_COLUMNS: usize = 10;

/// The width ssdlab lays its tables out for: a line no longer than this is a table row or a short statement and
/// is never broken (a terminal narrower than this wraps it as it would any program's table).
pub const TABLE_COLUMNS: usize = 80;

/// `line` as a terminal `width` columns wide shows it: a sentence longer than [`TABLE_COLUMNS`] (a verdict's
/// reasons, a note) broken at the width; anything shorter as it is.
pub fn fit_to_terminal(line: &str, width: usize) -> Vec<String> {
    // A row whose columns are aligned by runs of spaces after its label is a table row, however long: broken,
    // its columns would not line up, so the terminal wraps it as it would any program's.
    let after_label = line.get(LABEL_COLUMNS.min(line.len())..).unwrap_or("");
    if line.chars().count() <= TABLE_COLUMNS || after_label.trim_start().contains("  ") {
        return vec![line.to_string()];
    }
    wrap(line, width)
}

/// Breaks `line` at spaces into lines of at most `width` characters. A line that opens with a label (a word
/// padded to ten columns, as `note      ...`) continues under its text, not under the label; a word longer
/// than the room is left whole on a line of its own (a path is not cut). A line that fits comes back as it is.
pub fn wrap(line: &str, width: usize) -> Vec<String> {
    let chars = line.chars().count();
    if chars <= width || width < 2 * LABEL_COLUMNS {
        return vec![line.to_string()];
    }
    let labelled = line.chars().take(LABEL_COLUMNS).collect::<String>();
    let indent = if labelled.len() == LABEL_COLUMNS
        && labelled.ends_with(' ')
        && !labelled.starts_with(' ')
        && line.chars().nth(LABEL_COLUMNS).is_some_and(|c| c != ' ')
    {
        LABEL_COLUMNS
    } else {
        line.len() - line.trim_start().len()
    };
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut current_chars = 0usize;
    let start = line.len() - line.trim_start().len();
    let (lead, rest) = line.split_at(if indent == LABEL_COLUMNS {
        LABEL_COLUMNS
    } else {
        start
    });
    current.push_str(lead);
    current_chars += lead.chars().count();
    let mut at_line_start = true;
    // A figure and its unit stay on one line ("1 TiB", "3.2 ms"): a unit is joined to the word before it.
    let mut words: Vec<String> = Vec::new();
    for word in rest.split(' ').filter(|w| !w.is_empty()) {
        match words.last_mut() {
            Some(last) if is_unit(word) && ends_in_figure(last) => {
                last.push(' ');
                last.push_str(word);
            }
            _ => words.push(word.to_string()),
        }
    }
    for word in &words {
        let word_chars = word.chars().count();
        if !at_line_start && current_chars + 1 + word_chars > width {
            out.push(std::mem::take(&mut current));
            current.push_str(&" ".repeat(indent));
            current_chars = indent;
            at_line_start = true;
        }
        if !at_line_start {
            current.push(' ');
            current_chars += 1;
        }
        current.push_str(word);
        current_chars += word_chars;
        at_line_start = false;
    }
    out.push(current);
    out
}

/// Whether `word` ends in a figure: digits, perhaps with the count suffix ssdlab prints (98.4K, 3.14M, 1.20G).
fn ends_in_figure(word: &str) -> bool {
    let bare = word.strip_suffix(['K', 'M', 'G', 'T']).unwrap_or(word);
    bare.chars().last().is_some_and(|c| c.is_ascii_digit())
}

/// Whether `word` is a unit written after a figure, with any punctuation that follows it.
fn is_unit(word: &str) -> bool {
    const UNITS: [&str; 26] = [
        "B", "KiB", "MiB", "GiB", "TiB", "kB", "MB", "GB", "TB", "PB", "s", "ms", "µs", "ns", "min", "h",
        "kB/s", "MB/s", "GB/s", "TB/s", "KiB/s", "MiB/s", "GiB/s", "IOPS", "%", "ops",
    ];
    let bare = word.trim_end_matches([',', ';', '.', ':', ')']);
    UNITS.contains(&bare)
}

#[cfg(test)]
mod tests {
    use super::{fit_to_terminal, wrap};

    #[test]
    fn a_labelled_line_continues_under_its_text() {
        let line =
            "verdict   failed: the drive's write amplification of 3.2 exceeds the 2.0 allowed by --max-wa";
        let lines = wrap(line, 40);
        assert!(lines.len() > 2, "{lines:?}");
        assert!(lines.iter().all(|l| l.chars().count() <= 40), "{lines:?}");
        assert!(lines[0].starts_with("verdict   failed:"));
        assert!(
            lines[1..]
                .iter()
                .all(|l| l.starts_with("          ") && !l.starts_with("           "))
        );
        // Nothing lost and nothing added but the breaks.
        let words: Vec<&str> = lines.iter().flat_map(|l| l.split_whitespace()).collect();
        assert_eq!(words, line.split_whitespace().collect::<Vec<_>>());
    }

    #[test]
    fn a_line_that_fits_or_an_unlabelled_one_keeps_its_shape() {
        assert_eq!(wrap("note      short", 80), vec!["note      short"]);
        let table = "            ios   IOPS bandwidth    mean";
        assert_eq!(wrap(table, 80), vec![table]);
        let row = "read      9.41M 3.14M 12.8 GB/s 1.59 µs 1.57 µs 1.79 µs 1.92 µs 3.14 µs  160 µs";
        assert_eq!(fit_to_terminal(row, 60), vec![row], "a table row is not broken");
        let verdict = format!("verdict   failed: {}", "a reason of many words ".repeat(8));
        assert!(fit_to_terminal(&verdict, 60).len() > 3);
        let plain = "a plain sentence with no label that runs well past the width given";
        let lines = wrap(plain, 30);
        assert!(
            lines
                .iter()
                .all(|l| l.chars().count() <= 30 && !l.starts_with(' ')),
            "{lines:?}"
        );
    }

    #[test]
    fn a_figure_keeps_its_unit() {
        let line = "ssdlab    run randrw (70% reads), bs 4 KiB, qd 32, span 0+1 TiB, runtime 4.00 s, 86.3K IOPS, \
                    3.14M IOPS, 2.50 GiB/s, seed 1";
        for width in 40..80 {
            for l in wrap(line, width) {
                let first = l.split_whitespace().next().unwrap();
                assert!(!super::is_unit(first), "{width}: '{l}' opens with a unit");
            }
        }
    }

    #[test]
    fn a_word_longer_than_the_room_is_kept_whole() {
        let path = format!("/tmp/{}/result.json", "x".repeat(60));
        let lines = wrap(&format!("results   {path} (result.json, samples.csv)"), 40);
        assert!(lines.iter().any(|l| l.contains(&path)), "{lines:?}");
    }
}
