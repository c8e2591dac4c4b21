//! Slurm's `print_fields` (its `src/common/print_fields.c`), the print engine of
//! `sacct`, `sshare` and `sstat`: a header of names over a line of dashes, each
//! column of a fixed width (negative: left-justified) followed by a blank, or
//! `--parsable` (every field followed by `|`) and `--parsable2` (fields separated
//! by `|`); text too long for its column cut with a `+`, numbers never cut, dates
//! cut silently, doubles as C's `%f` falling back to `%e` when too wide. Also
//! Slurm's list reader of field lists (`slurm_addto_char_list`: lower case, a
//! repeated name moves to the end). Pure; no IO.

/// How lines are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Columns of fixed width, each followed by a space.
    Fixed,
    /// `--parsable`: every field followed by the delimiter.
    Parsable,
    /// `--parsable2`: fields separated by the delimiter, none after the last.
    Parsable2,
}

/// What happens to a value longer than its column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Cut, its last kept character replaced by `+` (text).
    Plus,
    /// Cut silently, also in parsable output (dates).
    Silent,
    /// Never cut (numbers, durations).
    Never,
}

/// `text` in a column `width` wide (negative: left-justified), without the blank
/// that follows each column.
pub fn cell(text: &str, width: i32, cut: Cut) -> String {
    let w = width.unsigned_abs() as usize;
    let len = text.chars().count();
    let shown: String = if len > w {
        match cut {
            Cut::Plus => {
                let mut cut: String = text.chars().take(w.saturating_sub(1)).collect();
                if w > 0 {
                    cut.push('+');
                }
                cut
            }
            Cut::Silent => text.chars().take(w).collect(),
            Cut::Never => text.to_string(),
        }
    } else {
        text.to_string()
    };
    if width < 0 {
        format!("{shown:<w$}")
    } else {
        format!("{shown:>w$}")
    }
}

/// A value as printed in `layout`: in its column (fixed), or as it is (parsable;
/// dates are still cut to the column's width).
pub fn value(text: &str, width: i32, cut: Cut, layout: Layout) -> String {
    match (layout, cut) {
        (Layout::Fixed, _) => cell(text, width, cut),
        (_, Cut::Silent) => text.chars().take(width.unsigned_abs() as usize).collect(),
        _ => text.to_string(),
    }
}

/// One line of cells.
pub fn join(cells: Vec<String>, layout: Layout, delimiter: &str) -> String {
    match layout {
        Layout::Fixed => {
            let mut line = String::new();
            for c in cells {
                line.push_str(&c);
                line.push(' ');
            }
            line
        }
        Layout::Parsable => {
            let mut line = String::new();
            for c in cells {
                line.push_str(&c);
                line.push_str(delimiter);
            }
            line
        }
        Layout::Parsable2 => cells.join(delimiter),
    }
}

/// The header of columns `(name, width)`: the names (cut to their width, never
/// marked) and, in fixed width, a line of dashes.
pub fn header(columns: &[(&str, i32)], layout: Layout, delimiter: &str) -> Vec<String> {
    match layout {
        Layout::Fixed => {
            let names = columns
                .iter()
                .map(|(name, width)| {
                    let w = width.unsigned_abs() as usize;
                    let name: String = name.chars().take(w).collect();
                    if *width < 0 {
                        format!("{name:<w$}")
                    } else {
                        format!("{name:>w$}")
                    }
                })
                .collect();
            let dashes = columns
                .iter()
                .map(|(_, width)| "-".repeat(width.unsigned_abs() as usize))
                .collect();
            vec![
                join(names, layout, delimiter),
                join(dashes, layout, delimiter),
            ]
        }
        _ => vec![join(
            columns
                .iter()
                .map(|(name, _)| (*name).to_string())
                .collect(),
            layout,
            delimiter,
        )],
    }
}

/// C's `%.{precision}f`.
pub fn c_fixed(value: f64, precision: usize) -> String {
    if value.is_nan() {
        return if value.is_sign_negative() {
            "-nan"
        } else {
            "nan"
        }
        .into();
    }
    format!("{value:.precision$}")
}

