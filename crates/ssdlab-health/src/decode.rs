//! A saved output's bytes as text. Outputs reach ssdlab from every system: a PowerShell `>` writes UTF-16LE with
//! a byte-order mark, a Windows smartctl writes its code page (a model or a path with a Latin-1 byte), Linux
//! writes UTF-8. So: a byte-order mark first (UTF-8, UTF-16LE or UTF-16BE), then UTF-8, then Latin-1, which
//! every byte sequence is. The encoding used is said when it is not plain UTF-8.

/// Text and how it was decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub text: String,
    /// "UTF-16LE (byte-order mark)", "Latin-1 (not UTF-8 at byte 812)"; None for plain UTF-8.
    pub encoding_note: Option<String>,
}

/// Decodes `bytes`: never fails, since Latin-1 reads any byte.
pub fn decode(bytes: &[u8]) -> Decoded {
    if let Some(rest) = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]) {
        let mut decoded = decode(rest);
        decoded
            .encoding_note
            .get_or_insert_with(|| "UTF-8 with a byte-order mark".into());
        return decoded;
    }
    for (bom, name, big_endian) in [
        ([0xFF, 0xFE], "UTF-16LE", false),
        ([0xFE, 0xFF], "UTF-16BE", true),
    ] {
        if let Some(rest) = bytes.strip_prefix(&bom) {
            return utf16(rest, name, big_endian);
        }
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => Decoded {
            text: text.to_string(),
            encoding_note: None,
        },
        Err(e) => Decoded {
            text: bytes.iter().map(|&b| char::from(b)).collect(),
            encoding_note: Some(format!("read as Latin-1 (not UTF-8 at byte {})", e.valid_up_to())),
        },
    }
}

fn utf16(bytes: &[u8], name: &str, big_endian: bool) -> Decoded {
    let units = bytes.chunks(2).map(|pair| match (pair, big_endian) {
        ([a, b], false) => u16::from_le_bytes([*a, *b]),
        ([a, b], true) => u16::from_be_bytes([*a, *b]),
        // An odd trailing byte: a cut file; it reads as a replacement character.
        _ => 0xFFFD,
    });
    let mut replaced = 0usize;
    let text = char::decode_utf16(units)
        .map(|c| {
            c.unwrap_or_else(|_| {
                replaced += 1;
                char::REPLACEMENT_CHARACTER
            })
        })
        .collect();
    Decoded {
        text,
        encoding_note: Some(if replaced == 0 {
            format!("{name} (byte-order mark)")
        } else {
            format!("{name} (byte-order mark), {replaced} invalid code units replaced")
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::decode;

    #[test]
    fn byte_order_marks_then_utf8_then_latin1() {
        assert_eq!(decode("Model: é".as_bytes()).text, "Model: é");
        assert_eq!(decode("Model: é".as_bytes()).encoding_note, None);
        let latin1 = decode(b"Device Model: Caf\xe9 SSD\r\n");
        assert_eq!(latin1.text, "Device Model: Café SSD\r\n");
        assert!(latin1.encoding_note.unwrap().contains("not UTF-8 at byte 17"));
        let mut utf16le = vec![0xFF, 0xFE];
        utf16le.extend("smartctl é\r\n".encode_utf16().flat_map(u16::to_le_bytes));
        let d = decode(&utf16le);
        assert_eq!(d.text, "smartctl é\r\n");
        assert_eq!(d.encoding_note.as_deref(), Some("UTF-16LE (byte-order mark)"));
        let mut utf16be = vec![0xFE, 0xFF];
        utf16be.extend("ok".encode_utf16().flat_map(u16::to_be_bytes));
        assert_eq!(decode(&utf16be).text, "ok");
        assert_eq!(decode(b"\xEF\xBB\xBF{}").text, "{}");
    }
}
