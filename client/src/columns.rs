//! The output formats of squeue and sinfo: `-o "%.18i %j"` (a `%`, an optional `.`
//! for right-justified, a width, one letter, then literal text up to the next `%`) and
//! `-O "jobid:8,name"` (names, each with an optional `:[.]WIDTH[suffix]`, 20 wide and
//! left-justified without one). Parsing gives columns keyed by letter; each command
//! says what its letters mean and prints them through [`Column::cell`].
//! Pure: no IO.

/// One column: what it shows (a letter of the command's table), its width (0: as wide
/// as its value), justification and the text that follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub letter: char,
    pub width: usize,
    pub right: bool,
    pub suffix: String,
}

/// One piece of a format: a column, or text printed as it is (a prefix before the
/// first `%`, or a specification the command does not know, printed literally as
/// Slurm does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Column(Column),
}

/// A parsed format and the complaints about it (Slurm prints them and goes on).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Format {
    pub pieces: Vec<Piece>,
    pub warnings: Vec<String>,
}

/// `-o`'s grammar. `known` says whether a letter is one of the command's; `what` names
/// the kind in warnings (`job`, `job step`, `node`). `%all` is every known letter,
/// separated by `|`.
pub fn parse_percent(
    spec: &str,
    known: &dyn Fn(char) -> bool,
    letters: &str,
    what: &str,
) -> Format {
    let mut out = Format::default();
    if spec.eq_ignore_ascii_case("%all") {
        for (i, letter) in letters.chars().filter(|c| known(*c)).enumerate() {
            if i > 0 {
                out.pieces.push(Piece::Text("|".into()));
            }
            out.pieces.push(Piece::Column(Column {
                letter,
                width: 0,
                right: false,
                suffix: String::new(),
            }));
        }
        return out;
    }
    let mut tokens = spec.split('%');
    if let Some(prefix) = tokens.next() {
        if !prefix.is_empty() {
            out.pieces.push(Piece::Text(prefix.to_string()));
        }
    }
    for token in tokens {
        if token.is_empty() {
            continue;
        }
        let (right, rest) = match token.strip_prefix('.') {
            Some(r) => (true, r),
            None => (false, token),
        };
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        let width = rest[..digits].parse().unwrap_or(0);
        let mut chars = rest[digits..].chars();
        match chars.next() {
            Some(letter) if known(letter) => out.pieces.push(Piece::Column(Column {
                letter,
                width,
                right,
                suffix: chars.as_str().to_string(),
            })),
            Some(other) => {
                out.warnings
                    .push(format!("Invalid {what} format specification: {other}"));
                out.pieces.push(Piece::Text(format!("%{token}")));
            }
            None => {}
        }
    }
    out
}

/// `-O`'s grammar: `name[:[.][width][suffix]]`, comma-separated; `named` maps a name
/// (any case) to its letter. An unknown name is left out with a warning.
pub fn parse_long(spec: &str, named: &dyn Fn(&str) -> Option<char>, what: &str) -> Format {
    let mut out = Format::default();
    for item in spec.split(',') {
        if item.is_empty() {
            continue;
        }
        let (name, tail) = match item.split_once(':') {
            Some((n, t)) => (n, Some(t)),
            None => (item, None),
        };
        let Some(letter) = named(&name.to_ascii_lowercase()) else {
            out.warnings
                .push(format!("Invalid {what} format specification: {name}"));
            continue;
        };
        let (width, right, suffix) = match tail {
            None => (20, false, String::new()),
            Some(t) => {
                let (right, rest) = match t.strip_prefix('.') {
                    Some(r) => (true, r),
                    None => (false, t),
                };
                let digits = rest.chars().take_while(char::is_ascii_digit).count();
                (
                    rest[..digits].parse().unwrap_or(0),
                    right,
                    rest[digits..].to_string(),
                )
            }
        };
        out.pieces.push(Piece::Column(Column {
            letter,
            width,
            right,
            suffix,
        }));
    }
    out
}

impl Column {
    /// `value` in this column: `cut` values longer than the width keep their first
    /// characters; others overflow. Then the suffix.
    pub fn cell(&self, value: &str, cut: bool) -> String {
        let mut out = String::with_capacity(self.width.max(value.len()) + self.suffix.len());
        if self.width == 0 {
            out.push_str(value);
        } else {
            let len = value.chars().count();
            let shown: String = if cut && len > self.width {
                value.chars().take(self.width).collect()
            } else {
                value.to_string()
            };
            let pad = self.width.saturating_sub(shown.chars().count());
            if self.right {
                out.extend(std::iter::repeat_n(' ', pad));
                out.push_str(&shown);
            } else {
                out.push_str(&shown);
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(&self.suffix);
        out
    }
}

/// One line of a format: each column's cell from `cell(column)` (its text and whether
/// it may be cut), the literal text as it is.
pub fn render(format: &Format, mut cell: impl FnMut(&Column) -> (String, bool)) -> String {
    let mut line = String::new();
    for piece in &format.pieces {
        match piece {
            Piece::Text(t) => line.push_str(t),
            Piece::Column(c) => {
                let (value, cut) = cell(c);
                line.push_str(&c.cell(&value, cut));
            }
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    const LETTERS: &str = "ijPt";

    fn percent(spec: &str) -> Format {
        parse_percent(spec, &|c| LETTERS.contains(c), LETTERS, "job")
    }

    fn line(format: &Format, values: &[(char, &str)]) -> String {
        render(format, |c| {
            let v = values
                .iter()
                .find(|(l, _)| *l == c.letter)
                .map_or("", |(_, v)| *v);
            (v.to_string(), true)
        })
    }

    #[test]
    fn widths_justification_and_text_between_columns() {
        let f = percent("%.3i|%5j|%j|");
        let values = [('i', "3_[1-5]"), ('j', "longname")];
        assert_eq!(line(&f, &values), "3_[|longn|longname|");
        let f = percent("hdr %.5i%.10j|");
        assert_eq!(
            line(&f, &[('i', "13"), ('j', "pend2")]),
            "hdr    13     pend2|"
        );
        // Empty tokens are skipped; a width of 0 is the value as it is.
        assert_eq!(line(&percent("%%%0i"), &[('i', "12")]), "12");
    }

    #[test]
    fn an_unknown_letter_is_printed_as_written_with_a_warning() {
        let f = percent("%i %-10j");
        assert_eq!(f.warnings, ["Invalid job format specification: -"]);
        assert_eq!(line(&f, &[('i', "1")]), "1 %-10j");
    }

    #[test]
    fn all_is_every_letter_between_bars() {
        let f = percent("%ALL");
        assert_eq!(
            line(&f, &[('i', "1"), ('j', "a"), ('P', "p"), ('t', "R")]),
            "1|a|p|R"
        );
    }

    #[test]
    fn long_names_take_twenty_columns_unless_told() {
        let named = |n: &str| match n {
            "jobid" => Some('i'),
            "name" => Some('j'),
            "state" => Some('T'),
            _ => None,
        };
        let f = parse_long("jobid,name:.25,state:,bogus", &named, "job");
        assert_eq!(f.warnings, ["Invalid job format specification: bogus"]);
        let got = render(&f, |c| {
            (
                match c.letter {
                    'i' => "1",
                    'j' => "longname_job_abcdef",
                    _ => "RUNNING",
                }
                .to_string(),
                true,
            )
        });
        assert_eq!(got, "1                         longname_job_abcdefRUNNING");
        let f = parse_long("jobid:5|", &named, "job");
        assert_eq!(render(&f, |_| ("12".into(), true)), "12   |");
    }
}