/// C's `%.{precision}e` (`1.000000e+00`).
pub fn c_exp(value: f64, precision: usize) -> String {
    if !value.is_finite() {
        return c_fixed(value, 0);
    }
    let rust = format!("{value:.precision$e}");
    let Some((mantissa, exponent)) = rust.split_once('e') else {
        return rust;
    };
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
}

/// A double as `print_fields_double` prints it: `%f` (parsable), or `%*f` in its
/// column, switching to `%e` with as many digits as fit when `%f` is too wide.
pub fn double(value: f64, width: i32, layout: Layout) -> String {
    if layout != Layout::Fixed {
        return c_fixed(value, 6);
    }
    let w = width.unsigned_abs() as usize;
    let fixed = c_fixed(value, 6);
    let pad = |text: String, w: usize, left: bool| {
        if left {
            format!("{text:<w$}")
        } else {
            format!("{text:>w$}")
        }
    };
    if fixed.len() <= w {
        return pad(fixed, w, width < 0);
    }
    // C: the length of `%*.*e` (width and precision both `w`) decides how many
    // digits are kept; a negative width left-justifies and a negative precision
    // means the default, 6.
    let tried = c_exp(value, w).len().max(w) as i64;
    let keep = 2 * w as i64 - tried;
    if keep >= 0 {
        let keep = keep as usize;
        pad(c_exp(value, keep), keep, width < 0)
    } else {
        pad(c_exp(value, 6), keep.unsigned_abs() as usize, true)
    }
}

/// Read a list as Slurm's `slurm_addto_char_list` does, into `list`: items split
/// on commas (not within `[...]`), empty ones skipped, lower-cased; a leading
/// quote ends the list at its match and other quotes read as `` ` ``; an item
/// already listed (any case) moves to the end. Nothing at all adds one empty item.
pub fn addto_char_list(list: &mut Vec<String>, names: &str) {
    let mut chars: Vec<char> = names.chars().collect();
    let mut i = 0;
    let mut quote = None;
    if let Some(&q) = chars.first().filter(|c| **c == '"' || **c == '\'') {
        quote = Some(q);
        i = 1;
    }
    let before = list.len();
    let mut start = i;
    let mut in_brackets = false;
    let add = |list: &mut Vec<String>, item: String| {
        let item = item.to_lowercase();
        if let Some(at) = list.iter().position(|x| x.eq_ignore_ascii_case(&item)) {
            list.remove(at);
        }
        list.push(item);
    };
    while i < chars.len() {
        let c = chars[i];
        if Some(c) == quote {
            break;
        } else if c == '"' || c == '\'' {
            chars[i] = '`';
        } else if c == '[' {
            in_brackets = true;
        } else if c == ']' {
            in_brackets = false;
        } else if c == ',' && !in_brackets {
            if i + 1 == chars.len() {
                break;
            }
            if i != start {
                add(list, chars[start..i].iter().collect());
            }
            start = i + 1;
        }
        i += 1;
    }
    if list.len() == before || i > start {
        add(list, chars[start..i.max(start)].iter().collect());
    }
}

/// The first of `names` that begins with `item`, any case (an empty item: the
/// first name), as Slurm's field lists match (`strncasecmp`).
pub fn find_prefix(names: &[&str], item: &str) -> Option<usize> {
    let item = item.to_ascii_lowercase();
    names.iter().position(|n| {
        let n = n.to_ascii_lowercase();
        n.starts_with(&item)
    })
}

/// C's `atoi`: an optional sign and the digits that follow, else 0.
pub fn atoi(text: &str) -> i32 {
    let text = text.trim_start();
    let (sign, digits) = match text.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, text.strip_prefix('+').unwrap_or(text)),
    };
    let digits: String = digits.chars().take_while(char::is_ascii_digit).collect();
    digits.parse::<i32>().map_or(0, |n| sign * n)
}

/// `--helpformat`: the names, four to a line, each `width` wide, one blank between.
pub fn help_lines(names: &[&str], width: usize) -> Vec<String> {
    names
        .chunks(4)
        .map(|chunk| {
            let cells: Vec<String> = chunk.iter().map(|n| format!("{n:<width$}")).collect();
            cells.join(" ")
        })
        .collect()
}

