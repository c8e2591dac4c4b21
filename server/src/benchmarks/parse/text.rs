//! Reading job output as lines of text: what every parser shares.
//!
//! Job output is whatever the job printed, often through a launcher that tags each
//! line (`mpirun --tag-output`, `srun --label`, `mpirun -prepend-rank`) and through
//! progress bars that redraw a line with carriage returns. These helpers hand the
//! parsers the lines as the program wrote them.

/// The lines of `output` as the program printed them: split at `\n` and `\r`, with a
/// launcher's rank tag taken off the front and blanks at the end removed. Empty
/// lines are skipped.
pub fn lines(output: &str) -> impl Iterator<Item = &str> {
    output
        .split(['\n', '\r'])
        .map(|line| strip_launcher_tag(line).trim_end())
        .filter(|line| !line.is_empty())
}

/// `line` without the tag a parallel launcher puts before each line it relays:
/// `[1,0]<stdout>:` (Open MPI `--tag-output`), `0: ` (`srun --label`), `[0] `
/// (`mpirun -prepend-rank`).
pub fn strip_launcher_tag(line: &str) -> &str {
    let trimmed = line.trim_start();
    if let Some(rest) = trimmed.strip_prefix('[') {
        if let Some(close) = rest.find(']') {
            let (inside, after) = (&rest[..close], &rest[close + 1..]);
            let is_rank = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            // Open MPI: [job,rank]<stdout>: or <stderr>:
            if let Some((job, rank)) = inside.split_once(',') {
                if is_rank(job) && is_rank(rank) {
                    for stream in ["<stdout>:", "<stderr>:", "<stddiag>:"] {
                        if let Some(rest) = after.strip_prefix(stream) {
                            return rest;
                        }
                    }
                }
            }
            // MPICH / Intel MPI -prepend-rank: [rank] line
            if is_rank(inside) && after.starts_with(' ') {
                return &after[1..];
            }
        }
        return line;
    }
    // srun --label: "rank: line"
    let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && digits <= 6 {
        if let Some(rest) = trimmed[digits..].strip_prefix(": ") {
            return rest;
        }
    }
    line
}

/// A finite number, as a program prints one (`1658.47`, `2e-07`, `1,234.5` is not).
pub fn number(text: &str) -> Option<f64> {
    let value: f64 = text.trim().parse().ok()?;
    value.is_finite().then_some(value)
}

/// The first whitespace-separated word of `text` read as a number.
pub fn leading_number(text: &str) -> Option<f64> {
    number(text.split_whitespace().next()?)
}

/// A whole, positive count that fits a `u32` (`64`, `64.0`); anything else is none.
pub fn count(value: f64) -> Option<u32> {
    (value >= 1.0 && value.fract() == 0.0 && value <= f64::from(u32::MAX)).then_some(value as u32)
}

/// What follows `label` in `line`, where the label starts the line or follows a blank
/// or `|` (log prefixes such as `INFO|…|27| Model: resnet50`), trimmed.
pub fn field<'a>(line: &'a str, label: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(found) = line.get(from..)?.find(label) {
        let at = from + found;
        let starts_word = line[..at]
            .chars()
            .next_back()
            .is_none_or(|c| c.is_whitespace() || c == '|');
        if starts_word {
            return Some(line[at + label.len()..].trim());
        }
        from = at + label.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launcher_tags_come_off() {
        assert_eq!(
            strip_launcher_tag("[1,0]<stdout>:# Avg bus bandwidth    : 1.15327"),
            "# Avg bus bandwidth    : 1.15327"
        );
        assert_eq!(
            strip_launcher_tag("1: DLL 2022-05-12 14:09:13.825000 - () throughput_train : 37.348"),
            "DLL 2022-05-12 14:09:13.825000 - () throughput_train : 37.348"
        );
        assert_eq!(
            strip_launcher_tag("[0] :::MLLOG {\"key\": \"run_start\"}"),
            ":::MLLOG {\"key\": \"run_start\"}"
        );
        // Lines that only look like tags stay as they are.
        for line in [
            "           8             2     float     sum",
            "10\timages/sec: 181.0 +/- 0.1 (jitter = 0.2)\t8.122",
            "[01:16:19] ../src/storage/storage.cc:199: Using Pooled",
            "12:34:56 started",
            "[",
            "[1,x]<stdout>:",
        ] {
            assert_eq!(strip_launcher_tag(line), line);
        }
    }

    #[test]
    fn lines_split_at_carriage_returns_and_skip_blanks() {
        let got: Vec<_> = lines("a\r\n\rb  \n\n[1,0]<stdout>:c\n").collect();
        assert_eq!(got, ["a", "b", "c"]);
    }

    #[test]
    fn numbers_counts_and_fields() {
        assert_eq!(number(" 1658.47 "), Some(1658.47));
        assert_eq!(number("2e-07"), Some(2e-7));
        assert_eq!(number("inf"), None);
        assert_eq!(number("NaN"), None);
        assert_eq!(number("1,234"), None);
        assert_eq!(leading_number("64 per device"), Some(64.0));
        assert_eq!(count(64.0), Some(64));
        assert_eq!(count(32.5), None);
        assert_eq!(count(0.0), None);
        assert_eq!(count(1e12), None);
        assert_eq!(field("Model:       resnet50", "Model:"), Some("resnet50"));
        assert_eq!(
            field(
                "INFO|2024-12-07T13:55:32|/opt/launcher.py|27| total images/sec: 82.40",
                "total images/sec:"
            ),
            Some("82.40")
        );
        assert_eq!(field("SubModel: x", "Model:"), None);
    }
}