/// A number of bytes as Slurm's `convert_num_unit` prints it with exact
/// conversion: divided by 1024 while at least 1024 and a multiple of 512
/// (`1692K`, `2.50M`); `raw`: the number as it is (`--noconvert`).
pub fn convert_num_unit(value: f64, raw: bool) -> String {
    const UNITS: [&str; 7] = ["", "K", "M", "G", "T", "P", "?"];
    if value as i64 == 0 {
        return "0".into();
    }
    let mut num = value;
    let mut unit = 0;
    if !raw {
        while num >= 1024.0 && (num as u64).is_multiple_of(512) {
            num /= 1024.0;
            unit += 1;
        }
    }
    let unit = UNITS[unit.min(UNITS.len() - 1)];
    let whole = num as u64;
    if whole as f64 == num {
        format!("{whole}{unit}")
    } else {
        format!("{num:.2}{unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_cut_text_with_a_plus_and_never_numbers() {
        assert_eq!(cell("COMPLETED", 3, Cut::Plus), "CO+");
        assert_eq!(cell("2026-11-27T17:36:02", 10, Cut::Silent), "2026-11-27");
        assert_eq!(cell("123456", 3, Cut::Never), "123456");
        assert_eq!(cell("ok", -5, Cut::Plus), "ok   ");
        assert_eq!(cell("ok", 5, Cut::Plus), "   ok");
        assert_eq!(
            header(&[("JobID", -6), ("State", 3)], Layout::Fixed, "|"),
            ["JobID  Sta ", "------ --- "]
        );
        assert_eq!(
            join(vec!["a".into(), "b".into()], Layout::Parsable, "|"),
            "a|b|"
        );
        assert_eq!(
            join(vec!["a".into(), "b".into()], Layout::Parsable2, "|"),
            "a|b"
        );
    }

    #[test]
    fn doubles_print_as_c_does_and_switch_to_exponents_when_too_wide() {
        assert_eq!(double(0.5, 11, Layout::Fixed), "   0.500000");
        assert_eq!(double(0.25, -10, Layout::Fixed), "0.250000  ");
        assert_eq!(double(f64::INFINITY, 10, Layout::Fixed), "       inf");
        assert_eq!(double(1.0, 10, Layout::Parsable), "1.000000");
        // sshare -o FairShare%5: the exponent form overflows its column.
        assert_eq!(double(1.0, 5, Layout::Fixed), "1.000000e+00");
        assert_eq!(double(1234.5, 10, Layout::Fixed), "1.2345e+03");
        assert_eq!(c_exp(0.000123, 2), "1.23e-04");
        assert_eq!(c_fixed(f64::NAN, 6), "nan");
    }

    #[test]
    fn field_lists_read_as_slurm_reads_them() {
        let mut list = Vec::new();
        addto_char_list(&mut list, "Account,USER,,rawu,account,");
        assert_eq!(list, ["user", "rawu", "account"]);
        let mut list = Vec::new();
        addto_char_list(&mut list, ",");
        assert_eq!(list, [""]);
        let mut list = Vec::new();
        addto_char_list(&mut list, "'a,b'c");
        assert_eq!(list, ["a", "b"]);
        assert_eq!(find_prefix(&["Account", "Cluster"], "cl"), Some(1));
        assert_eq!(find_prefix(&["Account", "Cluster"], ""), Some(0));
        assert_eq!(find_prefix(&["Account"], "x"), None);
        assert_eq!(atoi("-15x"), -15);
        assert_eq!(atoi("x"), 0);
    }

    #[test]
    fn bytes_are_converted_while_exact() {
        assert_eq!(convert_num_unit(1_732_608.0, false), "1692K");
        assert_eq!(convert_num_unit(1_732_608.0, true), "1732608");
        assert_eq!(convert_num_unit(3.0 * 1024.0 * 1024.0, false), "3M");
        assert_eq!(convert_num_unit(2.5 * 1024.0 * 1024.0, false), "2.50M");
        assert_eq!(convert_num_unit(0.0, false), "0");
        assert_eq!(convert_num_unit(1000.0, false), "1000");
    }
}
